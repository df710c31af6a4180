//! A confined program's output, as those who start one read it: each pipe read to its end with
//! the first bytes kept up to a cap (the rest counted, never buffered), and the process group
//! the program leads (the sandbox starts every program in a session of its own) killed whole.

use tokio::io::{AsyncRead, AsyncReadExt};

/// What a pipe said: the first bytes up to the cap, and how many there were in all.
#[derive(Default)]
pub(crate) struct Captured {
    pub bytes: Vec<u8>,
    pub total: usize,
}

/// Reads `pipe` to its end, keeping at most `cap` bytes.
pub(crate) async fn capture(pipe: Option<impl AsyncRead + Unpin>, cap: usize) -> Captured {
    let mut captured = Captured::default();
    let Some(mut pipe) = pipe else {
        return captured;
    };
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        captured.total += n;
        let room = cap.saturating_sub(captured.bytes.len());
        captured.bytes.extend_from_slice(&buf[..n.min(room)]);
    }
    captured
}

/// Kills the process group `group` leads, with everything in it.
pub(crate) fn kill_group(group: Option<i32>) {
    if let Some(pgid) = group {
        // SAFETY: killpg only sends a signal; the group is the one the program leads.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}
