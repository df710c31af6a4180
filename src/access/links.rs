//! Signed approval links: `REQUEST.ACTION.EXPIRES.NONCE.SIGNATURE`, an HMAC-SHA256 over the
//! rest under a key kept in the store (one for all daemons sharing it). A link is bound to
//! its request and its action, expires, and works once: its nonce is stored as spent.

use super::{hex, secret, Access, AccessError};
use hmac::{Hmac, KeyInit, Mac};
use ryvos_actors::now_ms;
use ryvos_protocol::records::{Credential, CredentialKind};
use sha2::Sha256;
use std::time::Duration;

const KEY_ID: &str = "link-key";

/// What a link does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkAction {
    Approve,
    Deny,
}

impl LinkAction {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkAction::Approve => "approve",
            LinkAction::Deny => "deny",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Approve, Self::Deny]
            .into_iter()
            .find(|a| a.as_str() == text)
    }
}

/// What a good link grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkGrant {
    pub request_id: String,
    pub action: LinkAction,
    pub expires_ms: u64,
}

/// Why a link grants nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefused {
    #[error("this is not an approval link (it was cut short or changed)")]
    Malformed,
    #[error("this link's signature does not match: it was changed, or made by another Ryvos")]
    Tampered,
    #[error("this link is for another approval request")]
    OtherRequest,
    #[error("this link expired: answer in the console, or wait for the next notification")]
    Expired,
    #[error("this link was already used: a link works once")]
    Used,
}

impl Access {
    /// A link that does `action` to approval request `request_id`, for `lifetime`.
    pub async fn sign_link(
        &self,
        request_id: &str,
        action: LinkAction,
        lifetime: Duration,
    ) -> Result<String, AccessError> {
        let expires = now_ms() + lifetime.as_millis() as u64;
        let nonce = &secret()[..32];
        let signed = format!("{request_id}.{}.{expires}.{nonce}", action.as_str());
        let signature = self.sign(&signed).await?;
        Ok(format!("{signed}.{signature}"))
    }

    /// What `link` grants for request `request_id`, without using it up.
    pub async fn check_link(
        &self,
        request_id: &str,
        link: &str,
    ) -> Result<Result<LinkGrant, LinkRefused>, AccessError> {
        let grant = match self.verified(request_id, link).await? {
            Ok(grant) => grant,
            refused => return Ok(refused),
        };
        Ok(match self.store.credential(&spent_id(link)).await? {
            Some(_) => Err(LinkRefused::Used),
            None => Ok(grant),
        })
    }

    /// Like [`Self::check_link`], and uses the link up: a second use is refused.
    pub async fn spend_link(
        &self,
        request_id: &str,
        link: &str,
    ) -> Result<Result<LinkGrant, LinkRefused>, AccessError> {
        let grant = match self.verified(request_id, link).await? {
            Ok(grant) => grant,
            refused => return Ok(refused),
        };
        // Spent links are what gathers where nobody logs in: each use sweeps the expired ones.
        self.store.remove_expired_credentials(now_ms()).await?;
        let spent = Credential {
            id: spent_id(link),
            kind: CredentialKind::SpentLink,
            created_ms: now_ms(),
            // Kept while the link could still be used; after that it is refused as expired.
            expires_ms: Some(grant.expires_ms),
        };
        // Stored only if it was not already: the store says whether this is the first use.
        Ok(match self.store.add_credential(&spent).await? {
            true => Ok(grant),
            false => Err(LinkRefused::Used),
        })
    }

    /// What `link` grants for request `request_id` if it is well formed, signed here, for that
    /// request and unexpired (whether it was used is not looked at).
    async fn verified(
        &self,
        request_id: &str,
        link: &str,
    ) -> Result<Result<LinkGrant, LinkRefused>, AccessError> {
        let Some((grant, (signed, signature))) = link
            .rsplit_once('.')
            .and_then(|(signed, signature)| Some((parse(signed)?, (signed, signature))))
        else {
            return Ok(Err(LinkRefused::Malformed));
        };
        if !self.verify(signed, signature).await? {
            return Ok(Err(LinkRefused::Tampered));
        }
        if grant.request_id != request_id {
            return Ok(Err(LinkRefused::OtherRequest));
        }
        if grant.expires_ms <= now_ms() {
            return Ok(Err(LinkRefused::Expired));
        }
        Ok(Ok(grant))
    }

    /// `text`'s signature under the store's link key (made on first use).
    async fn sign(&self, text: &str) -> Result<String, AccessError> {
        let mac = self.mac(text).await?;
        Ok(hex(&mac.finalize().into_bytes()))
    }

    /// Whether `signature` is `text`'s, compared in constant time (a comparison that stops at
    /// the first wrong byte would let a forger find a signature byte by byte).
    async fn verify(&self, text: &str, signature: &str) -> Result<bool, AccessError> {
        let Some(bytes) = unhex(signature) else {
            return Ok(false);
        };
        Ok(self.mac(text).await?.verify_slice(&bytes).is_ok())
    }

    async fn mac(&self, text: &str) -> Result<Hmac<Sha256>, AccessError> {
        let key = self.link_key().await?;
        let mut mac =
            Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes a key of any length");
        mac.update(text.as_bytes());
        Ok(mac)
    }

    /// The store's link key: read (or made) once, then kept.
    async fn link_key(&self) -> Result<String, AccessError> {
        self.link_key
            .get_or_try_init(|| self.stored_link_key())
            .await
            .cloned()
    }

    async fn stored_link_key(&self) -> Result<String, AccessError> {
        for _ in 0..2 {
            if let Some(Credential {
                kind: CredentialKind::LinkKey { key },
                ..
            }) = self.store.credential(KEY_ID).await?
            {
                return Ok(key);
            }
            let made = Credential {
                id: KEY_ID.into(),
                kind: CredentialKind::LinkKey { key: secret() },
                created_ms: now_ms(),
                expires_ms: None,
            };
            // Another daemon may have made one first: then its key is everyone's.
            self.store.add_credential(&made).await?;
        }
        Err(AccessError::Refused(format!(
            "the store's credential `{KEY_ID}` is not a link key: remove it, and a new one \
             is made (links made before stop working)"
        )))
    }
}

/// The grant `signed` says, if it is one (its nonce only makes each link unique).
fn parse(signed: &str) -> Option<LinkGrant> {
    let mut parts = signed.rsplitn(4, '.');
    let _nonce = parts.next()?;
    let expires_ms = parts.next()?.parse().ok()?;
    let action = LinkAction::parse(parts.next()?)?;
    let request_id = parts.next()?.to_owned();
    Some(LinkGrant {
        request_id,
        action,
        expires_ms,
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).ok())
        .collect()
}

fn spent_id(link: &str) -> String {
    format!("spent:{}", super::hash(link))
}
