//! A Unity Catalog server over its REST API (`/api/2.1/unity-catalog`): Databricks, the
//! open-source server and other implementations serve the same two calls used here.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;
use url::Url;

use crate::Catalog;
use crate::error::CatalogError;
use crate::table::{CatalogTable, StorageCredentials, TableName, TemporaryCredentials};

/// Where the API lives below a server's URL.
const API_PATH: &str = "/api/2.1/unity-catalog";

/// Characters kept as they are in a table's full name within a URL path.
const NAME_PART: &AsciiSet = &NON_ALPHANUMERIC.remove(b'.').remove(b'-').remove(b'_');

/// A Unity Catalog server, asked with an optional bearer token.
#[derive(Clone)]
pub struct UnityCatalog {
    api: Url,
    shown: String,
    token: Option<String>,
    client: reqwest::Client,
}

impl std::fmt::Debug for UnityCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl UnityCatalog {
    /// A client of the server at `url` (its root, or its `/api/2.1/unity-catalog`),
    /// sending `token` as a bearer token when given.
    pub fn new(url: &str, token: Option<String>) -> Result<UnityCatalog, CatalogError> {
        let invalid = |reason: String| CatalogError::InvalidUrl {
            url: url.to_string(),
            reason,
        };
        let mut api = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        if !matches!(api.scheme(), "http" | "https") {
            return Err(invalid(format!("the scheme is {}", api.scheme())));
        }
        let path = api.path().trim_end_matches('/').to_string();
        if !path.ends_with(API_PATH) {
            api.set_path(&format!("{path}{API_PATH}"));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(UnityCatalog {
            shown: format!("Unity Catalog at {}", url.trim_end_matches('/')),
            api,
            token: token.filter(|t| !t.is_empty()),
            client,
        })
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.api.as_str().trim_end_matches('/'))
    }

    /// Sends a request and reads its JSON answer, mapping refusals to errors.
    async fn call(
        &self,
        request: reqwest::RequestBuilder,
        table: &TableName,
        action: &'static str,
    ) -> Result<Value, CatalogError> {
        let request = match &self.token {
            Some(token) => request.header(AUTHORIZATION, format!("Bearer {token}")),
            None => request,
        };
        let unavailable = |detail: String| CatalogError::Unavailable {
            catalog: self.shown.clone(),
            table: table.to_string(),
            action,
            detail,
        };
        let response = request
            .send()
            .await
            .map_err(|e| unavailable(error_chain(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| unavailable(error_chain(&e)))?;
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if status.is_success() {
            return json.ok_or_else(|| CatalogError::Refused {
                catalog: self.shown.clone(),
                table: table.to_string(),
                action,
                status: status.as_u16(),
                message: format!("an answer that is not JSON: {}", excerpt(&body)),
            });
        }
        let message = json
            .as_ref()
            .and_then(error_message)
            .unwrap_or_else(|| excerpt(&body));
        let (catalog, table) = (self.shown.clone(), table.to_string());
        Err(match status.as_u16() {
            404 => CatalogError::TableNotFound {
                catalog,
                table,
                message,
            },
            401 => CatalogError::Unauthenticated {
                catalog,
                table,
                action,
                message,
            },
            403 => CatalogError::PermissionDenied {
                catalog,
                table,
                action,
                message,
            },
            408 | 429 | 500..=599 => unavailable(format!("{status}: {message}")),
            code => CatalogError::Refused {
                catalog,
                table,
                action,
                status: code,
                message,
            },
        })
    }

    fn unreadable(&self, table: &TableName, what: String) -> CatalogError {
        CatalogError::NotReadable {
            catalog: self.shown.clone(),
            table: table.to_string(),
            what,
        }
    }
}

#[async_trait]
impl Catalog for UnityCatalog {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    async fn table(&self, name: &TableName) -> Result<CatalogTable, CatalogError> {
        let full_name = [&name.catalog, &name.schema, &name.table]
            .map(|part| utf8_percent_encode(part, NAME_PART).to_string())
            .join(".");
        let url = self.endpoint(&format!("tables/{full_name}"));
        let info = self.call(self.client.get(url), name, "looking up").await?;
        let text = |key: &str| info.get(key).and_then(Value::as_str).unwrap_or_default();
        let table_type = text("table_type");
        if table_type.to_ascii_uppercase().contains("VIEW") {
            return Err(self.unreadable(name, format!("a {table_type}")));
        }
        let format = text("data_source_format");
        if !format.is_empty() && !format.eq_ignore_ascii_case("DELTA") {
            return Err(self.unreadable(name, format!("a table in {format} format")));
        }
        let location = text("storage_location");
        if location.is_empty() {
            return Err(self.unreadable(name, "a table without a storage location".into()));
        }
        let id = text("table_id");
        if id.is_empty() {
            return Err(self.unreadable(name, "a table without a table_id".into()));
        }
        Ok(CatalogTable {
            name: name.clone(),
            id: id.to_string(),
            location: location.to_string(),
        })
    }

    async fn read_credentials(
        &self,
        table: &CatalogTable,
    ) -> Result<TemporaryCredentials, CatalogError> {
        let body = serde_json::json!({ "table_id": table.id, "operation": "READ" });
        let request = self
            .client
            .post(self.endpoint("temporary-table-credentials"))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        let answer = self
            .call(request, &table.name, "asking for read credentials for")
            .await?;
        Ok(vended(&answer))
    }
}

/// The credentials in a `temporary-table-credentials` answer.
fn vended(answer: &Value) -> TemporaryCredentials {
    let text = |section: &str, key: &str| {
        answer
            .get(section)
            .and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let aws = |section: &str| {
        Some(StorageCredentials::Aws {
            access_key_id: text(section, "access_key_id")?,
            secret_access_key: text(section, "secret_access_key")?,
            session_token: text(section, "session_token"),
        })
    };
    let storage = aws("aws_temp_credentials")
        .or_else(|| aws("r2_temp_credentials"))
        .or_else(|| {
            text("azure_user_delegation_sas", "sas_token")
                .map(|sas_token| StorageCredentials::AzureSas { sas_token })
        })
        .or_else(|| {
            text("gcp_oauth_token", "oauth_token")
                .map(|oauth_token| StorageCredentials::Gcp { oauth_token })
        })
        .unwrap_or(StorageCredentials::None);
    // Milliseconds since the epoch, a number (Databricks) or a string (some servers).
    let expires_at = answer
        .get("expiration_time")
        .and_then(|time| time.as_u64().or_else(|| time.as_str()?.parse().ok()))
        .filter(|&ms| ms > 0)
        .map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
    TemporaryCredentials {
        storage,
        expires_at,
    }
}

/// The message of an error answer: Databricks sends `error_code` and `message`, other
/// servers `errorCode`.
fn error_message(json: &Value) -> Option<String> {
    let field = |key: &str| json.get(key).and_then(Value::as_str);
    let code = field("error_code").or_else(|| field("errorCode"));
    match (code, field("message")) {
        (Some(code), Some(message)) => Some(format!("{code}: {message}")),
        (None, Some(message)) => Some(message.to_string()),
        (Some(code), None) => Some(code.to_string()),
        (None, None) => None,
    }
}

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None if text.is_empty() => "an empty answer".to_string(),
        None => text.to_string(),
    }
}

/// An error with its causes: reqwest's own message is often just "error sending request".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_path_is_added_once() {
        for url in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/api/2.1/unity-catalog",
            "http://127.0.0.1:8080/api/2.1/unity-catalog/",
        ] {
            let catalog = UnityCatalog::new(url, None).unwrap();
            assert_eq!(
                catalog.endpoint("tables/a.b.c"),
                "http://127.0.0.1:8080/api/2.1/unity-catalog/tables/a.b.c",
                "{url}"
            );
        }
        assert!(matches!(
            UnityCatalog::new("ftp://catalog", None),
            Err(CatalogError::InvalidUrl { .. })
        ));
        assert!(matches!(
            UnityCatalog::new("catalog:8080", None),
            Err(CatalogError::InvalidUrl { .. })
        ));
    }

    #[test]
    fn vended_credentials_of_each_cloud_are_read() {
        let aws = vended(&serde_json::json!({
            "aws_temp_credentials": {
                "access_key_id": "AKIA", "secret_access_key": "s", "session_token": "t"
            },
            "expiration_time": 1_700_000_000_000u64,
        }));
        assert_eq!(
            aws.storage,
            StorageCredentials::Aws {
                access_key_id: "AKIA".into(),
                secret_access_key: "s".into(),
                session_token: Some("t".into()),
            }
        );
        assert_eq!(
            aws.expires_at,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        let azure = vended(&serde_json::json!({
            "azure_user_delegation_sas": { "sas_token": "sv=2024&sig=x" }
        }));
        assert_eq!(
            azure.storage,
            StorageCredentials::AzureSas {
                sas_token: "sv=2024&sig=x".into()
            }
        );
        assert_eq!(azure.expires_at, None);
        let gcp = vended(&serde_json::json!({ "gcp_oauth_token": { "oauth_token": "ya29" } }));
        assert_eq!(
            gcp.storage,
            StorageCredentials::Gcp {
                oauth_token: "ya29".into()
            }
        );
        let as_text = vended(&serde_json::json!({
            "gcp_oauth_token": { "oauth_token": "ya29" },
            "expiration_time": "1700000000000",
        }));
        assert_eq!(as_text.expires_at, aws.expires_at);
        let local = vended(&serde_json::json!({ "url": "file:///data/deals" }));
        assert_eq!(local.storage, StorageCredentials::None);
    }

    #[test]
    fn error_answers_give_their_code_and_message() {
        let databricks = serde_json::json!({
            "error_code": "PERMISSION_DENIED", "message": "User does not have SELECT"
        });
        assert_eq!(
            error_message(&databricks).unwrap(),
            "PERMISSION_DENIED: User does not have SELECT"
        );
        let camel = serde_json::json!({ "errorCode": "RESOURCE_NOT_FOUND", "message": "no" });
        assert_eq!(error_message(&camel).unwrap(), "RESOURCE_NOT_FOUND: no");
        assert_eq!(excerpt(b""), "an empty answer");
        assert_eq!(excerpt(&[b'x'; 400]).len(), 303);
    }

    /// Answers each connection with `status` and `body`, then closes it.
    fn answering(status: &'static str, body: &'static str) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                use std::io::{Read, Write};
                let mut stream = stream.unwrap();
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        url
    }

    #[test]
    fn refusals_name_the_catalog_the_table_and_the_way_out() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let name = TableName::parse("main.sales.deals").unwrap();
        let ask = |url: &str| {
            let catalog = UnityCatalog::new(url, Some("token".into())).unwrap();
            runtime.block_on(catalog.table(&name)).unwrap_err()
        };
        let url = answering(
            "403 Forbidden",
            r#"{"error_code":"PERMISSION_DENIED","message":"User does not have SELECT on Table 'main.sales.deals'."}"#,
        );
        let denied = ask(&url);
        assert!(matches!(denied, CatalogError::PermissionDenied { .. }));
        assert!(!denied.is_transient());
        let said = denied.to_string();
        assert!(
            said.starts_with(&format!(
                "Unity Catalog at {url} denied permission while looking up main.sales.deals: PERMISSION_DENIED: User does not have SELECT"
            )) && said.contains("Grant the token's principal SELECT"),
            "{said}"
        );
        let down = ask(&answering("503 Service Unavailable", "overloaded"));
        assert!(down.is_transient(), "{down}");
        assert!(
            down.to_string()
                .contains("503 Service Unavailable: overloaded"),
            "{down}"
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let unreachable = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let refused = ask(&unreachable);
        assert!(refused.is_transient(), "{refused}");
        assert!(
            refused.to_string().contains("Check [source.catalog] url"),
            "{refused}"
        );
    }
}
