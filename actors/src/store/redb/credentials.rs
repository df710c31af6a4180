//! Credentials in the redb store: read from a snapshot, written in a transaction of their own
//! (on a blocking thread: redb's writer is one at a time, and may be busy with a commit).

use super::tables::CREDENTIALS;
use super::RedbStore;
use crate::store::{Context, StoreError};
use ryvos_protocol::records::Credential;

impl RedbStore {
    pub(super) fn read_credential(&self, id: &str) -> Result<Option<Credential>, StoreError> {
        let doing = || format!("reading credential {id}");
        CREDENTIALS.get(&self.read(doing)?, id, doing)
    }

    pub(super) fn read_credentials(&self, prefix: &str) -> Result<Vec<Credential>, StoreError> {
        let doing = || format!("reading the credentials {prefix}…");
        let txn = self.read(doing)?;
        let rows = CREDENTIALS.entries_in(&txn, prefix.., |id| id.to_owned(), doing)?;
        Ok(rows
            .into_iter()
            .take_while(|(id, _)| id.starts_with(prefix))
            .map(|(_, credential)| credential)
            .collect())
    }

    /// Runs `change` on the credentials table in one durable transaction; its answer.
    fn change_credentials<T>(
        &self,
        doing: impl Fn() -> String + Copy,
        change: impl FnOnce(
            &mut super::tables::Writer<'_, &'static str, Credential>,
        ) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db()?;
        let mut txn = db.begin_write().doing(doing)?;
        txn.set_durability(self.durability).doing(doing)?;
        let answer = {
            let mut table = CREDENTIALS.open(&txn, doing)?;
            change(&mut table)?
        };
        txn.commit().doing(doing)?;
        Ok(answer)
    }

    pub(super) fn write_new_credential(&self, credential: &Credential) -> Result<bool, StoreError> {
        let doing = || format!("storing credential {}", credential.id);
        self.change_credentials(doing, |table| {
            let taken = table
                .get(credential.id.as_str(), doing)?
                .is_some_and(|held| !held.expired(credential.created_ms));
            if !taken {
                table.insert(credential.id.as_str(), credential, doing)?;
            }
            Ok(!taken)
        })
    }

    pub(super) fn delete_credential(&self, id: &str) -> Result<bool, StoreError> {
        let doing = || format!("removing credential {id}");
        self.change_credentials(doing, |table| table.remove(id, doing))
    }

    pub(super) fn delete_expired_credentials(&self, now_ms: u64) -> Result<u64, StoreError> {
        let expired: Vec<String> = self
            .read_credentials("")?
            .into_iter()
            .filter(|c| c.expired(now_ms))
            .map(|c| c.id)
            .collect();
        if expired.is_empty() {
            return Ok(0);
        }
        let doing = || "removing expired credentials".to_string();
        self.change_credentials(doing, |table| {
            for id in &expired {
                table.remove(id.as_str(), doing)?;
            }
            Ok(expired.len() as u64)
        })
    }
}
