//! Schema ids for the records the helpers framed: each schema is registered under its
//! subject once (the registry then knows it; a new table schema makes a new version),
//! and the id goes into the placeholder the helpers left.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_encoding::{FRAME_LEN, Framed, SubjectStrategy, WriterSchema, write_id};
use sluice_engine::OutputRecord;
use sluice_registry::{HttpRegistry, RegistryError, SchemaRegistry};

use crate::config::PipelineConfig;

/// A pipeline's registry, its subject naming and the ids it already has.
pub(crate) struct SchemaIds {
    registry: Arc<dyn SchemaRegistry>,
    strategy: SubjectStrategy,
    topic: String,
    pipeline: String,
    known: Mutex<HashMap<(String, String), u32>>,
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

    /// Writes the schema id into every framed key and value of `records`.
    pub(crate) fn frame(
        &self,
        records: &mut [OutputRecord],
        framed: &[Framed],
    ) -> Result<(), RegistryError> {
        for call in framed {
            for record in &mut records[call.records.clone()] {
                let topic = record.topic.as_deref().unwrap_or(&self.topic).to_string();
                if let (Some(schema), Some(key)) = (&call.key, record.key.as_mut()) {
                    self.write(&topic, true, schema, key)?;
                }
                if let (Some(schema), Some(value)) = (&call.value, record.value.as_mut()) {
                    self.write(&topic, false, schema, value)?;
                }
            }
        }
        Ok(())
    }

    fn write(
        &self,
        topic: &str,
        is_key: bool,
        schema: &WriterSchema,
        bytes: &mut [u8],
    ) -> Result<(), RegistryError> {
        debug_assert!(bytes.len() >= FRAME_LEN, "the helpers left a placeholder");
        let subject = self.strategy.subject(topic, is_key, schema);
        let id = self.id(subject, schema)?;
        write_id(bytes, id);
        Ok(())
    }

    fn id(&self, subject: String, schema: &WriterSchema) -> Result<u32, RegistryError> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let entry = (subject, schema.text.clone());
        if let Some(&id) = known.get(&entry) {
            return Ok(id);
        }
        // Not holding the lock over the request: other stages keep framing records of
        // schemas already known.
        drop(known);
        let id = self.registry.register(&entry.0, schema)?;
        tracing::info!(
            pipeline = self.pipeline,
            subject = entry.0,
            id,
            kind = schema.kind.registry_name(),
            "The schema registry gave the id of a schema the pipeline writes with."
        );
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(entry, id);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use sluice_encoding::SchemaKind;
    use sluice_registry::MemoryRegistry;

    use super::*;

    fn config() -> PipelineConfig {
        PipelineConfig::parse(
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
            value = "avro"
            [sink.schema_registry]
            url = "http://127.0.0.1:1"
            "#,
            std::path::Path::new("/"),
        )
        .unwrap()
    }

    fn schema(text: &str) -> Arc<WriterSchema> {
        Arc::new(WriterSchema {
            kind: SchemaKind::Avro,
            text: text.into(),
            name: "sluice.Value".into(),
        })
    }

    fn record(topic: Option<&str>, value: Option<&[u8]>) -> OutputRecord {
        OutputRecord {
            topic: topic.map(str::to_string),
            key: Some(b"k".to_vec()),
            value: value.map(<[u8]>::to_vec),
            ..OutputRecord::default()
        }
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
        ids.frame(&mut records, &framed).unwrap();
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
        ids.frame(&mut again, &framed).unwrap();
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
        ids.frame(&mut records, &first).unwrap();
        registry.freeze("deals-value", "BACKWARD");
        let mut records = vec![record(None, Some(&placeholder))];
        let second = [Framed {
            records: 0..1,
            key: None,
            value: Some(schema("v2")),
        }];
        let error = ids.frame(&mut records, &second).unwrap_err();
        assert!(
            matches!(&error, RegistryError::Incompatible { subject, level, .. } if subject == "deals-value" && level == "BACKWARD")
        );
        assert_eq!(registry.versions("deals-value"), [1]);
    }
}
