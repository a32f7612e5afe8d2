//! The schemas an instance framed its own bytes with (`emit-framed`), parsed once and
//! kept for the next batches: a module sends the same schema with every call.

use std::sync::Arc;

use sluice_encoding::{OwnSchema, SchemaKind};

use crate::contract::v1::sluice::transform::types as wit;

/// Most schemas an instance keeps parsed; a module that sends more is served, only
/// slower (the oldest is parsed again when it comes back).
const KEPT: usize = 8;

/// Longest schema text a module may send, in bytes: parsing is bounded by it.
pub(crate) const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// Parsed schemas, newest last.
#[derive(Default)]
pub(crate) struct OwnSchemas {
    kept: Vec<(wit::OwnSchema, Arc<OwnSchema>)>,
}

impl OwnSchemas {
    /// `schema` parsed, from the kept ones when it was seen before.
    pub(crate) fn get(&mut self, schema: wit::OwnSchema) -> Result<Arc<OwnSchema>, String> {
        if let Some((_, parsed)) = self.kept.iter().find(|(seen, _)| same(seen, &schema)) {
            return Ok(parsed.clone());
        }
        if schema.text.len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "a schema of {} bytes is longer than the contract's {MAX_SCHEMA_BYTES}",
                schema.text.len()
            ));
        }
        let kind = match schema.kind {
            wit::SchemaKind::Avro => SchemaKind::Avro,
            wit::SchemaKind::JsonSchema => SchemaKind::Json,
            wit::SchemaKind::Protobuf => SchemaKind::Protobuf,
        };
        let parsed = Arc::new(
            OwnSchema::parse(kind, &schema.text, schema.name.as_deref())
                .map_err(|e| format!("its {} schema: {e}", kind.registry_name()))?,
        );
        if self.kept.len() == KEPT {
            self.kept.remove(0);
        }
        self.kept.push((schema, parsed.clone()));
        Ok(parsed)
    }
}

fn same(a: &wit::OwnSchema, b: &wit::OwnSchema) -> bool {
    a.kind == b.kind && a.name == b.name && a.text == b.text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(text: &str) -> wit::OwnSchema {
        wit::OwnSchema {
            kind: wit::SchemaKind::Avro,
            text: text.into(),
            name: None,
        }
    }

    #[test]
    fn a_schema_is_parsed_once_and_the_oldest_goes_first() {
        let mut schemas = OwnSchemas::default();
        let first = schemas.get(avro(r#""string""#)).unwrap();
        assert!(Arc::ptr_eq(
            &first,
            &schemas.get(avro(r#""string""#)).unwrap()
        ));
        for i in 0..KEPT {
            schemas
                .get(avro(&format!(
                    r#"{{"type":"fixed","name":"F{i}","size":1}}"#
                )))
                .unwrap();
        }
        assert_eq!(schemas.kept.len(), KEPT);
        assert!(!Arc::ptr_eq(
            &first,
            &schemas.get(avro(r#""string""#)).unwrap()
        ));
    }

    #[test]
    fn bad_and_oversized_schemas_are_refused_with_their_kind() {
        let mut schemas = OwnSchemas::default();
        let err = schemas.get(avro("{")).unwrap_err();
        assert!(
            err.starts_with("its AVRO schema: the Avro schema is not JSON"),
            "{err}"
        );
        let err = schemas
            .get(avro(&" ".repeat(MAX_SCHEMA_BYTES + 1)))
            .unwrap_err();
        assert!(err.contains("longer than the contract's"), "{err}");
    }
}
