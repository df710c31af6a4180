//! Inside the command's network namespace, the inner layer bridges `127.0.0.1:3128` to the
//! egress proxy's unix socket (see [`super::egress`]): the namespace has no other way out.
//!
//! The inner layer forks before it confines itself: the child becomes the command, the parent
//! stays as the bridge (outside the command's Landlock domain, which cannot trace or signal
//! it) until the command ends, and leaves with its status.

use super::egress::BRIDGE_PORT;
use std::io;
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Listens on the bridge's port and forks: returns in the child, which goes on to become the
/// command; the parent serves until the child ends and exits with its status.
pub(super) fn serve_beside_command(socket: PathBuf) -> Result<(), String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, BRIDGE_PORT))
        .map_err(|e| format!("the egress bridge cannot listen: {e}"))?;
    // SAFETY: the inner layer is single-threaded here; the child only goes on to exec.
    match unsafe { libc::fork() } {
        -1 => Err(format!(
            "the egress bridge cannot fork: {}",
            io::Error::last_os_error()
        )),
        // The listener is close-on-exec: the command does not hold it.
        0 => Ok(()),
        child => {
            std::thread::spawn(move || accept(listener, socket));
            std::process::exit(wait_for(child))
        }
    }
}

fn accept(listener: TcpListener, socket: PathBuf) {
    for client in listener.incoming().flatten() {
        let socket = socket.clone();
        std::thread::spawn(move || {
            // A connection the proxy closed early (after refusing it) is the client's to see;
            // only a proxy that cannot be reached at all is worth a word on the command's
            // stderr.
            if let Err(e) = relay(client, &socket) {
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::ConnectionRefused
                {
                    eprintln!("ryvos-sandbox: the egress proxy cannot be reached: {e}");
                }
            }
        });
    }
}

/// Copies both ways between `client` and the proxy until either side closes.
fn relay(client: TcpStream, socket: &Path) -> io::Result<()> {
    let proxy = UnixStream::connect(socket)?;
    let (mut client_in, mut proxy_out) = (client.try_clone()?, proxy.try_clone()?);
    let upstream = std::thread::spawn(move || {
        let copied = io::copy(&mut client_in, &mut proxy_out);
        // The proxy learns the client is done sending.
        let _closing = proxy_out.shutdown(Shutdown::Write);
        copied
    });
    let (mut proxy_in, mut client_out) = (proxy, client);
    let copied = io::copy(&mut proxy_in, &mut client_out);
    let _closing = client_out.shutdown(Shutdown::Write);
    upstream
        .join()
        .map_err(|_| io::Error::other("the bridge's copying thread panicked"))??;
    copied.map(|_| ())
}

/// The child's exit status, as a shell reports it (128 + a signal that killed it).
fn wait_for(child: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; status is a plain integer on the stack.
        let waited = unsafe { libc::waitpid(child, &mut status, 0) };
        if waited == child {
            break;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return 126;
        }
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        126
    }
}
