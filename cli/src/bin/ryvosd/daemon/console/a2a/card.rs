//! The agent card (`GET /.well-known/agent-card.json`): who this agent is and what it does, as
//! `[a2a]` says, where it answers, and that it takes a bearer token (`ryvos token create`).
//! The card itself is public, as other agents find agents by it; nothing else is.

use crate::daemon::console::State;
use a2a::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme,
    SecurityScheme, TRANSPORT_PROTOCOL_JSONRPC,
};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::HashMap;

/// The security scheme's name in the card.
const BEARER: &str = "bearer";

pub(in crate::daemon::console) async fn card(
    axum::extract::State(state): axum::extract::State<State>,
) -> Response {
    let shared = &state.shared;
    let Some(console) = shared.console.as_ref() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if shared.a2a.is_none() {
        return StatusCode::NOT_FOUND.into_response();
    }
    let a2a = &shared.config.a2a;
    let skills = (a2a.skills.iter())
        .map(|s| AgentSkill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: s.tags.clone(),
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        })
        .collect();
    let scheme = SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
        scheme: "Bearer".into(),
        description: Some(
            "a token from `ryvos token create NAME --scope operate` (read: get and list only)"
                .into(),
        ),
        bearer_format: None,
    });
    let interface = AgentInterface::new(
        format!("{}/a2a", console.origin),
        TRANSPORT_PROTOCOL_JSONRPC,
    );
    Json(AgentCard {
        name: a2a.name.clone(),
        description: a2a.description.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![interface],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: None,
            extended_agent_card: Some(false),
        },
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into()],
        skills,
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: Some(HashMap::from([(BEARER.to_owned(), scheme)])),
        security_requirements: Some(vec![HashMap::from([(BEARER.to_owned(), Vec::new())])]),
        signatures: None,
    })
    .into_response()
}
