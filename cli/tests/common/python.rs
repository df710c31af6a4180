//! The official Python SDKs the tests use as the other side of a protocol (an editor for
//! ACP): installed once with pip into a virtual environment in a cache directory, pinned.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The packages, pinned.
const PACKAGES: &[&str] = &["agent-client-protocol==0.12.1", "a2a-sdk==1.3.0"];

/// Where they are installed: kept between test runs.
fn cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-sdks")
}

/// The virtual environment's Python, with the SDKs installed (first if needed); `None`, said
/// on stderr, where Python cannot install them. Under CI (`CI` set) that fails the test
/// instead: it must not pass unrun.
pub fn python() -> Option<PathBuf> {
    static INSTALLED: Mutex<Option<bool>> = Mutex::new(None);
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    let python = cache().join("bin/python");
    let ready = cache().join(".installed");
    if installed.is_none() {
        let current = std::fs::read_to_string(&ready).ok() == Some(PACKAGES.join("\n"));
        *installed = Some(current || install(&ready));
    }
    if *installed == Some(true) {
        return Some(python);
    }
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        !ci,
        "the Python SDKs could not be installed: apt-get install python3-venv, and PyPI must \
         be reachable"
    );
    eprintln!("skipped: the Python SDKs could not be installed (python3 -m venv, then pip)");
    None
}

fn install(ready: &Path) -> bool {
    let dir = cache();
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&dir)
        .status();
    if !matches!(made, Ok(s) if s.success()) {
        return false;
    }
    let pip = std::process::Command::new(dir.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(PACKAGES)
        .stdout(std::process::Stdio::null())
        .status();
    matches!(pip, Ok(s) if s.success()) && std::fs::write(ready, PACKAGES.join("\n")).is_ok()
}
