//! The client against a peer on a real unix socket that answers as a daemon would, line by
//! line: what the client sends, how it reads what comes back, and how it says what went
//! wrong.

use ryvos_client::{Client, ClientError};
use ryvos_protocol::socket::{
    Cancel, ErrorCode, Interrupt, NoParams, SessionParams, Sessions, Shutdown,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;

/// The longest a test waits for the peer or the client; longer is a hang.
const WAIT: Duration = Duration::from_secs(30);

/// A socket whose one peer reads each request line and answers it with the lines `answer`
/// gives for it, or hangs up where it gives none; the requests it read.
struct Peer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    requests: tokio::task::JoinHandle<Vec<Value>>,
}

impl Peer {
    fn start(answer: impl Fn(&Value) -> Option<Vec<String>> + Send + 'static) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("ryvosd.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let requests = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            let mut seen = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                let request: Value = serde_json::from_str(&line).unwrap();
                let Some(replies) = answer(&request) else {
                    seen.push(request);
                    break;
                };
                for reply in replies {
                    if write
                        .write_all(format!("{reply}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                seen.push(request);
            }
            seen
        });
        Peer {
            _dir: dir,
            socket,
            requests,
        }
    }

    async fn client(&self) -> Client {
        tokio::time::timeout(WAIT, Client::connect(&self.socket))
            .await
            .unwrap()
            .unwrap()
    }

    async fn requests(self) -> Vec<Value> {
        tokio::time::timeout(WAIT, self.requests)
            .await
            .unwrap()
            .unwrap()
    }
}

#[tokio::test]
async fn a_call_skips_its_events_and_reads_its_result_as_the_methods() {
    let peer = Peer::start(|request| {
        let id = &request["id"];
        let event = json!({"id": id, "event": {"session_id": "s_1", "run_id": "r_1",
            "type": "Warning", "message": "slow disk"}});
        let result = json!({"id": id, "result": {"stopping": true}});
        Some(vec![event.to_string(), result.to_string()])
    });
    let mut client = peer.client().await;
    for _ in 0..2 {
        let answered = client.call::<Shutdown>(&NoParams {}).await.unwrap();
        assert!(answered.unwrap().stopping);
    }
    drop(client);
    let requests = peer.requests().await;
    let ids: Vec<&Value> = requests.iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2)], "ids rise from 1: {requests:?}");
    assert_eq!(requests[0]["method"], "shutdown");
}

#[tokio::test]
async fn the_daemons_error_is_the_calls_answer_and_the_connection_goes_on() {
    let peer = Peer::start(|request| {
        let id = &request["id"];
        let reply = match request["method"].as_str() {
            Some("interrupt") => json!({"id": id, "error": {"code": "not_found",
                "message": "no run of s_1 is in flight"}}),
            _ => json!({"id": id, "result": {"cancelled": true}}),
        };
        Some(vec![reply.to_string()])
    });
    let mut client = peer.client().await;
    let session = SessionParams {
        session: "s_1".into(),
    };
    let error = client
        .call::<Interrupt>(&session)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    assert!(error.message.contains("s_1"), "{error:?}");
    let cancelled = client.call::<Cancel>(&session).await.unwrap().unwrap();
    assert!(cancelled.cancelled);
    drop(client);
    let requests = peer.requests().await;
    assert_eq!(requests[0]["params"], json!({"session": "s_1"}));
}

#[tokio::test]
async fn a_result_of_another_shape_is_a_bad_reply_naming_the_method() {
    let peer = Peer::start(|request| {
        Some(vec![
            json!({"id": request["id"], "result": {"not": "a list"}}).to_string(),
        ])
    });
    let mut client = peer.client().await;
    let wrong = client.call::<Sessions>(&NoParams {}).await.unwrap_err();
    assert!(
        matches!(&wrong, ClientError::BadReply(why) if why.contains("sessions")),
        "{wrong}"
    );
}

#[tokio::test]
async fn a_line_that_is_not_a_reply_and_a_closed_connection_are_said_apart() {
    let peer = Peer::start(|request| match request["id"].as_u64() {
        Some(1) => Some(vec!["this is not json".into()]),
        _ => None,
    });
    let mut client = peer.client().await;
    let bad = client.call::<Shutdown>(&NoParams {}).await.unwrap_err();
    assert!(matches!(bad, ClientError::BadReply(_)), "{bad}");
    // The peer reads the second request and hangs up without answering.
    client.send::<Shutdown>(&NoParams {}).await.unwrap();
    assert_eq!(peer.requests().await.len(), 2);
    let lost = tokio::time::timeout(WAIT, client.next()).await.unwrap();
    assert!(
        matches!(&lost, Err(ClientError::Lost(why)) if why.contains("closed")),
        "{lost:?}"
    );
}

#[tokio::test]
async fn no_daemon_names_the_socket_it_tried() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ryvosd.sock");
    let Err(error) = Client::connect(&socket).await else {
        panic!("nothing listens at {}", socket.display());
    };
    assert!(matches!(error, ClientError::NoDaemon { .. }), "{error}");
    assert!(
        error.to_string().contains(&socket.display().to_string()),
        "{error}"
    );
}
