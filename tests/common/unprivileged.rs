//! An unprivileged user for the tests that run `ryvosd` as users run it, not as root: made
//! once (when the tests run as root, as CI does) and handed the directories a test uses.

use std::path::Path;
use std::process::Command;

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
