//! Commands that run away, for the tests of the sandbox's limits.

/// Forks up to 1,200 children that each stay alive for three seconds, and prints how many it
/// started (`started N`) and why a fork failed (`fork failed: …`), if one did.
pub const FORK_MANY: &str = "python3 -c \"
import os, time
started = 0
for _ in range(1200):
    try:
        pid = os.fork()
    except OSError as e:
        print('fork failed:', e)
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    started += 1
print('started', started)
\"";

/// Allocates and touches `mib` MiB at once.
pub fn allocate(mib: u64) -> String {
    format!("python3 -c \"b = bytearray({mib} * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])\"")
}

/// The number a [`FORK_MANY`] run printed, if it got that far.
pub fn started(output: &str) -> Option<usize> {
    output
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|n| n.trim().parse().ok())
}
