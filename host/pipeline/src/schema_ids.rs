//! Schema ids for the records the helpers framed: each schema is registered under its
//! subject once (the registry then knows it; a new table schema makes a new version),
//! and the id goes into the placeholder the helpers left.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_encoding::{Framed, SubjectStrategy, WriterSchema, write_id};
use sluice_registry::{HttpRegistry, RegistryError, SchemaRegistry};
use sluice_sink::SinkRecord;

use crate::config::PipelineConfig;
use crate::work::blocking_step;

/// Most (subject, schema) ids a pipeline keeps; more are asked for again.
const MAX_KNOWN: usize = 1024;

/// A pipeline's registry, its subject naming and the ids it already has.
pub(crate) struct SchemaIds {
    registry: Arc<dyn SchemaRegistry>,
    strategy: SubjectStrategy,
    topic: String,
    pipeline: String,
    known: Mutex<HashMap<(String, Arc<WriterSchema>), u32>>,
}

impl SchemaIds {
    /// The ids of `config`'s registry, when it has one.
    pub(crate) fn for_config(config: &PipelineConfig) -> Result<Option<SchemaIds>, RegistryError> {
        let Some(settings) = config.registry_settings() else {
            return Ok(None);
        };
        let registry = Arc::new(HttpRegistry::new(&settings)?);
        Ok(Some(SchemaIds::new(registry, config)))
    }

    /// Ids from `registry` for `config`'s records.
    pub(crate) fn new(registry: Arc<dyn SchemaRegistry>, config: &PipelineConfig) -> SchemaIds {
        SchemaIds {
            registry,
            strategy: config.sink.encoding.subject_name_strategy,
            topic: config.sink.topic.clone(),
            pipeline: config.pipeline.name.clone(),
            known: Mutex::new(HashMap::new()),
        }
    }

    /// Writes the schema ids into the framed keys and values of `records`, asking the
    /// registry only with `ask` (else it fails with `None`, having written nothing, when
    /// an id is not known yet).
    fn write_ids(
        &self,
        records: &mut [SinkRecord],
        framed: &[Framed],
        ask: bool,
    ) -> Result<Option<()>, RegistryError> {
        // Every id first, so nothing is written unless all are known.
        let mut ids: Vec<(usize, Option<String>, bool, u32)> = Vec::new();
        for (call, framed) in framed.iter().enumerate() {
            for record in &records[framed.records.clone()] {
                for (is_key, schema, present) in [
                    (true, &framed.key, record.key.is_some()),
                    (false, &framed.value, record.value.is_some()),
                ] {
                    let Some(schema) = schema.as_ref().filter(|_| present) else {
                        continue;
                    };
                    let seen = ids
                        .iter()
                        .any(|(c, t, k, _)| *c == call && *t == record.topic && *k == is_key);
                    if seen {
                        continue;
                    }
                    if schema.name.is_empty() && self.strategy != SubjectStrategy::Topic {
                        return Err(RegistryError::Unnamed {
                            kind: schema.kind.registry_name(),
                        });
                    }
                    let topic = record.topic.as_deref().unwrap_or(&self.topic);
                    let subject = self.strategy.subject(topic, is_key, schema);
                    let Some(id) = self.id(subject, schema, ask)? else {
                        return Ok(None);
                    };
                    ids.push((call, record.topic.clone(), is_key, id));
                }
            }
        }
        for (call, framed) in framed.iter().enumerate() {
            for record in &mut records[framed.records.clone()] {
                let id_of = |is_key: bool| {
                    ids.iter()
                        .find(|(c, t, k, _)| *c == call && *t == record.topic && *k == is_key)
                        .map(|(.., id)| *id)
                };
                if let (Some(id), Some(key)) = (id_of(true), record.key.as_mut()) {
                    write_id(key, id);
                }
                if let (Some(id), Some(value)) = (id_of(false), record.value.as_mut()) {
                    write_id(value, id);
                }
            }
        }
        Ok(Some(()))
    }

    /// `records` with ids written into those `framed` names, registering schemas the
    /// registry does not know yet (a blocking request, off the runtime's threads).
    pub(crate) async fn frame(
        self: &Arc<Self>,
        mut records: Vec<SinkRecord>,
        framed: Vec<Framed>,
    ) -> Result<Vec<SinkRecord>, RegistryError> {
        if framed.is_empty() || self.write_ids(&mut records, &framed, false)?.is_some() {
            return Ok(records);
        }
        let ids = self.clone();
        blocking_step(move || ids.write_ids(&mut records, &framed, true).map(|_| records)).await
    }

    /// The id of `schema` under `subject`: known, or (with `ask`) from the registry.
    fn id(
        &self,
        subject: String,
        schema: &Arc<WriterSchema>,
        ask: bool,
    ) -> Result<Option<u32>, RegistryError> {
        let entry = (subject, schema.clone());
        if let Some(&id) = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&entry)
        {
            return Ok(Some(id));
        }
        if !ask {
            return Ok(None);
        }
        let id = self.registry.register(&entry.0, schema)?;
        tracing::info!(
            pipeline = self.pipeline,
            subject = entry.0,
            id,
            kind = schema.kind.registry_name(),
            "The schema registry gave the id of a schema the pipeline writes with."
        );
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        // A module may send a new schema with every batch: forget, don't grow.
        if known.len() >= MAX_KNOWN {
            known.clear();
        }
        known.insert(entry, id);
        Ok(Some(id))
    }
}

#[cfg(test)]
mod tests {
    use sluice_encoding::SchemaKind;
    use sluice_registry::MemoryRegistry;

    use super::*;

    fn config() -> PipelineConfig {
        config_with_encoding("value = \"avro\"")
    }

    fn config_with_encoding(encoding: &str) -> PipelineConfig {
        PipelineConfig::parse(
            &format!(
                r#"
                [pipeline]
                name = "gold"
                [source]
                table = "t"
                [transform]
                module = "m.wasm"
                [sink]
                topic = "deals"
                [sink.encoding]
                {encoding}
                [sink.schema_registry]
                url = "http://127.0.0.1:1"
                "#
            ),
            std::path::Path::new("/"),
        )
        .unwrap()
    }

    fn schema(text: &str) -> Arc<WriterSchema> {
        Arc::new(WriterSchema {
            kind: SchemaKind::Avro,
            text: text.into(),
            name: "sluice.Value".into(),
            references: Vec::new(),
        })
    }

    fn record(topic: Option<&str>, value: Option<&[u8]>) -> SinkRecord {
        SinkRecord {
            topic: topic.map(str::to_string),
            partition: None,
            key: Some(b"k".to_vec()),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            origin: None,
        }
    }

    fn frame(
        ids: &SchemaIds,
        records: &mut [SinkRecord],
        framed: &[Framed],
    ) -> Result<(), RegistryError> {
        ids.write_ids(records, framed, true).map(drop)
    }

    #[test]
    fn ids_go_into_framed_values_once_per_subject_and_schema() {
        let registry = Arc::new(MemoryRegistry::new());
        let ids = SchemaIds::new(registry.clone(), &config());
        let placeholder = [0u8, 0, 0, 0, 0, 7];
        let mut records = vec![
            record(None, Some(&b"plain"[..])),
            record(None, Some(&placeholder)),
            record(None, None),
            record(Some("other"), Some(&placeholder)),
        ];
        let framed = [Framed {
            records: 1..4,
            key: None,
            value: Some(schema("v1")),
        }];
        frame(&ids, &mut records, &framed).unwrap();
        assert_eq!(
            records[0].value.as_deref(),
            Some(&b"plain"[..]),
            "not framed"
        );
        assert_eq!(records[1].value.as_deref(), Some(&[0, 0, 0, 0, 1, 7][..]));
        assert_eq!(records[2].value, None, "a tombstone stays one");
        assert_eq!(records[3].value.as_deref(), Some(&[0, 0, 0, 0, 1, 7][..]));
        assert_eq!(
            records[1].key.as_deref(),
            Some(&b"k"[..]),
            "keys not framed"
        );
        assert_eq!(registry.versions("deals-value"), [1]);
        assert_eq!(registry.versions("other-value"), [1]);
        let mut again = vec![record(None, Some(&placeholder))];
        let framed = [Framed {
            records: 0..1,
            key: None,
            value: Some(schema("v1")),
        }];
        frame(&ids, &mut again, &framed).unwrap();
        assert_eq!(
            registry.registrations(),
            2,
            "known ids are not asked for again"
        );
    }

    #[test]
    fn a_refused_version_is_the_error_and_nothing_is_framed_with_it() {
        let registry = Arc::new(MemoryRegistry::new());
        let ids = SchemaIds::new(registry.clone(), &config());
        let placeholder = [0u8; 5];
        let mut records = vec![record(None, Some(&placeholder))];
        let first = [Framed {
            records: 0..1,
            key: None,
            value: Some(schema("v1")),
        }];
        frame(&ids, &mut records, &first).unwrap();
        registry.freeze("deals-value", "BACKWARD");
        let mut records = vec![record(None, Some(&placeholder))];
        let second = [Framed {
            records: 0..1,
            key: None,
            value: Some(schema("v2")),
        }];
        let error = frame(&ids, &mut records, &second).unwrap_err();
        assert!(
            matches!(&error, RegistryError::Incompatible { subject, level, .. } if subject == "deals-value" && level == "BACKWARD")
        );
        assert_eq!(registry.versions("deals-value"), [1]);
    }

    #[test]
    fn a_modules_unnamed_schema_needs_the_topic_strategy() {
        // value = "json": only the module frames, so record_name is not asked for.
        let config = config_with_encoding("subject_name_strategy = \"record\"");
        let registry = Arc::new(MemoryRegistry::new());
        let ids = SchemaIds::new(registry.clone(), &config);
        let unnamed = Arc::new(WriterSchema {
            kind: SchemaKind::Json,
            text: "{}".into(),
            name: String::new(),
            references: Vec::new(),
        });
        let mut records = vec![record(None, Some(&[0u8, 0, 0, 0, 0, b'1']))];
        let framed = [Framed {
            records: 0..1,
            key: None,
            value: Some(unnamed),
        }];
        let error = frame(&ids, &mut records, &framed).unwrap_err();
        assert!(matches!(error, RegistryError::Unnamed { kind: "JSON" }));
        assert_eq!(registry.registrations(), 0);
        let named = [Framed {
            records: 0..1,
            key: None,
            value: Some(schema("v1")),
        }];
        frame(&ids, &mut records, &named).unwrap();
        assert_eq!(registry.versions("sluice.Value"), [1]);
    }
}
