//! The state directory: uploaded modules by content digest, each tenant's module list
//! and pipeline definitions with their last known status. Every file is written to a
//! temporary name and renamed, so a crash leaves the old or the new file, never half.
//!
//! ```text
//! <state_dir>/modules/<sha256>.wasm
//! <state_dir>/compiled/                        compiled code, by digest and engine
//! <state_dir>/tenants/<tenant>/modules/<sha256>.json
//! <state_dir>/tenants/<tenant>/pipelines/<name>.json
//! ```

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sluice_pipeline::Position;

use crate::config::TenantConfig;
use crate::error::ServiceError;

/// A module a tenant uploaded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleEntry {
    /// SHA-256 of its bytes.
    pub digest: String,
    /// The name it was uploaded under.
    pub name: String,
    /// Its size.
    pub size_bytes: u64,
    /// The contract version it was built for.
    pub contract: String,
    /// When it was uploaded, in seconds since the epoch.
    pub uploaded_at: u64,
    /// The language it was written in, as its toolchain recorded it (unset when it
    /// did not, or for modules uploaded before Sluice looked).
    #[serde(default)]
    pub language: Option<String>,
}

/// What a pipeline was doing when last looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineState {
    /// Starting or streaming.
    Running,
    /// Stopped by its owner; resumes only when asked.
    Paused,
    /// Stopped by an error (see the status's error); resumes only when asked.
    Failed,
    /// Delivered its `[source] ending_version` (a replay that is done); resuming it
    /// finds nothing more to deliver.
    Finished,
}

/// A pipeline as its owner defined it, and how it was last doing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineDefinition {
    /// The owning tenant.
    pub tenant: String,
    /// Its name within the tenant.
    pub name: String,
    /// The pipeline config as submitted (TOML, the format of `sluice run`).
    pub config: String,
    /// Digest of the module it runs.
    pub module: String,
    /// Digest of the module it ran before the last swap: what `rollback` returns to.
    pub previous_module: Option<String>,
    /// Its last known state.
    pub state: PipelineState,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Where it was when it last stopped, shown while it is not running (the position
    /// itself is in Kafka).
    #[serde(default, deserialize_with = "stopped_at")]
    pub stopped_at: Option<Position>,
    /// The generation of its keyed state: a deploy with a state reset moves it on, to
    /// a new, empty changelog topic and store.
    #[serde(default)]
    pub state_generation: u64,
    /// How many times it was changed: in a cluster, a node keeps a change it made
    /// over an older one that reaches it later.
    #[serde(default)]
    pub revision: u64,
}

/// Reads `stopped_at` as written now (a position) or by earlier versions (a
/// `[version, row offset]` pair, which never was inside a snapshot).
fn stopped_at<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Option<Position>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Position(Position),
        Pair(u64, u64),
    }
    Ok(
        Option::<Written>::deserialize(from)?.map(|written| match written {
            Written::Position(position) => position,
            Written::Pair(version, row_offset) => Position {
                version,
                row_offset,
                snapshot: false,
            },
        }),
    )
}

/// The state directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    root: PathBuf,
}

fn state_error(path: &Path, error: impl std::fmt::Display) -> ServiceError {
    ServiceError::State {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ServiceError> {
    let dir = path.parent().expect("state files live in a directory");
    std::fs::create_dir_all(dir).map_err(|e| state_error(dir, e))?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, bytes).map_err(|e| state_error(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| state_error(path, e))
}

/// The JSON files in `dir`, parsed; none when it does not exist.
fn read_json_files<T: for<'de> Deserialize<'de>>(dir: &Path) -> Result<Vec<T>, ServiceError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(state_error(dir, e)),
    };
    let mut items = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| state_error(dir, e))?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read(&path).map_err(|e| state_error(&path, e))?;
            items.push(serde_json::from_slice(&text).map_err(|e| state_error(&path, e))?);
        }
    }
    Ok(items)
}

impl StateDir {
    /// Opens (creating) the state directory.
    pub fn open(root: &Path) -> Result<StateDir, ServiceError> {
        std::fs::create_dir_all(root.join("modules")).map_err(|e| state_error(root, e))?;
        Ok(StateDir {
            root: root.to_path_buf(),
        })
    }

    /// Where compiled modules are cached.
    pub fn compiled_dir(&self) -> PathBuf {
        self.root.join("compiled")
    }

    /// Where this node keeps the lookup tables its pipelines read, one store per table.
    pub fn lookups_dir(&self) -> PathBuf {
        self.root.join("lookups")
    }

    /// Where this node keeps the keyed state of a tenant's pipeline: one directory per
    /// generation, so a reset starts from an empty one.
    pub fn pipeline_state_dir(&self, tenant: &str, name: &str, generation: u64) -> PathBuf {
        self.root
            .join("state")
            .join(tenant)
            .join(name)
            .join(format!("g{generation}"))
    }

    /// Removes this node's copies of a pipeline's state but the one of generation
    /// `keep` (all of them with `None`): copies left by a reset or a delete made while
    /// another node ran the pipeline, which nothing reads again. Returns the
    /// directories removed.
    pub fn remove_other_state(
        &self,
        tenant: &str,
        name: &str,
        keep: Option<u64>,
    ) -> Result<Vec<PathBuf>, ServiceError> {
        let dir = self.root.join("state").join(tenant).join(name);
        let kept = keep.map(|generation| format!("g{generation}"));
        let failed = |path: &Path, e: std::io::Error| ServiceError::State {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(failed(&dir, e)),
        };
        let mut removed = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| failed(&dir, e))?.path();
            if path.file_name().and_then(|n| n.to_str()) == kept.as_deref() {
                continue;
            }
            std::fs::remove_dir_all(&path).map_err(|e| failed(&path, e))?;
            removed.push(path);
        }
        if keep.is_none() {
            std::fs::remove_dir(&dir).map_err(|e| failed(&dir, e))?;
        }
        Ok(removed)
    }

    /// The stored bytes of a module.
    pub fn module_path(&self, digest: &str) -> PathBuf {
        self.root.join("modules").join(format!("{digest}.wasm"))
    }

    fn tenant_dir(&self, tenant: &str) -> PathBuf {
        self.root.join("tenants").join(tenant)
    }

    /// Stores a module's bytes under its digest and lists it as the tenant's.
    pub fn save_module(
        &self,
        tenant: &str,
        entry: &ModuleEntry,
        bytes: &[u8],
    ) -> Result<(), ServiceError> {
        self.save_module_bytes(&entry.digest, bytes)?;
        self.save_module_entry(tenant, entry)
    }

    /// Stores a module's bytes under its digest, unless they are there.
    pub fn save_module_bytes(&self, digest: &str, bytes: &[u8]) -> Result<(), ServiceError> {
        let path = self.module_path(digest);
        if path.exists() {
            return Ok(());
        }
        write_atomically(&path, bytes)
    }

    /// Whether a module's bytes are stored.
    pub fn has_module_bytes(&self, digest: &str) -> bool {
        self.module_path(digest).exists()
    }

    /// Lists a stored module as the tenant's.
    pub fn save_module_entry(&self, tenant: &str, entry: &ModuleEntry) -> Result<(), ServiceError> {
        let listed = self
            .tenant_dir(tenant)
            .join("modules")
            .join(format!("{}.json", entry.digest));
        let json = serde_json::to_vec_pretty(entry).expect("a module entry serialises");
        write_atomically(&listed, &json)
    }

    /// The bytes of a stored module.
    pub fn read_module(&self, digest: &str) -> Result<Vec<u8>, ServiceError> {
        let path = self.module_path(digest);
        std::fs::read(&path).map_err(|e| state_error(&path, e))
    }

    /// The tenant's modules, oldest first.
    pub fn modules(&self, tenant: &str) -> Result<Vec<ModuleEntry>, ServiceError> {
        let mut modules: Vec<ModuleEntry> =
            read_json_files(&self.tenant_dir(tenant).join("modules"))?;
        modules.sort_by(|a, b| (a.uploaded_at, &a.name).cmp(&(b.uploaded_at, &b.name)));
        Ok(modules)
    }

    /// One of the tenant's modules, if it uploaded it.
    pub fn module(&self, tenant: &str, digest: &str) -> Result<Option<ModuleEntry>, ServiceError> {
        if !digest.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let path = self
            .tenant_dir(tenant)
            .join("modules")
            .join(format!("{digest}.json"));
        match std::fs::read(&path) {
            Ok(text) => serde_json::from_slice(&text)
                .map(Some)
                .map_err(|e| state_error(&path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(state_error(&path, e)),
        }
    }

    fn tenant_path(&self, tenant: &str) -> PathBuf {
        self.tenant_dir(tenant).join("tenant.json")
    }

    /// Writes a tenant the operator put through the API.
    pub fn save_tenant(&self, tenant: &str, config: &TenantConfig) -> Result<(), ServiceError> {
        let json = serde_json::to_vec_pretty(config).expect("a tenant serialises");
        write_atomically(&self.tenant_path(tenant), &json)
    }

    /// Forgets a tenant put through the API (its modules stay listed).
    pub fn remove_tenant(&self, tenant: &str) -> Result<(), ServiceError> {
        let path = self.tenant_path(tenant);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(state_error(&path, e)),
            _ => Ok(()),
        }
    }

    /// The tenants put through the API, by name.
    pub fn tenants(&self) -> Result<Vec<(String, TenantConfig)>, ServiceError> {
        let mut tenants = Vec::new();
        for dir in self.tenant_dirs()? {
            let path = dir.join("tenant.json");
            let text = match std::fs::read(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(state_error(&path, e)),
            };
            let config = serde_json::from_slice(&text).map_err(|e| state_error(&path, e))?;
            let name = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            tenants.push((name, config));
        }
        Ok(tenants)
    }

    /// The directories of every tenant with something stored.
    fn tenant_dirs(&self) -> Result<Vec<PathBuf>, ServiceError> {
        let tenants = self.root.join("tenants");
        let entries = match std::fs::read_dir(&tenants) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(state_error(&tenants, e)),
        };
        entries
            .map(|entry| Ok(entry.map_err(|e| state_error(&tenants, e))?.path()))
            .collect()
    }

    fn pipeline_path(&self, tenant: &str, name: &str) -> PathBuf {
        self.tenant_dir(tenant)
            .join("pipelines")
            .join(format!("{name}.json"))
    }

    /// Writes a pipeline's definition and status.
    pub fn save_pipeline(&self, definition: &PipelineDefinition) -> Result<(), ServiceError> {
        let json = serde_json::to_vec_pretty(definition).expect("a definition serialises");
        write_atomically(
            &self.pipeline_path(&definition.tenant, &definition.name),
            &json,
        )
    }

    /// Forgets a pipeline (one never stored here is forgotten already).
    pub fn remove_pipeline(&self, tenant: &str, name: &str) -> Result<(), ServiceError> {
        let path = self.pipeline_path(tenant, name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(state_error(&path, e)),
            _ => Ok(()),
        }
    }

    /// Every tenant's pipelines.
    pub fn pipelines(&self) -> Result<Vec<PipelineDefinition>, ServiceError> {
        let mut pipelines = Vec::new();
        for dir in self.tenant_dirs()? {
            pipelines.extend(read_json_files::<PipelineDefinition>(
                &dir.join("pipelines"),
            )?);
        }
        Ok(pipelines)
    }
}

/// Seconds since the epoch, now.
pub fn now_seconds() -> u64 {
    now_millis() / 1000
}

/// Milliseconds since the epoch.
pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipeline_s_other_state_copies_are_removed_and_its_current_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert!(
            state
                .remove_other_state("acme", "p", Some(1))
                .unwrap()
                .is_empty()
        );
        for generation in [1, 2, 3] {
            let copy = state.pipeline_state_dir("acme", "p", generation);
            std::fs::create_dir_all(&copy).unwrap();
            std::fs::write(copy.join("state.redb"), b"x").unwrap();
        }
        let other = state.pipeline_state_dir("acme", "q", 1);
        std::fs::create_dir_all(&other).unwrap();
        let mut removed = state.remove_other_state("acme", "p", Some(2)).unwrap();
        removed.sort();
        assert_eq!(
            removed,
            [1, 3].map(|g| state.pipeline_state_dir("acme", "p", g))
        );
        assert!(
            state
                .pipeline_state_dir("acme", "p", 2)
                .join("state.redb")
                .exists()
        );
        state.remove_other_state("acme", "p", None).unwrap();
        assert!(
            !state
                .pipeline_state_dir("acme", "p", 2)
                .parent()
                .unwrap()
                .exists()
        );
        assert!(other.exists(), "another pipeline's copy is not touched");
    }

    #[test]
    fn definitions_and_modules_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let entry = ModuleEntry {
            digest: "ab12".into(),
            name: "m".into(),
            size_bytes: 3,
            language: None,
            contract: "1.0.0".into(),
            uploaded_at: 1,
        };
        state.save_module("acme", &entry, b"abc").unwrap();
        let definition = PipelineDefinition {
            tenant: "acme".into(),
            name: "p".into(),
            config: "x".into(),
            module: "ab12".into(),
            previous_module: None,
            state: PipelineState::Running,
            error: None,
            stopped_at: None,
            state_generation: 0,
            revision: 0,
        };
        state.save_pipeline(&definition).unwrap();
        let reopened = StateDir::open(dir.path()).unwrap();
        assert_eq!(reopened.pipelines().unwrap(), vec![definition]);
        assert_eq!(reopened.module("acme", "ab12").unwrap(), Some(entry));
        assert_eq!(reopened.module("other", "ab12").unwrap(), None);
        assert_eq!(reopened.read_module("ab12").unwrap(), b"abc");
        reopened.remove_pipeline("acme", "p").unwrap();
        assert!(reopened.pipelines().unwrap().is_empty());
    }
}
