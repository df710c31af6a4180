//! The socket's `token_create`, `tokens` and `token_revoke`: bearer tokens for the HTTP door,
//! kept (hashed) in the store, so that every daemon sharing it admits them.

use super::Shared;
use ryvos::access::{AccessError, TokenInfo};
use ryvos::protocol::{
    ErrorBody, ErrorCode, TokenCreateParams, TokenCreated, TokenParams, TokenRevoked,
};

pub(super) async fn create(
    params: TokenCreateParams,
    shared: &Shared,
) -> Result<TokenCreated, ErrorBody> {
    let access = shared.runtime.access();
    let token = access
        .create_token(&params.name, params.scope)
        .await
        .map_err(refused)?;
    tracing::info!(name = %params.name, scope = params.scope.as_str(), "a token was made");
    Ok(TokenCreated {
        name: params.name,
        scope: params.scope,
        token,
    })
}

pub(super) async fn list(shared: &Shared) -> Result<Vec<TokenInfo>, ErrorBody> {
    shared.runtime.access().tokens().await.map_err(refused)
}

pub(super) async fn revoke(
    params: TokenParams,
    shared: &Shared,
) -> Result<TokenRevoked, ErrorBody> {
    let revoked = shared
        .runtime
        .access()
        .revoke_token(&params.name)
        .await
        .map_err(refused)?;
    if revoked {
        tracing::info!(name = %params.name, "a token was revoked");
    }
    Ok(TokenRevoked {
        name: params.name,
        revoked,
    })
}

fn refused(e: AccessError) -> ErrorBody {
    let code = match e {
        AccessError::Refused(_) => ErrorCode::BadRequest,
        AccessError::Store(_) => ErrorCode::Internal,
    };
    ErrorBody::new(code, e.to_string())
}
