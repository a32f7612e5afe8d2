//! A table's object store: the store its URL names, built from the configured options
//! (unknown ones refused, as a typo must not silently fall back to other credentials),
//! with an HTTP client that counts and logs the requests that fail. The object store
//! retries those with exponential backoff; the counts make an unhealthy store visible
//! in metrics before it fails a read.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use delta_kernel::object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use delta_kernel::object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use delta_kernel::object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use delta_kernel::object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use delta_kernel::object_store::local::LocalFileSystem;
use delta_kernel::object_store::path::Path as ObjectPath;
use delta_kernel::object_store::{
    ClientOptions, CopyOptions, DynObjectStore, GetOptions, GetResult, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use delta_kernel_default_engine::storage::store_from_url_opts;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use url::Url;

use crate::error::{SourceError, kernel_error};
use crate::store_kind::{StoreKind, store_kind};
use crate::vended::{ForAzure, ForGcs, ForS3, VendedCredentials};

/// Requests a table's store was sent, and those that failed (a transport error, a
/// timeout, or an answer of 5xx or 429, each retried by the object store).
#[derive(Debug, Default)]
pub struct StorageMetrics {
    requests: AtomicU64,
    failures: AtomicU64,
}

impl StorageMetrics {
    /// HTTP requests sent to the store.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Of those, the ones that failed and were retried.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

/// A table's store, opened.
pub(crate) struct OpenedStore {
    pub store: Arc<DynObjectStore>,
    pub kind: StoreKind,
    /// Where the store's credentials come from, in words (never the secret).
    pub credentials: String,
}

/// An option with where it came from.
struct StoreOption {
    key: String,
    value: String,
    from_environment: Option<String>,
}

/// Opens the store of `url` with the `configured` options and, for cloud stores, the
/// store's settings in the environment (`AWS_*`, `AZURE_*`, `GOOGLE_*`, as the object
/// store's own `from_env` reads them); configured options win. Credentials a catalog
/// vended take the place of any others.
pub(crate) fn open_store(
    table: &str,
    url: &Url,
    configured: &[(String, String)],
    metrics: Arc<StorageMetrics>,
    vended: Option<Arc<VendedCredentials>>,
) -> Result<OpenedStore, SourceError> {
    let kind = store_kind(table, url)?;
    let options = with_environment(kind, configured);
    let cloud = Cloud {
        table,
        kind,
        url,
        options: &options,
        connector: CountingConnector {
            table: table.to_string(),
            metrics,
        },
        vended: vended.clone(),
    };
    let built = match kind {
        StoreKind::Local => Arc::new(LocalFileSystem::new()) as Arc<DynObjectStore>,
        StoreKind::S3 => cloud.build::<AmazonS3Builder>()?,
        StoreKind::Azure => cloud.build::<MicrosoftAzureBuilder>()?,
        StoreKind::Gcs => cloud.build::<GoogleCloudStorageBuilder>()?,
        StoreKind::Other => store_from_url_opts(
            url,
            options.iter().map(|o| (o.key.as_str(), o.value.clone())),
        )
        .map_err(|e| kernel_error(table, "opening its storage", e))?,
    };
    Ok(OpenedStore {
        store: match kind {
            StoreKind::Local => built,
            _ => Arc::new(OffsetListing { inner: built }),
        },
        kind,
        credentials: match vended {
            Some(vended) => vended.source(),
            None => credential_source(kind, &options),
        },
    })
}

/// What the cloud stores' builders have in common.
trait CloudBuilder: Sized {
    /// The store's option keys.
    type Key: FromStr;
    fn for_url(url: &Url) -> Self;
    fn set(self, key: Self::Key, value: String) -> Self;
    fn with_vended(self, vended: Arc<VendedCredentials>) -> Self;
    fn finish(
        self,
        connector: CountingConnector,
    ) -> delta_kernel::object_store::Result<Arc<DynObjectStore>>;
}

macro_rules! cloud_builder {
    ($builder:ty, $key:ty, $vended:ident) => {
        impl CloudBuilder for $builder {
            type Key = $key;
            fn for_url(url: &Url) -> Self {
                <$builder>::new().with_url(url.as_str())
            }
            fn set(self, key: $key, value: String) -> Self {
                self.with_config(key, value)
            }
            fn with_vended(self, vended: Arc<VendedCredentials>) -> Self {
                self.with_credentials(Arc::new($vended(vended)))
            }
            fn finish(
                self,
                connector: CountingConnector,
            ) -> delta_kernel::object_store::Result<Arc<DynObjectStore>> {
                Ok(Arc::new(self.with_http_connector(connector).build()?))
            }
        }
    };
}

cloud_builder!(AmazonS3Builder, AmazonS3ConfigKey, ForS3);
cloud_builder!(MicrosoftAzureBuilder, AzureConfigKey, ForAzure);
cloud_builder!(GoogleCloudStorageBuilder, GoogleConfigKey, ForGcs);

/// What building a cloud store takes.
struct Cloud<'a> {
    table: &'a str,
    kind: StoreKind,
    url: &'a Url,
    options: &'a [StoreOption],
    connector: CountingConnector,
    vended: Option<Arc<VendedCredentials>>,
}

impl Cloud<'_> {
    /// Builds the store with every option applied: a configured key the store does not
    /// know is an error naming it; one from the environment that it does not know is
    /// skipped.
    fn build<B: CloudBuilder>(self) -> Result<Arc<DynObjectStore>, SourceError> {
        let mut builder = B::for_url(self.url);
        for option in self.options {
            match option.key.parse::<B::Key>() {
                Ok(key) => builder = builder.set(key, option.value.clone()),
                Err(_) if option.from_environment.is_some() => {}
                Err(_) => {
                    return Err(SourceError::UnknownStorageOption {
                        table: self.table.to_string(),
                        store: self.kind.to_string(),
                        key: option.key.clone(),
                    });
                }
            }
        }
        if let Some(vended) = self.vended {
            builder = builder.with_vended(vended);
        }
        builder
            .finish(self.connector)
            .map_err(|e| store_error(self.table, self.kind, e))
    }
}

fn store_error(
    table: &str,
    kind: StoreKind,
    error: delta_kernel::object_store::Error,
) -> SourceError {
    SourceError::StorageConfig {
        table: table.to_string(),
        store: kind.to_string(),
        detail: error.to_string(),
    }
}

fn with_environment(kind: StoreKind, configured: &[(String, String)]) -> Vec<StoreOption> {
    let mut options: Vec<StoreOption> = configured
        .iter()
        .map(|(key, value)| StoreOption {
            key: key.to_ascii_lowercase(),
            value: value.clone(),
            from_environment: None,
        })
        .collect();
    let prefix = match kind {
        StoreKind::S3 => "AWS_",
        StoreKind::Azure => "AZURE_",
        StoreKind::Gcs => "GOOGLE_",
        StoreKind::Local | StoreKind::Other => return options,
    };
    for (name, value) in std::env::vars() {
        let key = name.to_ascii_lowercase();
        if name.starts_with(prefix) && !options.iter().any(|o| o.key == key) {
            options.push(StoreOption {
                key,
                value,
                from_environment: Some(name),
            });
        }
    }
    options
}

/// Where the store's credentials come from, in the order the object store looks.
fn credential_source(kind: StoreKind, options: &[StoreOption]) -> String {
    let find = |keys: &[&str]| {
        options
            .iter()
            .find(|o| keys.contains(&o.key.as_str()) && !o.value.is_empty())
    };
    let told = |option: &StoreOption, what: &str| match &option.from_environment {
        Some(variable) => format!("{what} from the environment ({variable})"),
        None => format!("{what} from storage_options ({})", option.key),
    };
    let truthy = |keys: &[&str]| find(keys).is_some_and(|o| o.value.eq_ignore_ascii_case("true"));
    match kind {
        StoreKind::Local => "the local file system (no credentials)".into(),
        StoreKind::Other => "the store's own defaults".into(),
        StoreKind::S3 => {
            if truthy(&["aws_skip_signature", "skip_signature"]) {
                "none: requests are unsigned (aws_skip_signature)".into()
            } else if let Some(o) = find(&["aws_access_key_id", "access_key_id"]) {
                told(o, "an access key")
            } else if let Some(o) = find(&["aws_web_identity_token_file"]) {
                told(o, "a web identity token")
            } else if let Some(o) = find(&["aws_container_credentials_relative_uri"]) {
                told(o, "the container credentials endpoint")
            } else {
                "the instance metadata service (no key, token file or container credentials configured)".into()
            }
        }
        StoreKind::Azure => {
            if truthy(&["azure_storage_use_emulator", "use_emulator"]) {
                "the storage emulator's well-known account key (azure_storage_use_emulator)".into()
            } else if truthy(&["azure_skip_signature", "skip_signature"]) {
                "none: requests are unsigned (azure_skip_signature)".into()
            } else if let Some(o) = find(&[
                "azure_storage_account_key",
                "azure_storage_access_key",
                "account_key",
                "access_key",
            ]) {
                told(o, "an account key")
            } else if let Some(o) = find(&[
                "azure_storage_sas_key",
                "azure_storage_sas_token",
                "sas_key",
                "sas_token",
            ]) {
                told(o, "a SAS token")
            } else if let Some(o) = find(&["azure_storage_token", "bearer_token", "token"]) {
                told(o, "a bearer token")
            } else if let Some(o) = find(&[
                "azure_storage_client_secret",
                "azure_client_secret",
                "client_secret",
            ]) {
                told(o, "a service principal's client secret")
            } else if let Some(o) = find(&["azure_federated_token_file", "federated_token_file"]) {
                told(o, "a workload identity token")
            } else if truthy(&["azure_use_azure_cli", "use_azure_cli"]) {
                "the Azure CLI's login".into()
            } else {
                "a managed identity (no key, SAS, token or client secret configured)".into()
            }
        }
        StoreKind::Gcs => {
            if truthy(&["google_skip_signature", "skip_signature"]) {
                "none: requests are unsigned (google_skip_signature)".into()
            } else if let Some(o) = find(&["google_service_account_key", "service_account_key"]) {
                told(o, "a service account key")
            } else if let Some(o) = find(&[
                "google_service_account",
                "google_service_account_path",
                "service_account",
                "service_account_path",
            ]) {
                told(o, "a service account file")
            } else if let Some(o) =
                find(&["google_application_credentials", "application_credentials"])
            {
                told(o, "application default credentials")
            } else {
                "application default credentials or the instance metadata service".into()
            }
        }
    }
}

/// A store whose listings from an offset never return what is at or before it. The log
/// is listed from a version on; some S3-compatible stores and emulators ignore the
/// offset (`start-after`) and list from the start, which the kernel reads as the wanted
/// version missing. Where the store honours the offset, the filter drops nothing.
#[derive(Debug)]
struct OffsetListing {
    inner: Arc<DynObjectStore>,
}

impl fmt::Display for OffsetListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

#[async_trait]
impl ObjectStore for OffsetListing {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        options: PutOptions,
    ) -> delta_kernel::object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, options).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        options: PutMultipartOptions,
    ) -> delta_kernel::object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, options).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> delta_kernel::object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, delta_kernel::object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, delta_kernel::object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, delta_kernel::object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&ObjectPath>,
        offset: &ObjectPath,
    ) -> BoxStream<'static, delta_kernel::object_store::Result<ObjectMeta>> {
        let after = offset.clone();
        self.inner
            .list_with_offset(prefix, offset)
            .try_filter(move |meta| futures::future::ready(meta.location > after))
            .boxed()
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> delta_kernel::object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> delta_kernel::object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Makes the object store's usual HTTP client, wrapped to count failures.
#[derive(Debug)]
struct CountingConnector {
    table: String,
    metrics: Arc<StorageMetrics>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> delta_kernel::object_store::Result<HttpClient> {
        Ok(HttpClient::new(CountingService {
            inner: ReqwestConnector::default().connect(options)?,
            table: self.table.clone(),
            metrics: self.metrics.clone(),
        }))
    }
}

#[derive(Debug)]
struct CountingService {
    inner: HttpClient,
    table: String,
    metrics: Arc<StorageMetrics>,
}

#[async_trait]
impl HttpService for CountingService {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        self.metrics.requests.fetch_add(1, Ordering::Relaxed);
        // The path only: a query may hold a SAS token.
        let what = format!("{} {}", request.method(), request.uri().path());
        let result = self.inner.execute(request).await;
        let failure = match &result {
            Ok(response) if response.status().is_server_error() || response.status() == 429 => {
                Some(format!("it answered {}", response.status()))
            }
            Ok(_) => None,
            Err(error) => Some(format!("{error}")),
        };
        if let Some(failure) = failure {
            self.metrics.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(table = %self.table, request = %what, "A storage request failed ({failure}); it is retried with backoff.");
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Vec<StoreOption> {
        pairs
            .iter()
            .map(|(k, v)| StoreOption {
                key: k.to_string(),
                value: v.to_string(),
                from_environment: None,
            })
            .collect()
    }

    #[test]
    fn listings_from_an_offset_leave_out_what_is_at_or_before_it() {
        use delta_kernel::object_store::memory::InMemory;

        /// A store that ignores the offset, as some emulators do.
        #[derive(Debug)]
        struct IgnoresOffsets(InMemory);
        impl fmt::Display for IgnoresOffsets {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("ignores offsets")
            }
        }
        #[async_trait]
        impl ObjectStore for IgnoresOffsets {
            async fn put_opts(
                &self,
                l: &ObjectPath,
                p: PutPayload,
                o: PutOptions,
            ) -> delta_kernel::object_store::Result<PutResult> {
                self.0.put_opts(l, p, o).await
            }
            async fn put_multipart_opts(
                &self,
                l: &ObjectPath,
                o: PutMultipartOptions,
            ) -> delta_kernel::object_store::Result<Box<dyn MultipartUpload>> {
                self.0.put_multipart_opts(l, o).await
            }
            async fn get_opts(
                &self,
                l: &ObjectPath,
                o: GetOptions,
            ) -> delta_kernel::object_store::Result<GetResult> {
                self.0.get_opts(l, o).await
            }
            fn delete_stream(
                &self,
                l: BoxStream<'static, delta_kernel::object_store::Result<ObjectPath>>,
            ) -> BoxStream<'static, delta_kernel::object_store::Result<ObjectPath>> {
                self.0.delete_stream(l)
            }
            fn list(
                &self,
                p: Option<&ObjectPath>,
            ) -> BoxStream<'static, delta_kernel::object_store::Result<ObjectMeta>> {
                self.0.list(p)
            }
            fn list_with_offset(
                &self,
                p: Option<&ObjectPath>,
                _: &ObjectPath,
            ) -> BoxStream<'static, delta_kernel::object_store::Result<ObjectMeta>> {
                self.0.list(p)
            }
            async fn list_with_delimiter(
                &self,
                p: Option<&ObjectPath>,
            ) -> delta_kernel::object_store::Result<ListResult> {
                self.0.list_with_delimiter(p).await
            }
            async fn copy_opts(
                &self,
                f: &ObjectPath,
                t: &ObjectPath,
                o: CopyOptions,
            ) -> delta_kernel::object_store::Result<()> {
                self.0.copy_opts(f, t, o).await
            }
        }

        let names = futures::executor::block_on(async {
            let inner = IgnoresOffsets(InMemory::new());
            for version in 0..3 {
                let path = ObjectPath::from(format!("t/_delta_log/{version:020}.json"));
                inner
                    .put_opts(&path, PutPayload::from_static(b"{}"), PutOptions::default())
                    .await
                    .unwrap();
            }
            let store = OffsetListing {
                inner: Arc::new(inner),
            };
            let offset = ObjectPath::from("t/_delta_log/00000000000000000001");
            store
                .list_with_offset(Some(&ObjectPath::from("t/_delta_log")), &offset)
                .map_ok(|meta| meta.location.to_string())
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
        });
        assert_eq!(
            names,
            [
                "t/_delta_log/00000000000000000001.json",
                "t/_delta_log/00000000000000000002.json"
            ]
        );
    }

    #[test]
    fn an_unknown_configured_option_is_refused_by_name() {
        let url = Url::parse("s3://bucket/table/").unwrap();
        let configured = vec![("aws_endpont".to_string(), "http://x".to_string())];
        let error = open_store("s3://bucket/table", &url, &configured, Arc::default(), None)
            .err()
            .expect("a typo is refused");
        let message = error.to_string();
        assert!(message.contains("aws_endpont"), "{message}");
        assert!(message.contains("S3"), "{message}");
    }

    #[test]
    fn every_cloud_store_opens_with_its_emulator_settings() {
        for (table, configured) in [
            (
                "s3://bucket/t",
                vec![
                    ("aws_endpoint", "http://127.0.0.1:1"),
                    ("aws_allow_http", "true"),
                ],
            ),
            (
                "az://container/t",
                vec![("azure_storage_use_emulator", "true")],
            ),
            (
                "gs://bucket/t",
                vec![(
                    "google_service_account_key",
                    r#"{"gcs_base_url": "http://127.0.0.1:1", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}"#,
                )],
            ),
        ] {
            let url = Url::parse(table).unwrap();
            let configured: Vec<(String, String)> = configured
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let opened = open_store(table, &url, &configured, Arc::default(), None)
                .unwrap_or_else(|e| panic!("{table}: {e}"));
            assert_ne!(opened.kind, StoreKind::Other, "{table}");
        }
    }

    #[test]
    fn the_credential_source_names_where_the_secret_came_from_not_the_secret() {
        let said = credential_source(
            StoreKind::S3,
            &options(&[
                ("aws_access_key_id", "AKIA"),
                ("aws_secret_access_key", "hush"),
            ]),
        );
        assert!(
            said.contains("storage_options (aws_access_key_id)"),
            "{said}"
        );
        assert!(!said.contains("hush") && !said.contains("AKIA"), "{said}");
        let from_env = vec![StoreOption {
            key: "azure_storage_account_key".into(),
            value: "hush".into(),
            from_environment: Some("AZURE_STORAGE_ACCOUNT_KEY".into()),
        }];
        let said = credential_source(StoreKind::Azure, &from_env);
        assert_eq!(
            said,
            "an account key from the environment (AZURE_STORAGE_ACCOUNT_KEY)"
        );
        assert!(credential_source(StoreKind::Gcs, &[]).contains("metadata"));
        assert!(
            credential_source(
                StoreKind::Azure,
                &options(&[("azure_storage_use_emulator", "true")])
            )
            .contains("emulator")
        );
    }
}
