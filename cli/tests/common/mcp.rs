//! Real MCP servers from npm for the tests: installed once into a cache directory, started by
//! Ryvos as `node <entry>`; every process a test's servers start carries a tag in its
//! environment, so the test can find (and count) them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The servers, pinned.
const PACKAGES: &[&str] = &[
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
];

/// Where they are installed: kept between test runs.
fn cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("npm-mcp")
}

/// The entry script of `package` (`server-everything`, `server-filesystem`), installing the
/// servers first if needed; `None`, said on stderr, when npm is not available.
pub fn server_entry(package: &str) -> Option<PathBuf> {
    static INSTALLED: Mutex<Option<bool>> = Mutex::new(None);
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    let entry = cache()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    if installed.is_none() {
        *installed = Some(entry.exists() || install());
    }
    if *installed == Some(true) && entry.exists() {
        return Some(entry);
    }
    eprintln!(
        "skipped: the MCP servers could not be installed with npm (install Node.js and npm to \
         run the MCP tests)"
    );
    None
}

fn install() -> bool {
    let dir = cache();
    std::fs::create_dir_all(&dir).unwrap();
    let status = std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .args(PACKAGES)
        .stdout(std::process::Stdio::null())
        .status();
    matches!(status, Ok(s) if s.success())
}

/// The node_modules the servers were installed into (for a fixture that needs their SDK).
pub fn node_modules() -> PathBuf {
    cache().join("node_modules")
}

/// A `[mcp.servers.NAME]` table starting `entry` (with `args`), its processes tagged `tag`.
pub fn server_table(name: &str, entry: &Path, args: &[&str], tag: &str, extra: &str) -> String {
    let args: Vec<String> = std::iter::once(entry.display().to_string())
        .chain(args.iter().map(|a| (*a).to_owned()))
        .map(|a| format!("{a:?}"))
        .collect();
    format!(
        "\n[mcp.servers.{name}]\ncommand = \"node\"\nargs = [{}]\nenv = {{ RYVOS_TEST_TAG = \"{tag}\" }}\n{extra}\n",
        args.join(", ")
    )
}

/// The pids of the running processes whose environment carries `tag`.
pub fn tagged_processes(tag: &str) -> Vec<i32> {
    let wanted = format!("RYVOS_TEST_TAG={tag}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == wanted.as_bytes()))
        })
        // A zombie has no environment left to read; one that is still listed is not running.
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| !stat.contains(") Z "))
        })
        .collect()
}
