//! What a pipeline asks of the host helpers' records: the value and key formats, the
//! envelope, and the names its schemas carry.

use std::sync::Arc;

use serde::Deserialize;

use crate::names::{avro_name, full_name};
use crate::protobuf::ProtobufSchema;
use crate::supplied::SuppliedSchema;

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
    /// Protobuf in Confluent's wire format, as a message of a supplied `.proto` file.
    Protobuf,
}

impl ValueFormat {
    /// The name config files use.
    pub fn name(self) -> &'static str {
        match self {
            ValueFormat::Json => "json",
            ValueFormat::Avro => "avro",
            ValueFormat::JsonSchema => "json-schema",
            ValueFormat::Protobuf => "protobuf",
        }
    }
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

impl KeyFormat {
    /// The name config files use.
    pub fn name(self) -> &'static str {
        match self {
            KeyFormat::String => "string",
            KeyFormat::Avro => "avro",
        }
    }
}

/// What wraps each record's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Envelope {
    /// The row's fields themselves.
    #[default]
    None,
    /// Debezium's change event: `before`, `after`, `source`, `transaction`, `op`,
    /// `ts_ms`, `ts_us`, `ts_ns`.
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
    /// The message values are written as, for [`ValueFormat::Protobuf`].
    pub protobuf: Option<Arc<ProtobufSchema>>,
    /// The schema Avro or JSON Schema values are written with instead of one derived
    /// from the table.
    pub supplied: Option<Arc<SuppliedSchema>>,
}

impl Format {
    /// Whether records come out as the helpers wrote them before formats existed: JSON
    /// values, text keys, no envelope.
    pub fn is_plain_json(&self) -> bool {
        self.value == ValueFormat::Json
            && self.key == KeyFormat::String
            && self.envelope == Envelope::None
    }

    /// The full name of the value's schema: its Avro record (`namespace.name`, the
    /// Debezium envelope's `namespace.Envelope`), its JSON Schema title (the same), or
    /// its Protobuf message. Record-name subjects are named after it.
    pub fn value_name(&self) -> String {
        match (&self.protobuf, self.value, self.envelope) {
            (Some(schema), ValueFormat::Protobuf, _) => schema.message.full_name().to_string(),
            (_, _, Envelope::Debezium) => full_name(&self.namespace, "Envelope"),
            _ => match self.supplied.as_ref().and_then(|s| s.name.clone()) {
                Some(name) => name,
                None => full_name(&self.namespace, &self.record_name),
            },
        }
    }
}

/// The namespace of a Debezium envelope's records when the pipeline names none:
/// `<pipeline>.delta.<table>`, as Debezium's are `<topic.prefix>.<db>.<table>` (the
/// pipeline is `source.name`, `delta` is `source.db`, the table is the last segment of
/// its location), each part made an Avro name as Debezium's name adjuster does.
pub fn debezium_namespace(pipeline: &str, table: &str) -> String {
    let table = table.trim_end_matches('/');
    let table = table.rsplit(['/', '\\']).next().unwrap_or(table);
    [pipeline, "delta", table].map(avro_name).join(".")
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
            protobuf: None,
            supplied: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::invalid_avro_name;

    #[test]
    fn a_debezium_namespace_is_the_pipeline_delta_and_the_tables_name() {
        assert_eq!(
            debezium_namespace("gold-deals", "s3://lake/crm/deals/"),
            "gold_deals.delta.deals"
        );
        assert_eq!(
            debezium_namespace("gold", "/data/2024 deals"),
            "gold.delta._2024_deals"
        );
        assert_eq!(invalid_avro_name(&debezium_namespace("", ""), true), None);
    }
}
