//! A real headless Chromium for the console's tests (Debian's `chromium`), driven through its
//! WebDriver, `chromedriver`, with a phone's window.

use fantoccini::{Client, ClientBuilder, Locator};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// The longest a test waits for the browser to show something; longer is a failure.
const SHOWN_WITHIN: Duration = Duration::from_secs(30);

/// A browser session, and the chromedriver it goes through (killed with it).
pub struct Browser {
    pub client: Client,
    _driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A fresh browser (no cookies), or `None` where Chromium is not installed, said on stderr;
    /// under CI (`CI` set) a missing browser fails the test instead: it must not pass unrun.
    pub async fn start() -> Option<Browser> {
        let installed = ["/usr/bin/chromium", "/usr/bin/chromedriver"]
            .iter()
            .all(|p| std::path::Path::new(p).exists());
        if !installed {
            let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0");
            assert!(
                !ci,
                "Chromium is needed: apt-get install chromium chromium-driver"
            );
            eprintln!("skipped: needs Chromium (apt-get install chromium chromium-driver)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let capabilities = serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new",
                    // Its own sandbox needs what a root or containerized test run lacks.
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--window-size=390,844",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal");
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let webdriver = format!("http://127.0.0.1:{port}");
        let client = tokio::time::timeout(SHOWN_WITHIN, async {
            loop {
                let mut builder = ClientBuilder::new(connector.clone());
                match builder
                    .capabilities(capabilities.clone())
                    .connect(&webdriver)
                    .await
                {
                    Ok(client) => return client,
                    // chromedriver is not listening yet.
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
        .await
        .expect("chromedriver answers and starts Chromium");
        Some(Browser {
            client,
            _driver: driver,
            _profile: profile,
        })
    }

    /// The text of the first element `css` finds, once there is one whose text has `wanted`.
    pub async fn text_with(&self, css: &str, wanted: &str) -> String {
        let found = tokio::time::timeout(SHOWN_WITHIN, async {
            loop {
                if let Ok(elements) = self.client.find_all(Locator::Css(css)).await {
                    for element in elements {
                        let text = element.text().await.unwrap_or_default();
                        if text.contains(wanted) {
                            return text;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let source = async { self.client.source().await.unwrap_or_default() };
        match found.await {
            Ok(text) => text,
            Err(_) => panic!("no `{css}` shows `{wanted}`; the page: {}", source.await),
        }
    }

    /// The element `locator` finds, which must be there.
    pub async fn find(&self, locator: Locator<'_>) -> fantoccini::elements::Element {
        (self.client.find(locator).await)
            .unwrap_or_else(|e| panic!("the page has no {locator:?}: {e}"))
    }

    pub async fn close(self) {
        self.client.close().await.ok();
    }
}
