//! The credentials' contract, checked the same way on every backend.

use super::Storage;
use ryvos_protocol::records::{Credential, CredentialKind, Scope};

fn token(name: &str, created_ms: u64) -> Credential {
    Credential {
        id: format!("token:{name}"),
        kind: CredentialKind::Token {
            name: name.into(),
            scope: Scope::Read,
            hash: "ab".into(),
        },
        created_ms,
        expires_ms: None,
    }
}

fn session(hash: &str, expires_ms: u64) -> Credential {
    Credential {
        id: format!("console:{hash}"),
        kind: CredentialKind::ConsoleSession,
        created_ms: 1,
        expires_ms: Some(expires_ms),
    }
}

/// Adds, reads, lists by prefix, refuses a taken id, lets an expired one be replaced, sweeps
/// the expired and removes.
pub(super) async fn credentials_keep_their_contract(store: &dyn Storage) {
    assert!(store.add_credential(&token("ci", 10)).await.unwrap());
    assert!(
        !store.add_credential(&token("ci", 20)).await.unwrap(),
        "a live id is not taken twice"
    );
    assert_eq!(
        store.credential("token:ci").await.unwrap(),
        Some(token("ci", 10))
    );
    assert!(store.add_credential(&token("deploy", 30)).await.unwrap());
    assert!(store.add_credential(&session("aa", 100)).await.unwrap());
    let tokens = store.credentials("token:").await.unwrap();
    assert_eq!(tokens, [token("ci", 10), token("deploy", 30)]);

    let mut renewed = session("aa", 500);
    renewed.created_ms = 100;
    assert!(
        store.add_credential(&renewed).await.unwrap(),
        "an expired holder gives way"
    );
    assert!(store.add_credential(&session("bb", 50)).await.unwrap());
    assert_eq!(store.remove_expired_credentials(200).await.unwrap(), 1);
    assert_eq!(store.credential("console:bb").await.unwrap(), None);
    assert_eq!(store.credential("console:aa").await.unwrap(), Some(renewed));

    assert!(store.remove_credential("token:ci").await.unwrap());
    assert!(!store.remove_credential("token:ci").await.unwrap());
    assert_eq!(
        store.credentials("token:").await.unwrap(),
        [token("deploy", 30)]
    );
}
