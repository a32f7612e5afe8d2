//! What a pipeline asks of the host helpers' records: the value and key formats, the
//! envelope, and the names its schemas carry.

use serde::Deserialize;

/// How a helper-made record's value is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueFormat {
    /// JSON text, as Spark's `to_json` writes it; no schema, no framing.
    #[default]
    Json,
    /// Avro binary in Confluent's wire format, with a schema derived from the table.
    Avro,
    /// JSON text in Confluent's wire format, with a JSON Schema derived from the table.
    JsonSchema,
}

/// How a helper-made record's key is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyFormat {
    /// The key's value as text (strings as they are); no framing.
    #[default]
    String,
    /// An Avro primitive of the key column's type in Confluent's wire format.
    Avro,
}

/// What wraps each record's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Envelope {
    /// The row's fields themselves.
    #[default]
    None,
    /// Debezium's change event: `before`, `after`, `op`, `source`, `ts_ms`.
    Debezium,
}

/// Everything the helpers need to write records in a pipeline's format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// The value format.
    pub value: ValueFormat,
    /// The key format.
    pub key: KeyFormat,
    /// The envelope.
    pub envelope: Envelope,
    /// Whether a Debezium delete event is followed by a tombstone, as Debezium's
    /// `tombstones.on.delete` does.
    pub tombstones_after_delete: bool,
    /// Name of the value's Avro record (JSON Schema title).
    pub record_name: String,
    /// Namespace of the Avro records.
    pub namespace: String,
    /// The pipeline's name, as Debezium's `source.name`.
    pub pipeline: String,
    /// The table, as Debezium's `source.table`.
    pub table: String,
}

impl Format {
    /// Whether records come out as the helpers wrote them before formats existed: JSON
    /// values, text keys, no envelope.
    pub fn is_plain_json(&self) -> bool {
        self.value == ValueFormat::Json
            && self.key == KeyFormat::String
            && self.envelope == Envelope::None
    }

    /// The value record's full name (`namespace.name`).
    pub fn full_name(&self) -> String {
        full_name(&self.namespace, &self.record_name)
    }
}

/// `namespace.name`, or `name` without a namespace.
pub(crate) fn full_name(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    }
}

impl Default for Format {
    fn default() -> Format {
        Format {
            value: ValueFormat::Json,
            key: KeyFormat::String,
            envelope: Envelope::None,
            tombstones_after_delete: true,
            record_name: "Value".to_string(),
            namespace: "sluice".to_string(),
            pipeline: String::new(),
            table: String::new(),
        }
    }
}
