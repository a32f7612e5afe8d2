//! The schemas an instance framed its own bytes with (`emit-framed`), parsed once and
//! kept for the next batches: a module sends the same schema with every call.

use std::sync::Arc;

use sluice_encoding::{OwnSchema, SchemaKind};

/// Most schemas an instance keeps parsed; a module that sends more is served, only
/// slower (the oldest is parsed again when it comes back).
const KEPT: usize = 8;

/// Longest schema text a module may send, in bytes: parsing is bounded by it.
pub(crate) const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// Parsed schemas, newest last, each with what the module sent.
#[derive(Default)]
pub(crate) struct OwnSchemas {
    kept: Vec<(Sent, Arc<OwnSchema>)>,
}

/// A schema as the module sent it (its kind, text and name), to know it again.
#[derive(PartialEq, Eq)]
struct Sent {
    kind: SchemaKind,
    text: String,
    name: Option<String>,
}

impl OwnSchemas {
    /// The schema of `kind` with `text` and `name` parsed, from the kept ones when it
    /// was seen before.
    pub(crate) fn get(
        &mut self,
        kind: SchemaKind,
        text: String,
        name: Option<String>,
    ) -> Result<Arc<OwnSchema>, String> {
        let sent = Sent { kind, text, name };
        if let Some((_, parsed)) = self.kept.iter().find(|(seen, _)| *seen == sent) {
            return Ok(parsed.clone());
        }
        if sent.text.len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "a schema of {} bytes is longer than the contract's {MAX_SCHEMA_BYTES}",
                sent.text.len()
            ));
        }
        let parsed = Arc::new(
            OwnSchema::parse(kind, &sent.text, sent.name.as_deref())
                .map_err(|e| format!("its {} schema: {e}", kind.registry_name()))?,
        );
        if self.kept.len() == KEPT {
            self.kept.remove(0);
        }
        self.kept.push((sent, parsed.clone()));
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(schemas: &mut OwnSchemas, text: &str) -> Result<Arc<OwnSchema>, String> {
        schemas.get(SchemaKind::Avro, text.into(), None)
    }

    #[test]
    fn a_schema_is_parsed_once_and_the_oldest_goes_first() {
        let mut schemas = OwnSchemas::default();
        let first = avro(&mut schemas, r#""string""#).unwrap();
        assert!(Arc::ptr_eq(
            &first,
            &avro(&mut schemas, r#""string""#).unwrap()
        ));
        for i in 0..KEPT {
            avro(
                &mut schemas,
                &format!(r#"{{"type":"fixed","name":"F{i}","size":1}}"#),
            )
            .unwrap();
        }
        assert_eq!(schemas.kept.len(), KEPT);
        assert!(!Arc::ptr_eq(
            &first,
            &avro(&mut schemas, r#""string""#).unwrap()
        ));
    }

    #[test]
    fn bad_and_oversized_schemas_are_refused_with_their_kind() {
        let mut schemas = OwnSchemas::default();
        let err = avro(&mut schemas, "{").unwrap_err();
        assert!(
            err.starts_with("its AVRO schema: the Avro schema is not JSON"),
            "{err}"
        );
        let err = avro(&mut schemas, &" ".repeat(MAX_SCHEMA_BYTES + 1)).unwrap_err();
        assert!(err.contains("longer than the contract's"), "{err}");
    }
}
