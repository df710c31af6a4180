//! What the console's tests share: a home whose daemon serves it, and an HTTP client's
//! login and reads.

use super::home::{Home, WAIT};
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, ORIGIN, SET_COOKIE};
use reqwest::StatusCode;
use ryvos_testkit::ScriptedModelServer;
use serde_json::json;

/// A home whose daemon serves the console on a free loopback port; the default policy, under
/// which `bash` asks for approval.
pub fn console_home(server: &ScriptedModelServer) -> Home {
    Home::with_sections(server, "", "", "[http]\nlisten = \"127.0.0.1:0\"\n")
}

/// `ryvos console`'s link: (the console's origin, the code).
pub async fn login_link(home: &Home) -> (String, String) {
    let (code, out, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 0, "{err}");
    let url = out.trim();
    let (origin, code) = url
        .split_once("/#code=")
        .expect("the code is in the fragment");
    (origin.to_owned(), code.to_owned())
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(WAIT).build().unwrap()
}

/// Logs in with `code`: the session cookie (`name=value`), or the refusal's status.
pub async fn log_in(origin: &str, code: &str) -> Result<String, StatusCode> {
    let answer = client()
        .post(format!("{origin}/api/login"))
        .header(ORIGIN, origin)
        .json(&json!({ "code": code }))
        .send()
        .await
        .unwrap();
    if answer.status() != StatusCode::NO_CONTENT {
        return Err(answer.status());
    }
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    Ok(cookie.split(';').next().unwrap().to_owned())
}

pub async fn get(origin: &str, path: &str, cookie: Option<&str>) -> (StatusCode, String) {
    let mut request = client().get(format!("{origin}{path}"));
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, cookie);
    }
    let answer = request.send().await.unwrap();
    let csp = answer.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
    let status = answer.status();
    (status, answer.text().await.unwrap())
}
