//! Who is calling: the operator, or one tenant, told apart by bearer token.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::RwLock;

use sha2::{Digest as _, Sha256};

use crate::config::{ServeConfig, TenantConfig};
use crate::error::ServiceError;

/// The caller of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Sees and changes everything.
    Operator,
    /// Sees and changes only this tenant's modules and pipelines.
    Tenant(String),
}

/// A tenant the caller may act for. Only [`Caller::for_tenant`] makes one, so a
/// service call that takes it cannot be made for a tenant the caller may not act for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantScope(String);

impl std::ops::Deref for TenantScope {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TenantScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Proof that the caller is the operator. Only [`Caller::operator`] makes one, so an
/// operator-only service call cannot be made by a tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operator(());

impl Caller {
    /// The scope of `tenant`, unless the caller may not act for it.
    pub fn for_tenant(&self, tenant: &str) -> Result<TenantScope, ServiceError> {
        match self {
            Caller::Operator => Ok(TenantScope(tenant.to_string())),
            Caller::Tenant(own) if own == tenant => Ok(TenantScope(tenant.to_string())),
            Caller::Tenant(_) => Err(ServiceError::Forbidden {
                tenant: tenant.to_string(),
            }),
        }
    }

    /// The operator's proof, unless the caller is a tenant; `action` says what was
    /// refused.
    pub fn operator(&self, action: &'static str) -> Result<Operator, ServiceError> {
        match self {
            Caller::Operator => Ok(Operator(())),
            Caller::Tenant(_) => Err(ServiceError::OperatorOnly(action)),
        }
    }
}

/// Who the caller is: how the console signs in.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(tag = "role", rename_all = "kebab-case")]
pub enum WhoAmI {
    /// The operator's token.
    Operator,
    /// A tenant's token.
    Tenant {
        /// The tenant.
        tenant: String,
    },
}

impl Caller {
    /// Who the caller is, as the API shows it.
    pub fn who(&self) -> WhoAmI {
        match self {
            Caller::Operator => WhoAmI::Operator,
            Caller::Tenant(tenant) => WhoAmI::Tenant {
                tenant: tenant.clone(),
            },
        }
    }
}

/// The known tokens, kept only as SHA-256 hashes. Tenants come and go while the
/// service runs (the operator API adds and removes them).
pub struct Tokens {
    operator: [u8; 32],
    tenants: RwLock<BTreeMap<String, [u8; 32]>>,
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

/// Compares without stopping at the first difference, so timing tells nothing.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads a token file: the hash of its token, which must be at least 16 characters.
fn read_token(path: &Path, whose: &str) -> Result<[u8; 32], ServiceError> {
    let token = std::fs::read_to_string(path).map_err(|e| ServiceError::Config {
        path: path.to_path_buf(),
        message: format!("the {whose} token file cannot be read: {e}"),
    })?;
    if token.trim().len() < 16 {
        return Err(ServiceError::Config {
            path: path.to_path_buf(),
            message: format!("the {whose} token must be at least 16 characters"),
        });
    }
    Ok(hash(&token))
}

/// The hash a tenant's config gives for its token: its token file's, or its
/// `token_sha256` (checked to be 64 hex digits by [`TenantConfig::validate`]).
pub fn tenant_token(name: &str, tenant: &TenantConfig) -> Result<[u8; 32], ServiceError> {
    if let Some(file) = &tenant.token_file {
        return read_token(file, &format!("tenant {name}'s"));
    }
    let hex = tenant.token_sha256.as_deref().unwrap_or_default();
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).unwrap_or_default();
        *byte = u8::from_str_radix(pair, 16).map_err(|_| {
            ServiceError::BadRequest(format!(
                "tenant {name}'s token_sha256 must be 64 hex digits"
            ))
        })?;
    }
    Ok(digest)
}

impl Tokens {
    /// Reads the operator's and the config file's tenants' tokens.
    pub fn load(config: &ServeConfig) -> Result<Tokens, ServiceError> {
        let tokens = Tokens {
            operator: read_token(&config.server.operator_token_file, "operator")?,
            tenants: RwLock::default(),
        };
        for (name, tenant) in &config.tenants {
            let token = tenant_token(name, tenant)?;
            tokens
                .set_tenant(name, token)
                .map_err(|e| ServiceError::Config {
                    path: tenant.token_file.clone().unwrap_or_default(),
                    message: e.to_string(),
                })?;
        }
        Ok(tokens)
    }

    /// Whether a caller other than `tenant` has the token with hash `token`.
    pub fn is_taken(&self, tenant: &str, token: &[u8; 32]) -> bool {
        let tenants = self.tenants.read().unwrap_or_else(|e| e.into_inner());
        self.taken_in(&tenants, tenant, token)
    }

    fn taken_in(
        &self,
        tenants: &BTreeMap<String, [u8; 32]>,
        tenant: &str,
        token: &[u8; 32],
    ) -> bool {
        same(token, &self.operator)
            || tenants
                .iter()
                .any(|(name, t)| name != tenant && same(t, token))
    }

    /// Gives `tenant` the token with hash `token`, refused when another caller has it.
    pub fn set_tenant(&self, tenant: &str, token: [u8; 32]) -> Result<(), ServiceError> {
        let mut tenants = self.tenants.write().unwrap_or_else(|e| e.into_inner());
        if self.taken_in(&tenants, tenant, &token) {
            return Err(ServiceError::Conflict(format!(
                "tenant {tenant}'s token is also another caller's; give every caller its own"
            )));
        }
        tenants.insert(tenant.to_string(), token);
        Ok(())
    }

    /// Forgets a tenant's token: its calls are refused from now on.
    pub fn remove_tenant(&self, tenant: &str) {
        self.tenants
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tenant);
    }

    /// The caller an `Authorization` header names.
    pub fn caller(&self, authorization: Option<&str>) -> Result<Caller, ServiceError> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or(ServiceError::Unauthenticated)?;
        let token = hash(token);
        if same(&token, &self.operator) {
            return Ok(Caller::Operator);
        }
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(_, t)| same(t, &token))
            .map(|(name, _)| Caller::Tenant(name.clone()))
            .ok_or(ServiceError::Unauthenticated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_is_shown_by_role() {
        let shown = |w: WhoAmI| serde_json::to_value(w).unwrap();
        assert_eq!(
            shown(Caller::Operator.who()),
            serde_json::json!({"role": "operator"})
        );
        assert_eq!(
            shown(Caller::Tenant("acme".into()).who()),
            serde_json::json!({"role": "tenant", "tenant": "acme"})
        );
    }

    fn tokens() -> Tokens {
        let tokens = Tokens {
            operator: hash("operator-token-0123456789"),
            tenants: RwLock::default(),
        };
        tokens
            .set_tenant("acme", hash("acme-token-0123456789"))
            .unwrap();
        tokens
    }

    #[test]
    fn tokens_name_their_callers() {
        let tokens = tokens();
        assert_eq!(
            tokens
                .caller(Some("Bearer operator-token-0123456789"))
                .unwrap(),
            Caller::Operator
        );
        assert_eq!(
            tokens.caller(Some("Bearer acme-token-0123456789")).unwrap(),
            Caller::Tenant("acme".into())
        );
        assert!(tokens.caller(Some("Bearer nope")).is_err());
        assert!(tokens.caller(None).is_err());
    }

    #[test]
    fn tenants_come_and_go_with_tokens_of_their_own() {
        let tokens = tokens();
        let globex = "globex-token-0123456789";
        assert!(tokens.caller(Some(&format!("Bearer {globex}"))).is_err());
        tokens.set_tenant("globex", hash(globex)).unwrap();
        assert_eq!(
            tokens.caller(Some(&format!("Bearer {globex}"))).unwrap(),
            Caller::Tenant("globex".into())
        );
        // Another tenant's or the operator's token is refused; a tenant may keep its own.
        assert!(tokens.set_tenant("initech", hash(globex)).is_err());
        assert!(
            tokens
                .set_tenant("initech", hash("operator-token-0123456789"))
                .is_err()
        );
        tokens.set_tenant("globex", hash(globex)).unwrap();
        tokens.remove_tenant("globex");
        assert!(tokens.caller(Some(&format!("Bearer {globex}"))).is_err());
    }

    #[test]
    fn a_token_hash_in_hex_names_the_same_caller_as_the_token() {
        let token = "acme-token-0123456789";
        let hex: String = hash(token).iter().map(|b| format!("{b:02x}")).collect();
        let config: TenantConfig = toml::from_str(&format!("token_sha256 = \"{hex}\"")).unwrap();
        assert_eq!(tenant_token("acme", &config).unwrap(), hash(token));
    }

    #[test]
    fn a_tenant_acts_only_for_itself() {
        let acme = Caller::Tenant("acme".into());
        assert_eq!(&*acme.for_tenant("acme").unwrap(), "acme");
        assert!(matches!(
            acme.for_tenant("globex"),
            Err(ServiceError::Forbidden { tenant }) if tenant == "globex"
        ));
        assert_eq!(&*Caller::Operator.for_tenant("globex").unwrap(), "globex");
        assert!(matches!(
            acme.operator("list tenants"),
            Err(ServiceError::OperatorOnly("list tenants"))
        ));
        assert!(Caller::Operator.operator("list tenants").is_ok());
    }
}
