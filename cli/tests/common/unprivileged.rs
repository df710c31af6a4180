//! An unprivileged user for the tests that run `ryvosd` as users run it, not as root: made
//! once (when the tests run as root, as CI does) and handed the directories a test uses.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The user's name.
const NAME: &str = "ryvos-test";

/// The user's (uid, gid), made now if it does not exist yet.
pub fn user() -> (u32, u32) {
    if let Some(ids) = lookup() {
        return ids;
    }
    let made = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            NAME,
        ])
        .status()
        .expect("useradd runs");
    // Another test process may have made it meanwhile.
    assert!(
        made.success() || lookup().is_some(),
        "useradd {NAME} failed"
    );
    lookup().expect("the user exists")
}

fn lookup() -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, NAME]).output().ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

/// Makes `paths` (and everything in them) the user's.
pub fn hand_over(paths: &[&Path], uid: u32, gid: u32) {
    for path in paths {
        let owned = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(path)
            .status()
            .unwrap();
        assert!(owned.success(), "chown {}", path.display());
    }
}

/// Ryvos's program `name` (`ryvos`, `ryvosd`), where the user can run it: where cargo built it
/// when every directory above it lets others in, else a link or copy (with `ryvos-sandbox`
/// beside it, where the daemon looks for it) in a directory of its own, made once.
pub fn program(name: &str) -> PathBuf {
    let built = PathBuf::from(match name {
        "ryvos" => env!("CARGO_BIN_EXE_ryvos"),
        _ => env!("CARGO_BIN_EXE_ryvosd"),
    });
    let reachable = built
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if reachable {
        return built;
    }
    static COPIES: OnceLock<tempfile::TempDir> = OnceLock::new();
    let copies = COPIES.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("ryvos-bin-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let from = Path::new(env!("CARGO_BIN_EXE_ryvosd")).parent().unwrap();
        for program in ["ryvos", "ryvosd", "ryvos-sandbox"] {
            // A link costs nothing where it can be made (the directory outlives the tests).
            let (source, copy) = (from.join(program), dir.path().join(program));
            if std::fs::hard_link(&source, &copy).is_err() {
                std::fs::copy(&source, &copy).unwrap();
            }
        }
        dir
    });
    copies.path().join(name)
}
