use super::*;
use serde_json::json;

#[test]
fn requests_parse_and_bad_params_are_named() {
    let r: Request = serde_json::from_value(
        json!({"id": 3, "method": "run", "params": {"prompt": "hi", "workspace": "/w"}}),
    )
    .unwrap();
    assert!(matches!(r.method().unwrap(), Method::Run(p) if p.prompt == "hi"));
    let r: Request =
        serde_json::from_value(json!({"id": 4, "method": "run", "params": {"promt": "hi"}}))
            .unwrap();
    let e = r.method().unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("promt"), "{}", e.message);
    let r: Request = serde_json::from_value(json!({"id": 5, "method": "dance"})).unwrap();
    assert_eq!(r.method().unwrap_err().code, ErrorCode::UnknownMethod);
}

#[test]
fn replies_round_trip() {
    let line = serde_json::to_string(&Reply::Error {
        id: 9,
        error: ErrorBody::new(ErrorCode::Busy, "later"),
    })
    .unwrap();
    assert_eq!(
        line,
        r#"{"id":9,"error":{"code":"busy","message":"later"}}"#
    );
    let back: Reply = serde_json::from_str(&line).unwrap();
    assert!(matches!(back, Reply::Error { id: 9, .. }));
}

#[test]
fn every_method_refuses_parameters_it_does_not_know() {
    for method in METHODS {
        let r: Request = serde_json::from_value(
            json!({"id": 1, "method": method, "params": {"surprise": true}}),
        )
        .unwrap();
        let e = r.method().unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest, "{method}");
        assert!(e.message.contains("surprise"), "{method}: {}", e.message);
    }
    let bare: Request = serde_json::from_value(json!({"id": 2, "method": "status"})).unwrap();
    assert_eq!(bare.method().unwrap(), Method::Status(NoParams {}));
}
