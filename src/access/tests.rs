use super::links::{LinkAction, LinkRefused};
use super::*;

fn access() -> (tempfile::TempDir, Access) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store.redb"), true).unwrap();
    (dir, Access::new(store))
}

#[tokio::test]
async fn a_token_admits_with_its_scope_until_revoked_and_is_never_listed() {
    let (_dir, access) = access();
    let token = access.create_token("ci_bot", Scope::Read).await.unwrap();
    assert!(token.starts_with("ryvos_ci_bot_"));
    assert_eq!(
        access.admit_token(&token).await.unwrap().map(|t| t.scope),
        Some(Scope::Read)
    );
    let taken = access.create_token("ci_bot", Scope::Operate).await;
    assert!(matches!(taken, Err(AccessError::Refused(_))));
    assert!(access.create_token("no spaces", Scope::Read).await.is_err());

    let listed = access.tokens().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].scope),
        ("ci_bot", Scope::Read)
    );
    // The secret's last digit changed (to one it is not).
    let other = if token.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{other}", &token[..token.len() - 1]);
    assert_eq!(access.admit_token(&forged).await.unwrap(), None);
    assert_eq!(access.admit_token("ryvos_ci_bot").await.unwrap(), None);

    assert!(access.revoke_token("ci_bot").await.unwrap());
    assert_eq!(access.admit_token(&token).await.unwrap(), None);
    assert!(!access.revoke_token("ci_bot").await.unwrap());
}

#[tokio::test]
async fn a_console_session_is_open_until_closed() {
    let (_dir, access) = access();
    let cookie = access.open_session().await.unwrap();
    assert!(access.session_is_open(&cookie).await.unwrap());
    assert!(!access.session_is_open("guess").await.unwrap());
    access.close_session(&cookie).await.unwrap();
    assert!(!access.session_is_open(&cookie).await.unwrap());
}

#[tokio::test]
async fn a_link_works_once_for_its_request_and_its_action_only() {
    let (_dir, access) = access();
    let hour = std::time::Duration::from_secs(3600);
    let link = access
        .sign_link("a_1", LinkAction::Approve, hour)
        .await
        .unwrap();
    let grant = access.check_link("a_1", &link).await.unwrap().unwrap();
    assert_eq!(grant.action, LinkAction::Approve);
    assert_eq!(
        access.check_link("a_2", &link).await.unwrap(),
        Err(LinkRefused::OtherRequest)
    );
    let tampered = link.replacen(".approve.", ".deny.", 1);
    assert_eq!(
        access.check_link("a_1", &tampered).await.unwrap(),
        Err(LinkRefused::Tampered)
    );
    assert_eq!(
        access.check_link("a_1", "a_1.approve").await.unwrap(),
        Err(LinkRefused::Malformed)
    );
    assert!(access.spend_link("a_1", &link).await.unwrap().is_ok());
    assert_eq!(
        access.spend_link("a_1", &link).await.unwrap(),
        Err(LinkRefused::Used)
    );
    let expired = access
        .sign_link("a_1", LinkAction::Deny, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        access.check_link("a_1", &expired).await.unwrap(),
        Err(LinkRefused::Expired)
    );
}

#[tokio::test]
async fn using_a_link_sweeps_the_spent_links_that_have_expired() {
    let (_dir, access) = access();
    let brief = access
        .sign_link(
            "a_1",
            LinkAction::Approve,
            std::time::Duration::from_millis(50),
        )
        .await
        .unwrap();
    assert!(access.spend_link("a_1", &brief).await.unwrap().is_ok());
    let spent = || async { access.store.credentials("spent").await.unwrap().len() };
    assert_eq!(spent().await, 1);
    // Once the brief link has expired, the next use sweeps its record away.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let hour = std::time::Duration::from_secs(3600);
    let next = access
        .sign_link("a_2", LinkAction::Deny, hour)
        .await
        .unwrap();
    assert!(access.spend_link("a_2", &next).await.unwrap().is_ok());
    assert_eq!(spent().await, 1, "only the live link's use is kept");
}

#[tokio::test]
async fn a_tasks_push_targets_are_kept_replaced_by_id_bounded_and_removed() {
    let (_dir, access) = access();
    let target = |task: &str, id: &str, url: &str| PushTarget {
        task: task.into(),
        id: id.into(),
        url: url.into(),
        token: Some("t".into()),
        auth_scheme: None,
        auth_credentials: None,
    };
    let task = "r_1@s_1";
    access
        .set_push_target(target(task, "a", "http://one.example/"))
        .await
        .unwrap();
    access
        .set_push_target(target(task, "a", "http://two.example/"))
        .await
        .unwrap();
    // A task whose id starts as this one's does is another task.
    access
        .set_push_target(target("r_1@s_10", "a", "http://other.example/"))
        .await
        .unwrap();
    let held = access.push_targets(task).await.unwrap();
    assert_eq!(held, vec![target(task, "a", "http://two.example/")]);

    for n in 1..MAX_PUSH_TARGETS {
        let id = format!("n{n}");
        let url = "http://x.example/";
        access
            .set_push_target(target(task, &id, url))
            .await
            .unwrap();
    }
    let over = access.set_push_target(target(task, "over", "http://x.example/"));
    assert!(matches!(over.await, Err(AccessError::Refused(_))));
    let bad_id = access.set_push_target(target(task, "a/b", "http://x.example/"));
    assert!(matches!(bad_id.await, Err(AccessError::Refused(_))));

    assert!(access.remove_push_target(task, "a").await.unwrap());
    assert!(!access.remove_push_target(task, "a").await.unwrap());
    assert_eq!(access.push_target(task, "a").await.unwrap(), None);
    assert_eq!(
        access.push_targets(task).await.unwrap().len(),
        MAX_PUSH_TARGETS - 1
    );
}
