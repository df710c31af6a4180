//! Ctrl-C during `ryvos run`. The first press pauses the run after its current step (status
//! `interrupted`: stored, and resumed with `ryvos run --resume ID`); the second stops waiting:
//! in-process the run is cancelled at once, through the daemon the client detaches and the run
//! goes on there.

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// The exit code of a run the user stopped with Ctrl-C, as shells expect (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Ctrl-C presses, counted.
pub struct CtrlC {
    presses: mpsc::UnboundedReceiver<()>,
    count: u32,
}

impl CtrlC {
    /// Starts listening: from the moment this returns, Ctrl-C no longer ends the process by
    /// itself.
    pub fn listen() -> Self {
        let (press, presses) = mpsc::unbounded_channel();
        match signal(SignalKind::interrupt()) {
            Ok(mut sigint) => {
                tokio::spawn(async move {
                    while sigint.recv().await.is_some() {
                        if press.send(()).is_err() {
                            break;
                        }
                    }
                });
            }
            Err(e) => eprintln!("ryvos: Ctrl-C cannot be caught ({e}); it ends ryvos at once"),
        }
        Self { presses, count: 0 }
    }

    /// Resolves at the next press, with how many there have been.
    pub async fn pressed(&mut self) -> u32 {
        if self.presses.recv().await.is_none() {
            // Listening failed: no press will come.
            std::future::pending::<()>().await;
        }
        self.count += 1;
        self.count
    }

    /// Forgets the presses so far (a chat's next run counts its own).
    pub fn reset(&mut self) {
        while self.presses.try_recv().is_ok() {}
        self.count = 0;
    }

    /// Whether Ctrl-C was pressed at all.
    pub fn was_pressed(&self) -> bool {
        self.count > 0
    }
}
