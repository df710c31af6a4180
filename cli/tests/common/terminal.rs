//! A pseudo-terminal for the client: `ryvos` started as a person starts it, its stdin, stdout
//! and stderr a terminal whose line discipline turns a typed Ctrl-C into SIGINT.

use super::home::{Home, WAIT};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// `ryvos` running in a terminal of its own, and everything it wrote there.
pub struct Terminal {
    master: std::fs::File,
    child: tokio::process::Child,
    screen: Arc<Mutex<String>>,
    /// The terminal was closed: every process holding it has exited.
    closed: Arc<std::sync::atomic::AtomicBool>,
    /// Lines typed at a prompt so far, for a test that waits for the next prompt.
    pub typed_lines: usize,
}

impl Terminal {
    /// Starts `ryvos ARGS` in a new terminal, as its controlling terminal.
    pub fn start(home: &Home, args: &[&str]) -> Self {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes two new descriptors, which are owned below.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and nothing else owns them.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut command = home.command(env!("CARGO_BIN_EXE_ryvos"));
        command
            .args(args)
            .env("TERM", "xterm")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // A session of its own, with the terminal as its controlling one: the
                // terminal's Ctrl-C then signals this client's process group.
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        // The parent's copies of the slave end are gone once `command` is: the master then
        // reads end-of-file (EIO) when the client exits.
        drop(command);
        let master = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let written = screen.clone();
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let closing = closed.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Linux answers EIO once the last slave descriptor is closed.
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                let text = String::from_utf8_lossy(&buffer[..n]);
                written.lock().unwrap().push_str(&text);
            }
            closing.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Self {
            master,
            child,
            screen,
            closed,
            typed_lines: 0,
        }
    }

    /// Types `keys` at the terminal.
    pub fn types(&mut self, keys: &[u8]) {
        self.master.write_all(keys).unwrap();
    }

    /// Whether the terminal is as a shell wants it: lines edited by the kernel and echoed (not
    /// left in raw mode).
    pub fn is_cooked(&self) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: tcgetattr fills the struct it is given, on a descriptor this owns.
        let mut modes: libc::termios = unsafe { std::mem::zeroed() };
        let got = unsafe { libc::tcgetattr(self.master.as_raw_fd(), &mut modes) };
        assert_eq!(got, 0, "tcgetattr: {}", std::io::Error::last_os_error());
        modes.c_lflag & libc::ICANON != 0 && modes.c_lflag & libc::ECHO != 0
    }

    /// Waits until the terminal is cooked again ([`Self::is_cooked`]); fails the test if it
    /// never is.
    pub async fn becomes_cooked(&self) {
        let cooked = async {
            while !self.is_cooked() {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        if tokio::time::timeout(WAIT, cooked).await.is_err() {
            panic!("the terminal was left raw:\n{}", self.screen());
        }
    }

    /// Presses Ctrl-C.
    pub fn ctrl_c(&mut self) {
        self.types(b"\x03");
    }

    /// Everything written to the terminal so far.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits until the terminal shows `needle`; fails the test if it never does.
    pub async fn shows(&self, needle: &str) {
        let shown = async {
            while !self.screen().contains(needle) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        if tokio::time::timeout(WAIT, shown).await.is_err() {
            panic!("the terminal never showed {needle:?}:\n{}", self.screen());
        }
    }

    /// The client's exit code, and the whole screen.
    pub async fn ended(mut self) -> (Option<i32>, String) {
        let Ok(status) = tokio::time::timeout(WAIT, self.child.wait()).await else {
            panic!("the client never ended:\n{}", self.screen());
        };
        let status = status.unwrap();
        // What the client wrote last is on the screen once the terminal is closed.
        let drained = async {
            while !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(WAIT, drained)
            .await
            .expect("the terminal closes with the client");
        (status.code(), self.screen())
    }
}
