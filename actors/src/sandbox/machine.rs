//! What the machine offers the sandbox: bubblewrap (tried once), the inner layer's program,
//! and the kernel's Landlock ABI.

use super::bubblewrap;
use std::path::PathBuf;

/// The inner layer's program.
const INNER_PROGRAM: &str = "ryvos-sandbox";

/// What this machine offers the sandbox: each piece, or why it is missing.
#[derive(Clone, Debug)]
pub struct Machine {
    /// bubblewrap, checked to make namespaces here.
    pub bubblewrap: Result<PathBuf, String>,
    /// The inner layer's program.
    pub inner: Result<PathBuf, String>,
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i32,
}

impl Machine {
    /// What this machine has, looked for and tried now (bubblewrap as the user commands run
    /// as: `user`'s uid and gid where the daemon lends them one).
    pub fn detect(user: Option<(u32, u32)>) -> Self {
        let bubblewrap = match bubblewrap::find() {
            Some(path) => bubblewrap::probe(&path, user).map(|()| path),
            None => Err("bubblewrap (bwrap) is not installed: install it (Debian and Ubuntu:                          apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
                .into()),
        };
        Self {
            bubblewrap,
            inner: find_inner(),
            landlock_abi: kernel_abi(),
        }
    }
}

/// Where `ryvos-sandbox` is: `RYVOS_SANDBOX_PROGRAM`, else beside the running program (or one
/// directory up, where cargo keeps test programs under `deps/`), else on `PATH`.
fn find_inner() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("RYVOS_SANDBOX_PROGRAM") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok();
    let beside = exe
        .iter()
        .flat_map(|exe| exe.ancestors().skip(1).take(2))
        .map(|dir| dir.join(INNER_PROGRAM));
    beside
        .chain(bubblewrap::find_on_path(INNER_PROGRAM))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{INNER_PROGRAM}, the sandbox's inner layer, is not installed beside {} nor on                  PATH: install it with Ryvos (cargo install --path cli installs ryvos, ryvosd and                  {INNER_PROGRAM}), or name it in RYVOS_SANDBOX_PROGRAM",
                exe.map(|e| e.display().to_string()).unwrap_or_default()
            )
        })
}

/// The Landlock ABI the kernel offers; 0 when it has none.
fn kernel_abi() -> i32 {
    #[cfg(target_os = "linux")]
    {
        super::landlock::kernel_abi()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}
