//! What a catalog names and hands out.

use std::fmt;
use std::time::SystemTime;

use crate::error::CatalogError;

/// A three-part table name, `catalog.schema.table`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableName {
    /// The catalog.
    pub catalog: String,
    /// The schema in it.
    pub schema: String,
    /// The table in that.
    pub table: String,
}

impl TableName {
    /// Parses `catalog.schema.table`; a part may be quoted in backticks to hold dots.
    pub fn parse(name: &str) -> Result<TableName, CatalogError> {
        let invalid = || CatalogError::InvalidName {
            name: name.to_string(),
        };
        let mut parts = Vec::new();
        let mut rest = name;
        loop {
            let (part, after) = match rest.strip_prefix('`') {
                Some(quoted) => {
                    let end = quoted.find('`').ok_or_else(invalid)?;
                    (&quoted[..end], &quoted[end + 1..])
                }
                None => rest.split_at(rest.find('.').unwrap_or(rest.len())),
            };
            if part.is_empty() || part.trim() != part {
                return Err(invalid());
            }
            parts.push(part.to_string());
            match after.strip_prefix('.') {
                Some(next) => rest = next,
                None if after.is_empty() => break,
                None => return Err(invalid()),
            }
        }
        let [catalog, schema, table] = <[String; 3]>::try_from(parts).map_err(|_| invalid())?;
        Ok(TableName {
            catalog,
            schema,
            table,
        })
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [&self.catalog, &self.schema, &self.table];
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            if part.contains('.') {
                write!(f, "`{part}`")?;
            } else {
                f.write_str(part)?;
            }
        }
        Ok(())
    }
}

/// A table as the catalog describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogTable {
    /// The name it was looked up by.
    pub name: TableName,
    /// The catalog's id of the table, which credentials are asked for by.
    pub id: String,
    /// Where its files are: a URL (`s3://`, `abfss://`, `gs://`, `file://`).
    pub location: String,
}

/// Credentials for one store, as a catalog vends them.
#[derive(Clone, PartialEq, Eq)]
pub enum StorageCredentials {
    /// The location needs none (a local path).
    None,
    /// AWS session credentials.
    Aws {
        /// The access key id.
        access_key_id: String,
        /// The secret access key.
        secret_access_key: String,
        /// The session token.
        session_token: Option<String>,
    },
    /// An Azure shared access signature (a query string).
    AzureSas {
        /// The SAS token.
        sas_token: String,
    },
    /// A Google OAuth 2 access token.
    Gcp {
        /// The bearer token.
        oauth_token: String,
    },
}

impl StorageCredentials {
    /// What kind of credentials these are, in words (never the secret).
    pub fn kind(&self) -> &'static str {
        match self {
            StorageCredentials::None => "no credentials",
            StorageCredentials::Aws { .. } => "AWS session credentials",
            StorageCredentials::AzureSas { .. } => "an Azure SAS token",
            StorageCredentials::Gcp { .. } => "a Google OAuth token",
        }
    }
}

/// Secrets stay out of logs and messages.
impl fmt::Debug for StorageCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// Credentials that stop working at some time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemporaryCredentials {
    /// The credentials.
    pub storage: StorageCredentials,
    /// When they expire; `None` when they do not.
    pub expires_at: Option<SystemTime>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_have_three_parts() {
        let name = TableName::parse("main.sales.deals").unwrap();
        assert_eq!(
            (
                name.catalog.as_str(),
                name.schema.as_str(),
                name.table.as_str()
            ),
            ("main", "sales", "deals")
        );
        assert_eq!(name.to_string(), "main.sales.deals");
        let quoted = TableName::parse("`my.cat`.sales.deals").unwrap();
        assert_eq!(quoted.catalog, "my.cat");
        assert_eq!(quoted.to_string(), "`my.cat`.sales.deals");
        for bad in [
            "deals",
            "sales.deals",
            "a.b.c.d",
            "a..c",
            ".b.c",
            "a.b.",
            "`a.b.c",
            "`a`b.c.d",
            "/data/deals",
            "a. b.c",
        ] {
            assert!(
                matches!(TableName::parse(bad), Err(CatalogError::InvalidName { .. })),
                "{bad} parsed"
            );
        }
    }

    #[test]
    fn credentials_never_show_their_secrets() {
        let credentials = StorageCredentials::Aws {
            access_key_id: "AKIA".into(),
            secret_access_key: "very-secret".into(),
            session_token: Some("token".into()),
        };
        let shown = format!("{credentials:?}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("AKIA"),
            "{shown}"
        );
    }
}
