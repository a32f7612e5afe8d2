//! The kind of store a table is in, from its URL: opening the store and checking the
//! credentials a catalog vends both go by it.

use std::fmt;

use delta_kernel::object_store::ObjectStoreScheme;
use url::Url;

use crate::error::SourceError;

/// The kind of store a table is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A local file system.
    Local,
    /// Amazon S3 or an S3-compatible store.
    S3,
    /// Azure Blob Storage or ADLS Gen2.
    Azure,
    /// Google Cloud Storage.
    Gcs,
    /// Another store the object store crate knows (HTTP, in memory).
    Other,
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreKind::Local => "local file system",
            StoreKind::S3 => "S3",
            StoreKind::Azure => "Azure Blob Storage",
            StoreKind::Gcs => "Google Cloud Storage",
            StoreKind::Other => "object store",
        })
    }
}

/// The kind of store `url` names.
pub(crate) fn store_kind(table: &str, url: &Url) -> Result<StoreKind, SourceError> {
    let (scheme, _) = ObjectStoreScheme::parse(url).map_err(|e| SourceError::InvalidLocation {
        table: table.to_string(),
        reason: e.to_string(),
    })?;
    Ok(match scheme {
        ObjectStoreScheme::Local => StoreKind::Local,
        ObjectStoreScheme::AmazonS3 => StoreKind::S3,
        ObjectStoreScheme::MicrosoftAzure => StoreKind::Azure,
        ObjectStoreScheme::GoogleCloudStorage => StoreKind::Gcs,
        _ => StoreKind::Other,
    })
}
