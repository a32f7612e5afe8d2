//! A registry in memory: ids by schema text across subjects, versions per subject, and
//! subjects that refuse new versions, for tests of what uses a registry.

use std::collections::BTreeMap;
use std::sync::Mutex;

use sluice_encoding::WriterSchema;

use crate::{Registration, RegistryError, SchemaRegistry};

/// Schemas in memory. Ids are shared across subjects, as Confluent's are.
#[derive(Debug, Default)]
pub struct MemoryRegistry {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    ids: BTreeMap<String, u32>,
    subjects: BTreeMap<String, Vec<u32>>,
    frozen: BTreeMap<String, String>,
    registrations: usize,
}

impl MemoryRegistry {
    /// An empty registry.
    pub fn new() -> MemoryRegistry {
        MemoryRegistry::default()
    }

    /// Makes `subject` refuse any schema it does not have yet, as a registry at
    /// compatibility `level` refuses an incompatible one.
    pub fn freeze(&self, subject: &str, level: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.frozen.insert(subject.to_string(), level.to_string());
    }

    /// The ids registered under `subject`, oldest first.
    pub fn versions(&self, subject: &str) -> Vec<u32> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.subjects.get(subject).cloned().unwrap_or_default()
    }

    /// How many times `register` was called.
    pub fn registrations(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .registrations
    }
}

impl SchemaRegistry for MemoryRegistry {
    fn register(&self, subject: &str, schema: &WriterSchema) -> Result<u32, RegistryError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.registrations += 1;
        let next = state.ids.len() as u32 + 1;
        let id = *state.ids.get(&schema.text).unwrap_or(&next);
        let known = state.subjects.get(subject).is_some_and(|v| v.contains(&id));
        if known {
            return Ok(id);
        }
        let existing = state.subjects.get(subject).is_some_and(|v| !v.is_empty());
        if let Some(level) = state.frozen.get(subject).filter(|_| existing) {
            return Err(RegistryError::Incompatible {
                url: "memory".to_string(),
                subject: subject.to_string(),
                level: level.clone(),
                message: "the subject is frozen".to_string(),
            });
        }
        state.ids.insert(schema.text.clone(), id);
        state
            .subjects
            .entry(subject.to_string())
            .or_default()
            .push(id);
        Ok(id)
    }

    fn preview(&self, subject: &str, schema: &WriterSchema) -> Result<Registration, RegistryError> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let versions = state.subjects.get(subject);
        if let Some(&id) = state.ids.get(&schema.text)
            && versions.is_some_and(|v| v.contains(&id))
        {
            return Ok(Registration::Known(id));
        }
        Ok(match state.frozen.get(subject) {
            Some(_) if versions.is_some_and(|v| !v.is_empty()) => {
                Registration::Refused("the subject is frozen".to_string())
            }
            _ => Registration::Accepted,
        })
    }

    fn compatibility(&self, subject: &str) -> Result<String, RegistryError> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Ok(state
            .frozen
            .get(subject)
            .cloned()
            .unwrap_or_else(|| "NONE".to_string()))
    }
}
