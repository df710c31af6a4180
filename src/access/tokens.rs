//! Bearer tokens for programs: `ryvos_NAME_SECRET`, named so that a leaked one is easy to
//! find and revoke, stored as the secret's hash under the name.

use super::{hash, secret, Access, AccessError, Scope, TokenInfo};
use ryvos_actors::now_ms;
use ryvos_protocol::records::{Credential, CredentialKind};

/// The longest token name.
const MAX_NAME: usize = 64;

impl Access {
    /// Makes token `name` with `scope`; the token, which is not kept and cannot be shown
    /// again. Refused when the name is taken or not a name.
    pub async fn create_token(&self, name: &str, scope: Scope) -> Result<String, AccessError> {
        check_name(name)?;
        let secret = secret();
        let token = Credential {
            id: token_id(name),
            kind: CredentialKind::Token {
                name: name.to_owned(),
                scope,
                hash: hash(&secret),
            },
            created_ms: now_ms(),
            expires_ms: None,
        };
        if !self.store.add_credential(&token).await? {
            return Err(AccessError::Refused(format!(
                "a token named {name} exists: revoke it first (`ryvos token revoke {name}`) \
                 or choose another name"
            )));
        }
        Ok(format!("ryvos_{name}_{secret}"))
    }

    /// The tokens, without their secrets, in name order.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, AccessError> {
        let stored = self.store.credentials("token:").await?;
        Ok(stored
            .into_iter()
            .filter_map(|c| match c.kind {
                CredentialKind::Token { name, scope, .. } => Some(TokenInfo {
                    name,
                    scope,
                    created_ms: c.created_ms,
                }),
                _ => None,
            })
            .collect())
    }

    /// Revokes token `name` on every daemon at once; whether there was one.
    pub async fn revoke_token(&self, name: &str) -> Result<bool, AccessError> {
        Ok(self.store.remove_credential(&token_id(name)).await?)
    }

    /// The live token `token` is, if it is one.
    pub async fn admit_token(&self, token: &str) -> Result<Option<TokenInfo>, AccessError> {
        let Some((name, secret)) = token
            .strip_prefix("ryvos_")
            .and_then(|rest| rest.rsplit_once('_'))
        else {
            return Ok(None);
        };
        if check_name(name).is_err() {
            return Ok(None);
        }
        let Some(held) = self.store.credential(&token_id(name)).await? else {
            return Ok(None);
        };
        Ok(match held.kind {
            CredentialKind::Token {
                name,
                scope,
                hash: h,
            } if h == hash(secret) => Some(TokenInfo {
                name,
                scope,
                created_ms: held.created_ms,
            }),
            _ => None,
        })
    }
}

fn token_id(name: &str) -> String {
    format!("token:{name}")
}

fn check_name(name: &str) -> Result<(), AccessError> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(fits) {
        return Err(AccessError::Refused(format!(
            "`{name}` is not a token name: use 1 to {MAX_NAME} letters, digits, `-`, `_` or `.`"
        )));
    }
    Ok(())
}
