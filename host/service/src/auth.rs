//! Who is calling: the operator, or one tenant, told apart by bearer token.

use sha2::{Digest as _, Sha256};

use crate::config::ServeConfig;
use crate::error::ServiceError;

/// The caller of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Sees and changes everything.
    Operator,
    /// Sees and changes only this tenant's modules and pipelines.
    Tenant(String),
}

impl Caller {
    /// Refuses unless the caller may act for `tenant`.
    pub fn may_act_for(&self, tenant: &str) -> Result<(), ServiceError> {
        match self {
            Caller::Operator => Ok(()),
            Caller::Tenant(own) if own == tenant => Ok(()),
            Caller::Tenant(_) => Err(ServiceError::Forbidden {
                tenant: tenant.to_string(),
            }),
        }
    }
}

/// The known tokens, kept only as SHA-256 hashes.
pub struct Tokens {
    operator: [u8; 32],
    tenants: Vec<([u8; 32], String)>,
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

/// Compares without stopping at the first difference, so timing tells nothing.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// Reads the operator's and tenants' token files.
    pub fn load(config: &ServeConfig) -> Result<Tokens, ServiceError> {
        let read = |path: &std::path::Path, whose: &str| {
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
        };
        let operator = read(&config.server.operator_token_file, "operator")?;
        let mut tenants = Vec::new();
        for (name, tenant) in &config.tenants {
            let token = read(&tenant.token_file, &format!("tenant {name}'s"))?;
            if same(&token, &operator) || tenants.iter().any(|(t, _)| same(t, &token)) {
                return Err(ServiceError::Config {
                    path: tenant.token_file.clone(),
                    message: format!(
                        "tenant {name}'s token is also another caller's; give every caller its own"
                    ),
                });
            }
            tenants.push((token, name.clone()));
        }
        Ok(Tokens { operator, tenants })
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
            .iter()
            .find(|(t, _)| same(t, &token))
            .map(|(_, name)| Caller::Tenant(name.clone()))
            .ok_or(ServiceError::Unauthenticated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens {
            operator: hash("operator-token-0123456789"),
            tenants: vec![(hash("acme-token-0123456789"), "acme".into())],
        }
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
    fn a_tenant_acts_only_for_itself() {
        let acme = Caller::Tenant("acme".into());
        assert!(acme.may_act_for("acme").is_ok());
        assert!(acme.may_act_for("globex").is_err());
        assert!(Caller::Operator.may_act_for("globex").is_ok());
    }
}
