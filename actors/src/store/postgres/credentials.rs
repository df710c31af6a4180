//! Credentials in PostgreSQL: one row each, shared by every daemon, so a token made through
//! one daemon works on all of them and a revoked one on none.

use super::{PgContext, PostgresStore};
use crate::store::StoreError;
use ryvos_protocol::records::Credential;
use tokio_postgres::types::Json;

impl PostgresStore {
    pub(super) async fn read_credential(&self, id: &str) -> Result<Option<Credential>, StoreError> {
        let doing = || format!("reading credential {id}");
        let sql = "SELECT record FROM credentials WHERE id = $1";
        self.record(sql, &[&id], doing).await
    }

    pub(super) async fn read_credentials(
        &self,
        prefix: &str,
    ) -> Result<Vec<Credential>, StoreError> {
        let doing = || format!("reading the credentials {prefix}…");
        let sql = "SELECT record FROM credentials WHERE starts_with(id, $1) ORDER BY id";
        self.records(sql, &[&prefix], doing).await
    }

    pub(super) async fn write_new_credential(
        &self,
        credential: &Credential,
    ) -> Result<bool, StoreError> {
        let doing = || format!("storing credential {}", credential.id);
        // An expired holder of the id gives way; a live one keeps it, whoever asks.
        let sql = "INSERT INTO credentials (id, record, expires_ms) VALUES ($1, $2, $3)
            ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record,
                expires_ms = EXCLUDED.expires_ms
            WHERE credentials.expires_ms IS NOT NULL AND credentials.expires_ms <= $4
            RETURNING 1";
        let expires = credential.expires_ms.map(|at| at as i64);
        let now = credential.created_ms as i64;
        let rows = self
            .rows(
                sql,
                &[&credential.id, &Json(credential), &expires, &now],
                doing,
            )
            .await?;
        Ok(!rows.is_empty())
    }

    pub(super) async fn delete_credential(&self, id: &str) -> Result<bool, StoreError> {
        let doing = || format!("removing credential {id}");
        let client = self.pool.get().await.pg(doing)?;
        let removed = client
            .execute("DELETE FROM credentials WHERE id = $1", &[&id])
            .await
            .pg(doing)?;
        Ok(removed > 0)
    }

    pub(super) async fn delete_expired_credentials(&self, now_ms: u64) -> Result<u64, StoreError> {
        let doing = || "removing expired credentials".to_string();
        let client = self.pool.get().await.pg(doing)?;
        client
            .execute(
                "DELETE FROM credentials WHERE expires_ms <= $1",
                &[&(now_ms as i64)],
            )
            .await
            .pg(doing)
    }
}
