//! Who holds the database file's lock, when another live process does: a `ryvos run` hosted
//! in-process in another terminal, or a ryvosd. The kernel lists every file lock, with its
//! owner's pid, in `/proc/locks`; redb's lock is a `flock` on the file.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A live `ryvos` hosting runs in-process (`run`, `chat`, `continue`, `stop`, `acp`,
/// `mcp-server`, or `ryvos` alone) other than this process that holds the lock on `path`: its
/// pid and command line. It keeps the lock for as long as it runs. A daemon stopping, or a
/// read command, lets go in a moment and is waited for. `None` where none does, or it cannot be told (not Linux, or the lock's
/// owner is gone or is not Ryvos: a program a stopped daemon was starting may keep the lock a
/// moment longer, and is waited for).
pub(super) fn live_holder(path: &Path) -> Option<(u32, String)> {
    let meta = std::fs::metadata(path).ok()?;
    let dev = meta.dev();
    let file = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF"
        let (kind, pid, on) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let pid: u32 = pid.parse().ok()?;
        if *kind != "FLOCK" || *on != file || pid == std::process::id() {
            return None;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let words: Vec<String> = (cmdline.split(|b| *b == 0))
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        let program = words
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())?;
        let hosting = ["run", "chat", "continue", "stop", "acp", "mcp-server"];
        let words_after = &words[1..];
        let hosts =
            words_after.is_empty() || words_after.iter().any(|w| hosting.contains(&w.as_str()));
        if program != "ryvos" || !hosts {
            return None;
        }
        let shown = std::iter::once(program)
            .chain(words.into_iter().skip(1))
            .collect::<Vec<_>>()
            .join(" ");
        Some((pid, crate::text::truncate(&shown, 80)))
    })
}
