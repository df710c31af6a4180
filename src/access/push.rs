//! Where A2A callers asked to be told of their tasks: each task's push targets, kept with the
//! credentials so every daemon sharing the store tells them, whichever runs the task, and a
//! restarted one still does.

use super::{Access, AccessError};
use ryvos_actors::now_ms;
use ryvos_protocol::records::{Credential, CredentialKind, PushTarget};

/// The most targets one task may have: each is POSTed every update.
pub const MAX_PUSH_TARGETS: usize = 10;
/// The longest target id.
const MAX_ID: usize = 64;

impl Access {
    /// Keeps `target`, in place of the task's target of the same id; refused when the task has
    /// [`MAX_PUSH_TARGETS`] others or the id is not one.
    pub async fn set_push_target(&self, target: PushTarget) -> Result<(), AccessError> {
        check_push_target_id(&target.id)?;
        let others = (self.push_targets(&target.task).await?.iter())
            .filter(|held| held.id != target.id)
            .count();
        if others >= MAX_PUSH_TARGETS {
            return Err(AccessError::Refused(format!(
                "task {} has {MAX_PUSH_TARGETS} push configs, the most it may: delete one first",
                target.task
            )));
        }
        let id = target_id(&target.task, &target.id);
        // The same id again replaces it: a caller setting its config twice means the second.
        self.store.remove_credential(&id).await?;
        let credential = Credential {
            id,
            kind: CredentialKind::PushTarget(target),
            created_ms: now_ms(),
            expires_ms: None,
        };
        self.store.add_credential(&credential).await?;
        Ok(())
    }

    /// Task `task`'s push targets, in id order.
    pub async fn push_targets(&self, task: &str) -> Result<Vec<PushTarget>, AccessError> {
        let held = self.store.credentials(&target_id(task, "")).await?;
        Ok(held.into_iter().filter_map(target_of).collect())
    }

    /// Task `task`'s push target `id`, if it has one.
    pub async fn push_target(
        &self,
        task: &str,
        id: &str,
    ) -> Result<Option<PushTarget>, AccessError> {
        let held = self.store.credential(&target_id(task, id)).await?;
        Ok(held.and_then(target_of))
    }

    /// Forgets task `task`'s push target `id`; whether it had one.
    pub async fn remove_push_target(&self, task: &str, id: &str) -> Result<bool, AccessError> {
        Ok(self.store.remove_credential(&target_id(task, id)).await?)
    }
}

/// Whether `id` may name a push target.
pub fn check_push_target_id(id: &str) -> Result<(), AccessError> {
    let fine = !id.is_empty()
        && id.len() <= MAX_ID
        && (id.chars()).all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match fine {
        true => Ok(()),
        false => Err(AccessError::Refused(format!(
            "push config id {id:?} is not one: up to {MAX_ID} letters, digits, '-', '_' or '.'"
        ))),
    }
}

fn target_id(task: &str, id: &str) -> String {
    format!("push:{task}/{id}")
}

fn target_of(credential: Credential) -> Option<PushTarget> {
    match credential.kind {
        CredentialKind::PushTarget(target) => Some(target),
        _ => None,
    }
}
