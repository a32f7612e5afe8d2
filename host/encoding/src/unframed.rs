//! Records a pipeline's format writes through a schema registry but whose bytes the
//! module made itself: produced as they are, consumers would meet keys or values
//! without a schema id.

use crate::format::{Format, KeyFormat, ValueFormat};
use crate::framing::Framed;

/// The part of a record the module wrote itself where the format wants it framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnframedPart {
    /// The key, under `key = "avro"`.
    Key,
    /// The value, under `value = "avro"`, `"json-schema"` or `"protobuf"`.
    Value,
}

impl UnframedPart {
    /// The part's name in `[sink.encoding]`.
    pub fn name(self) -> &'static str {
        match self {
            UnframedPart::Key => "key",
            UnframedPart::Value => "value",
        }
    }

    /// What `format` asks of the part (`avro`, `json-schema`, `protobuf`).
    pub fn asked(self, format: &Format) -> &'static str {
        match self {
            UnframedPart::Key => format.key.name(),
            UnframedPart::Value => format.value.name(),
        }
    }
}

/// The first record whose key or value `format` writes through a schema registry but
/// that no helper call framed: `(index, part)`. `parts` gives each record's
/// `(has key, has value)` in output order; tombstones and records without a key are
/// never refused.
pub fn first_unframed(
    format: &Format,
    parts: impl ExactSizeIterator<Item = (bool, bool)>,
    framed: &[Framed],
) -> Option<(usize, UnframedPart)> {
    let keys = format.key == KeyFormat::Avro;
    let values = format.value != ValueFormat::Json;
    if !keys && !values {
        return None;
    }
    let mut covered = vec![(false, false); parts.len()];
    for frame in framed {
        let end = frame.records.end.min(covered.len());
        for slot in &mut covered[frame.records.start.min(end)..end] {
            slot.0 |= frame.key.is_some();
            slot.1 |= frame.value.is_some();
        }
    }
    parts.zip(covered).enumerate().find_map(
        |(index, ((key, value), (key_framed, value_framed)))| {
            if values && value && !value_framed {
                Some((index, UnframedPart::Value))
            } else if keys && key && !key_framed {
                Some((index, UnframedPart::Key))
            } else {
                None
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::framing::{SchemaKind, WriterSchema};

    fn schema() -> Arc<WriterSchema> {
        Arc::new(WriterSchema {
            kind: SchemaKind::Avro,
            text: "\"string\"".to_string(),
            name: String::new(),
            references: Vec::new(),
        })
    }

    fn format(value: ValueFormat, key: KeyFormat) -> Format {
        Format {
            value,
            key,
            ..Format::default()
        }
    }

    #[test]
    fn own_values_are_refused_only_where_the_format_frames_values() {
        let records = [(true, true), (true, true), (true, false)];
        let helpers = [Framed {
            records: 0..1,
            key: None,
            value: Some(schema()),
        }];
        let avro = format(ValueFormat::Avro, KeyFormat::String);
        assert_eq!(
            first_unframed(&avro, records.into_iter(), &helpers),
            Some((1, UnframedPart::Value))
        );
        let json = format(ValueFormat::Json, KeyFormat::String);
        assert_eq!(first_unframed(&json, records.into_iter(), &[]), None);
        // A tombstone has no value to frame.
        assert_eq!(
            first_unframed(&avro, [(true, false)].into_iter(), &[]),
            None
        );
    }

    #[test]
    fn own_keys_are_refused_under_avro_keys() {
        let framed_values = [Framed {
            records: 0..2,
            key: None,
            value: Some(schema()),
        }];
        let avro_keys = format(ValueFormat::Avro, KeyFormat::Avro);
        assert_eq!(
            first_unframed(
                &avro_keys,
                [(false, true), (true, true)].into_iter(),
                &framed_values
            ),
            Some((1, UnframedPart::Key))
        );
        let both = [Framed {
            records: 0..2,
            key: Some(schema()),
            value: Some(schema()),
        }];
        assert_eq!(
            first_unframed(&avro_keys, [(true, true), (true, true)].into_iter(), &both),
            None
        );
    }
}
