//! `ryvos console`: the daemon's console address with a one-time login code in it; `--open`
//! hands it to the desktop's browser.

use crate::out::outln;
use ryvos::protocol::{Console, NoParams};
use std::path::Path;
use std::process::{Command, Stdio};

pub async fn console(open: bool, socket: &Path) -> u8 {
    let mut url = None;
    let code = crate::simple::<Console>(socket, &NoParams {}, |login| {
        outln!("{}", login.url);
        eprintln!(
            "ryvos: the link logs in once, within {} minutes; `ryvos console` again makes another",
            login.expires_in_secs / 60
        );
        url = Some(login.url.clone());
    })
    .await;
    if let (true, Some(url)) = (open, url) {
        let started = Command::new("xdg-open")
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Err(e) = started {
            eprintln!("ryvos: no browser could be started (xdg-open: {e}); open the link above");
        }
    }
    code
}
