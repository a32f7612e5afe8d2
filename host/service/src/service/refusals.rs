//! Modules refused for passing a compile budget, remembered so the host does not spend
//! that budget on them again: a tenant who uploads the same bytes again, under the same
//! caps, gets the recorded refusal at once. In a cluster the refusal is written to the
//! shared state, so every node knows it and none compiles the module.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sluice_engine::CompileBudget;

use super::Service;
use crate::auth::TenantScope;
use crate::error::ServiceError;
use crate::store::now_seconds;

/// A module refused for one of its compile budgets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// SHA-256 of its bytes.
    pub digest: String,
    /// The name it was uploaded under.
    pub name: String,
    /// Why, as the upload was told.
    pub reason: String,
    /// The tenant's compile memory cap then, in MiB.
    pub max_compile_mib: usize,
    /// The tenant's compile time cap then, in seconds.
    pub max_compile_seconds: u64,
    /// When, in seconds since the epoch.
    pub refused_at: u64,
}

impl Refusal {
    /// Whether the refusal still holds under `budget`: a tenant whose caps changed
    /// gets its module compiled again.
    fn holds_under(&self, budget: &CompileBudget) -> bool {
        self.max_compile_mib == budget.memory_bytes / (1024 * 1024)
            && self.max_compile_seconds == budget.deadline.as_secs()
    }
}

/// Every tenant's refused modules, by tenant and digest.
#[derive(Default)]
pub(super) struct Refusals {
    refused: Mutex<BTreeMap<(String, String), Refusal>>,
}

impl Refusals {
    /// Records (or replaces) a refusal.
    pub(super) fn insert(&self, tenant: &str, refusal: Refusal) {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((tenant.to_string(), refusal.digest.clone()), refusal);
    }

    /// Forgets a tenant's refusals (the tenant was removed).
    pub(super) fn forget_tenant(&self, tenant: &str) {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(t, _), _| t != tenant);
    }

    /// The refusal of `digest` for `tenant` that still holds under `budget`.
    pub(super) fn holding(
        &self,
        tenant: &str,
        digest: &str,
        budget: &CompileBudget,
    ) -> Option<Refusal> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(tenant.to_string(), digest.to_string()))
            .filter(|r| r.holds_under(budget))
            .cloned()
    }

    fn of_tenant(&self, tenant: &str) -> Vec<Refusal> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

/// The key of a refusal in the cluster's shared state.
pub(super) fn refusal_key(tenant: &str, digest: &str) -> String {
    format!("refused/{tenant}/{digest}")
}

impl Service {
    /// The tenant's modules refused for their compile budgets.
    pub async fn refused_modules(
        &self,
        tenant: &TenantScope,
    ) -> Result<Vec<Refusal>, ServiceError> {
        self.found(|| self.tenant(tenant)).await?;
        Ok(self.refusals.of_tenant(tenant))
    }

    /// Records that `name` (`digest`) of `tenant` passed its compile budget: on every
    /// node when in a cluster.
    pub(super) async fn record_refusal(
        &self,
        tenant: &str,
        name: &str,
        digest: &str,
        budget: &CompileBudget,
        reason: &str,
    ) {
        let refusal = Refusal {
            digest: digest.to_string(),
            name: name.to_string(),
            reason: reason.to_string(),
            max_compile_mib: budget.memory_bytes / (1024 * 1024),
            max_compile_seconds: budget.deadline.as_secs(),
            refused_at: now_seconds(),
        };
        tracing::warn!(
            tenant,
            module = name,
            digest,
            reason,
            "A module was refused for its compile budget; it is not compiled again until it or the tenant's caps change."
        );
        let _ = self.placement().keep_refusal(self, tenant, refusal).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn refusal(mib: usize, seconds: u64) -> Refusal {
        Refusal {
            digest: "d".into(),
            name: "bomb".into(),
            reason: "too slow".into(),
            max_compile_mib: mib,
            max_compile_seconds: seconds,
            refused_at: 1,
        }
    }

    #[test]
    fn a_refusal_holds_until_the_tenants_caps_change() {
        let refusals = Refusals::default();
        refusals.insert("evil", refusal(1024, 120));
        let same = CompileBudget {
            memory_bytes: 1024 * 1024 * 1024,
            deadline: Duration::from_secs(120),
        };
        assert!(refusals.holding("evil", "d", &same).is_some());
        assert!(refusals.holding("good", "d", &same).is_none());
        let raised = CompileBudget {
            deadline: Duration::from_secs(300),
            ..same.clone()
        };
        assert!(refusals.holding("evil", "d", &raised).is_none());
        refusals.forget_tenant("evil");
        assert!(refusals.holding("evil", "d", &same).is_none());
    }
}
