//! Read credentials a catalog vends for a table, handed to the object store as its
//! credential provider and renewed before they expire, so a pipeline that follows a
//! table for days never reads with credentials that ran out.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use delta_kernel::object_store::aws::AwsCredential;
use delta_kernel::object_store::azure::AzureCredential;
use delta_kernel::object_store::gcp::GcpCredential;
use delta_kernel::object_store::{self, CredentialProvider};
use futures::lock::Mutex;
use sluice_catalog::{
    Catalog, CatalogError, CatalogTable, StorageCredentials, TemporaryCredentials,
};

use crate::store_kind::StoreKind;

/// Credentials are renewed when less than this is left of them (or less than half of
/// their life, for short-lived ones).
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// A table's vended credentials: the current ones and where to get the next.
#[derive(Debug)]
pub(crate) struct VendedCredentials {
    catalog: Arc<dyn Catalog>,
    table: CatalogTable,
    /// The kind of credentials the catalog vends for the table, in words.
    kind: &'static str,
    held: Mutex<Held>,
}

#[derive(Debug)]
struct Held {
    credentials: TemporaryCredentials,
    fetched_at: SystemTime,
}

impl Held {
    fn renew_due(&self, now: SystemTime) -> bool {
        let Some(expires_at) = self.credentials.expires_at else {
            return false;
        };
        let life = expires_at
            .duration_since(self.fetched_at)
            .unwrap_or_default();
        let left = expires_at.duration_since(now).unwrap_or_default();
        left < RENEW_BEFORE.min(life / 2)
    }
}

impl VendedCredentials {
    /// Asks `catalog` for `table`'s first credentials, which must be for `store`.
    pub async fn fetch(
        catalog: Arc<dyn Catalog>,
        table: CatalogTable,
        store: StoreKind,
    ) -> Result<VendedCredentials, CatalogError> {
        let credentials = fresh(catalog.as_ref(), &table).await?;
        let fits = matches!(
            (&credentials.storage, store),
            (StorageCredentials::None, _)
                | (StorageCredentials::Aws { .. }, StoreKind::S3)
                | (StorageCredentials::AzureSas { .. }, StoreKind::Azure)
                | (StorageCredentials::Gcp { .. }, StoreKind::Gcs)
        );
        if !fits {
            return Err(CatalogError::Refused {
                catalog: catalog.describe(),
                table: table.name.to_string(),
                action: "asking for read credentials for",
                status: 200,
                message: format!(
                    "{} for a table in {store} at {}",
                    credentials.storage.kind(),
                    table.location
                ),
            });
        }
        Ok(VendedCredentials {
            kind: credentials.storage.kind(),
            held: Mutex::new(Held {
                credentials,
                fetched_at: SystemTime::now(),
            }),
            catalog,
            table,
        })
    }

    /// Where the credentials come from, in words.
    pub fn source(&self) -> String {
        format!(
            "{} vended by {} for {} (renewed before they expire)",
            self.kind,
            self.catalog.describe(),
            self.table.name
        )
    }

    /// The credentials to sign the next request with, renewed first when due.
    async fn current(&self) -> object_store::Result<StorageCredentials> {
        let mut held = self.held.lock().await;
        if held.renew_due(SystemTime::now()) {
            let credentials = fresh(self.catalog.as_ref(), &self.table)
                .await
                .map_err(|e| object_store::Error::Generic {
                    store: "catalog",
                    source: Box::new(e),
                })?;
            tracing::info!(
                table = %self.table.name,
                catalog = %self.catalog.describe(),
                "Renewed the table's read credentials from its catalog before they expired."
            );
            *held = Held {
                credentials,
                fetched_at: SystemTime::now(),
            };
        }
        Ok(held.credentials.storage.clone())
    }
}

/// New credentials, refused when they have already expired (the catalog's clock or
/// this host's is wrong, and every read would fail with an unclear signature error).
async fn fresh(
    catalog: &dyn Catalog,
    table: &CatalogTable,
) -> Result<TemporaryCredentials, CatalogError> {
    let credentials = catalog.read_credentials(table).await?;
    match credentials.expires_at {
        Some(expires_at) if expires_at <= SystemTime::now() => Err(CatalogError::Refused {
            catalog: catalog.describe(),
            table: table.name.to_string(),
            action: "asking for read credentials for",
            status: 200,
            message: format!(
                "credentials that expired at {} (now {}); check the clocks of this host and the catalog",
                humantime::format_rfc3339_seconds(expires_at),
                humantime::format_rfc3339_seconds(SystemTime::now())
            ),
        }),
        _ => Ok(credentials),
    }
}

fn unfit(held: &StorageCredentials, store: &'static str) -> object_store::Error {
    object_store::Error::Generic {
        store,
        source: format!("the catalog vended {} for a table in {store}", held.kind()).into(),
    }
}

/// The vended credentials as S3 reads them.
#[derive(Debug)]
pub(crate) struct ForS3(pub Arc<VendedCredentials>);

#[async_trait]
impl CredentialProvider for ForS3 {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        match self.0.current().await? {
            StorageCredentials::Aws {
                access_key_id,
                secret_access_key,
                session_token,
            } => Ok(Arc::new(AwsCredential {
                key_id: access_key_id,
                secret_key: secret_access_key,
                token: session_token,
            })),
            other => Err(unfit(&other, "S3")),
        }
    }
}

/// The vended credentials as Azure reads them.
#[derive(Debug)]
pub(crate) struct ForAzure(pub Arc<VendedCredentials>);

#[async_trait]
impl CredentialProvider for ForAzure {
    type Credential = AzureCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AzureCredential>> {
        match self.0.current().await? {
            StorageCredentials::AzureSas { sas_token } => {
                let pairs =
                    url::form_urlencoded::parse(sas_token.trim_start_matches('?').as_bytes())
                        .map(|(key, value)| (key.into_owned(), value.into_owned()))
                        .collect();
                Ok(Arc::new(AzureCredential::SASToken(pairs)))
            }
            other => Err(unfit(&other, "Azure")),
        }
    }
}

/// The vended credentials as Google Cloud Storage reads them.
#[derive(Debug)]
pub(crate) struct ForGcs(pub Arc<VendedCredentials>);

#[async_trait]
impl CredentialProvider for ForGcs {
    type Credential = GcpCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<GcpCredential>> {
        match self.0.current().await? {
            StorageCredentials::Gcp { oauth_token } => Ok(Arc::new(GcpCredential {
                bearer: oauth_token,
            })),
            other => Err(unfit(&other, "GCS")),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use sluice_catalog::{InMemoryCatalog, TableName};

    use super::*;

    fn table() -> CatalogTable {
        CatalogTable {
            name: TableName::parse("main.sales.deals").unwrap(),
            id: "1".into(),
            location: "s3://lake/deals".into(),
        }
    }

    fn aws(key: &str, life: Duration) -> TemporaryCredentials {
        TemporaryCredentials {
            storage: StorageCredentials::Aws {
                access_key_id: key.into(),
                secret_access_key: "secret".into(),
                session_token: None,
            },
            expires_at: Some(SystemTime::now() + life),
        }
    }

    #[test]
    fn credentials_are_renewed_before_they_expire() {
        let catalog = Arc::new(InMemoryCatalog::default());
        catalog.vend(Ok(aws("first", Duration::from_millis(600))));
        catalog.vend(Ok(aws("second", Duration::from_secs(3600))));
        let vended = Arc::new(
            block_on(VendedCredentials::fetch(
                catalog.clone(),
                table(),
                StoreKind::S3,
            ))
            .unwrap(),
        );
        let s3 = ForS3(vended.clone());
        assert_eq!(block_on(s3.get_credential()).unwrap().key_id, "first");
        assert_eq!(block_on(s3.get_credential()).unwrap().key_id, "first");
        assert_eq!(catalog.credential_requests(), 1);
        // Less than half of their life left: the next request renews them.
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(block_on(s3.get_credential()).unwrap().key_id, "second");
        assert_eq!(block_on(s3.get_credential()).unwrap().key_id, "second");
        assert_eq!(catalog.credential_requests(), 2);
        assert!(
            vended.source().contains(
                "AWS session credentials vended by the in-memory catalog for main.sales.deals"
            ),
            "{}",
            vended.source()
        );
    }

    #[test]
    fn expired_or_unfit_credentials_are_refused_with_what_to_check() {
        let catalog = Arc::new(InMemoryCatalog::default());
        catalog.vend(Ok(TemporaryCredentials {
            expires_at: Some(SystemTime::now() - Duration::from_secs(60)),
            ..aws("old", Duration::ZERO)
        }));
        let error = block_on(VendedCredentials::fetch(catalog, table(), StoreKind::S3))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("expired at") && error.contains("clocks"),
            "{error}"
        );
        assert!(
            error.contains("main.sales.deals") && error.contains("in-memory catalog"),
            "{error}"
        );

        let catalog = Arc::new(InMemoryCatalog::default());
        catalog.vend(Ok(aws("key", Duration::from_secs(3600))));
        let error = block_on(VendedCredentials::fetch(catalog, table(), StoreKind::Gcs))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("AWS session credentials for a table in Google Cloud Storage"),
            "{error}"
        );
    }

    #[test]
    fn a_failed_renewal_fails_the_read_transiently_only_when_the_catalog_is_down() {
        let down = CatalogError::Unavailable {
            catalog: InMemoryCatalog::DESCRIBED.into(),
            table: "main.sales.deals".into(),
            action: "asking for read credentials for",
            detail: "connection refused".into(),
        };
        let denied = CatalogError::PermissionDenied {
            catalog: InMemoryCatalog::DESCRIBED.into(),
            table: "main.sales.deals".into(),
            action: "asking for read credentials for",
            message: "SELECT was revoked".into(),
        };
        for (refusal, transient) in [(down, true), (denied, false)] {
            let catalog = Arc::new(InMemoryCatalog::default());
            catalog.vend(Ok(aws("first", Duration::from_millis(10))));
            catalog.vend(Err(refusal));
            let vended = Arc::new(
                block_on(VendedCredentials::fetch(catalog, table(), StoreKind::S3)).unwrap(),
            );
            std::thread::sleep(Duration::from_millis(20));
            let error = block_on(ForS3(vended).get_credential()).unwrap_err();
            let read = crate::error::kernel_error(
                "main.sales.deals",
                "reading changes",
                delta_kernel::KernelError::from(error),
            );
            assert_eq!(read.is_transient(), transient, "{read}");
        }
    }
}
