//! The row loop for every format but plain JSON: keys, values (plain or in an
//! envelope), headers and tombstones, record by record in row order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde_json::Value as Json;
use sluice_model::helpers::{
    EncodeSpec, HelperError, RecordSink, ValueEncoding, candidates, change_types, text_bytes,
};
use sluice_model::{ChangeType, Column, JsonKey, JsonObject, Record, write_json_string};

use crate::Encoded;
use crate::avro::{self, Names};
use crate::debezium::{self, Op};
use crate::fields::{self, SourceField};
use crate::format::{Envelope, Format, KeyFormat, ValueFormat};
use crate::framing::{FRAME_LEN, SchemaKind, WriterSchema};
use crate::json_schema;

/// How each row's fields become value bytes.
pub(crate) enum RowWriter<'a> {
    /// A JSON object, nulls left out (plain) or written (`with_nulls`, Debezium's).
    Json {
        fields: Vec<(JsonKey, &'a str, Column<'a>)>,
        with_nulls: bool,
    },
    /// An Avro record.
    Avro(avro::Writer),
}

impl RowWriter<'_> {
    pub(crate) fn write(&self, row: usize, out: &mut Vec<u8>) {
        match self {
            RowWriter::Json { fields, with_nulls } => {
                let mut object = JsonObject::in_buffer(String::new());
                for (key, _, column) in fields {
                    object.push_keyed(key, &column.value(row));
                }
                let mut text = object.finish();
                if *with_nulls {
                    text = with_null_fields(fields, row, text);
                }
                out.extend_from_slice(text.as_bytes());
            }
            RowWriter::Avro(writer) => writer.write_row(row, out),
        }
    }
}

/// Debezium's JSON carries every field, null ones as `null`: the nulls the plain
/// writer left out are appended.
fn with_null_fields(
    fields: &[(JsonKey, &str, Column<'_>)],
    row: usize,
    mut text: String,
) -> String {
    text.pop();
    for (_, name, column) in fields {
        if column.is_null(row) {
            if text.len() > 1 {
                text.push(',');
            }
            write_json_string(&mut text, name);
            text.push_str(":null");
        }
    }
    text.push('}');
    text
}

pub(crate) fn encode(
    batch: &RecordBatch,
    spec: &EncodeSpec,
    format: &Format,
    out: &mut impl RecordSink,
) -> Result<Encoded, HelperError> {
    let rows = candidates(batch, Some(&spec.rows))?;
    let key = spec
        .key
        .as_ref()
        .map(|k| fields::resolve(batch, "key", k))
        .transpose()?;
    let fields: Vec<SourceField> = match &spec.value {
        ValueEncoding::Json(fields) => fields
            .iter()
            .map(|(name, value)| fields::resolve(batch, name, value))
            .collect::<Result<_, _>>()?,
        ValueEncoding::JsonRow => fields::whole_row(batch),
        ValueEncoding::Tombstone => Vec::new(),
    };
    let headers: Vec<(String, SourceField)> = spec
        .headers
        .iter()
        .map(|(name, value)| Ok((name.clone(), fields::resolve(batch, name, value)?)))
        .collect::<Result<_, HelperError>>()?;
    let header_columns: Vec<(&str, Column<'_>)> = headers
        .iter()
        .map(|(name, field)| (name.as_str(), Column::new(field.array.as_ref())))
        .collect();
    let tombstones_only = matches!(spec.value, ValueEncoding::Tombstone);

    let (key_schema, key_writer) = match (&key, format.key) {
        (Some(key), KeyFormat::Avro) => {
            let (schema, writer) = avro::typed(&key.array, false, "key", &mut Names::default())?;
            let name = primitive_or_record_name(&schema);
            let schema = WriterSchema {
                kind: SchemaKind::Avro,
                text: schema.to_string(),
                name,
            };
            (Some(Arc::new(schema)), Some(writer))
        }
        _ => (None, None),
    };
    let key_column = key.as_ref().map(|k| Column::new(k.array.as_ref()));

    let debezium = format.envelope == Envelope::Debezium && !tombstones_only;
    let (value_schema, row_writer) = if tombstones_only {
        (None, None)
    } else {
        let (schema, writer) = value_writer(format, &fields, debezium)?;
        (schema, Some(writer))
    };
    let envelope = match debezium {
        true => Some(debezium::Envelope::new(batch, format)?),
        false => None,
    };
    let changes = if spec.delete_as_tombstone || debezium {
        change_types(batch)?
    } else {
        Vec::new()
    };
    let pairs = match debezium {
        true => pair_updates(&rows, &changes, key_column.as_ref(), batch)?,
        false => HashMap::new(),
    };
    let framed_value = value_schema.is_some();

    let mut encoded = 0;
    let mut key_bytes = Vec::new();
    for &row in &rows {
        let index = row as usize;
        let change = changes.get(index).copied();
        if debezium && change == Some(ChangeType::UpdatePreimage) {
            // Written as the `before` of its post-image's event, or not at all.
            continue;
        }
        key_bytes.clear();
        let has_key = match (&key_column, &key_writer) {
            (Some(column), _) if column.is_null(index) => false,
            (Some(_), Some(writer)) => {
                key_bytes.extend_from_slice(&[0; FRAME_LEN]);
                writer.write(index, &mut key_bytes);
                true
            }
            (Some(column), None) => text_bytes(&column.value(index), &mut key_bytes),
            (None, _) => false,
        };
        let tombstone = tombstones_only
            || (!debezium && spec.delete_as_tombstone && change == Some(ChangeType::Delete));
        let value = match (&row_writer, tombstone) {
            (Some(writer), false) => {
                let mut bytes = Vec::new();
                if framed_value {
                    bytes.extend_from_slice(&[0; FRAME_LEN]);
                }
                match &envelope {
                    Some(envelope) => {
                        let op = Op::of(change.unwrap_or(ChangeType::Insert), envelope.snapshot);
                        let before = match op {
                            Op::Update => pairs.get(&row).map(|&pre| pre as usize),
                            Op::Delete => Some(index),
                            _ => None,
                        };
                        let after = (op != Op::Delete).then_some(index);
                        envelope.write(writer, format.value, op, before, after, index, &mut bytes);
                    }
                    None => writer.write(index, &mut bytes),
                }
                Some(bytes)
            }
            _ => None,
        };
        let mut record = Record {
            source_row: row,
            topic: spec.topic.clone(),
            key: has_key.then(|| key_bytes.clone()),
            value,
            ..Record::default()
        };
        for (name, column) in &header_columns {
            let mut bytes = Vec::new();
            if text_bytes(&column.value(index), &mut bytes) {
                record.headers.push((name.to_string(), bytes));
            }
        }
        let follow_with_tombstone =
            debezium && format.tombstones_after_delete && change == Some(ChangeType::Delete);
        let tombstone_record = follow_with_tombstone.then(|| Record {
            value: None,
            ..record.clone()
        });
        if out.push_record(record).is_break() {
            return Ok(done(encoded, key_schema, value_schema));
        }
        if let Some(tombstone) = tombstone_record
            && out.push_record(tombstone).is_break()
        {
            return Ok(done(encoded, key_schema, value_schema));
        }
        encoded += 1;
    }
    Ok(done(encoded, key_schema, value_schema))
}

fn done(rows: u32, key: Option<Arc<WriterSchema>>, value: Option<Arc<WriterSchema>>) -> Encoded {
    Encoded { rows, key, value }
}

/// The value's schema (none for plain JSON) and its row writer.
fn value_writer<'a>(
    format: &Format,
    fields: &'a [SourceField],
    debezium: bool,
) -> Result<(Option<Arc<WriterSchema>>, RowWriter<'a>), HelperError> {
    let json_writer = |with_nulls| RowWriter::Json {
        fields: fields
            .iter()
            .map(|f| {
                (
                    JsonKey::new(&f.name),
                    f.name.as_str(),
                    Column::new(f.array.as_ref()),
                )
            })
            .collect(),
        with_nulls,
    };
    Ok(match format.value {
        ValueFormat::Json => (None, json_writer(debezium)),
        ValueFormat::JsonSchema => {
            let row = json_schema::object(&format.record_name, fields);
            let schema = match debezium {
                true => debezium::json_schema(format, row),
                false => row,
            };
            let name = format.full_name();
            (
                Some(Arc::new(WriterSchema {
                    kind: SchemaKind::Json,
                    text: schema.to_string(),
                    name,
                })),
                json_writer(debezium),
            )
        }
        ValueFormat::Avro => {
            let mut names = Names::default();
            let row_name = match debezium {
                true => "Value",
                false => format.record_name.as_str(),
            };
            let (row, writer) = avro::record(row_name, &format.namespace, fields, &mut names)?;
            let (schema, name) = match debezium {
                true => (
                    debezium::avro_schema(format, row, &mut names),
                    crate::format::full_name(&format.namespace, "Envelope"),
                ),
                false => (row, format.full_name()),
            };
            (
                Some(Arc::new(WriterSchema {
                    kind: SchemaKind::Avro,
                    text: schema.to_string(),
                    name,
                })),
                RowWriter::Avro(writer),
            )
        }
    })
}

/// A primitive schema's type name, or a record's name.
fn primitive_or_record_name(schema: &Json) -> String {
    match schema {
        Json::String(name) => name.clone(),
        Json::Object(object) => object
            .get("name")
            .or_else(|| object.get("type"))
            .and_then(Json::as_str)
            .unwrap_or("key")
            .to_string(),
        _ => "key".to_string(),
    }
}

/// For each selected post-image, the selected pre-image of the same update: the
/// first unpaired one of the same commit version and key (in row order when there is
/// no key).
fn pair_updates(
    rows: &[u32],
    changes: &[ChangeType],
    key: Option<&Column<'_>>,
    batch: &RecordBatch,
) -> Result<HashMap<u32, u32>, HelperError> {
    let versions = Column::find(batch, sluice_model::helpers::COMMIT_VERSION)
        .map_err(|e| HelperError(e.to_string()))?;
    let identity = |row: usize| {
        let mut text = Vec::new();
        if let Some(key) = key {
            text_bytes(&key.value(row), &mut text);
        }
        (format!("{:?}", versions.value(row)), text)
    };
    // Pre-images first: a change file may hold an update's post-image before its
    // pre-image.
    let mut waiting: HashMap<(String, Vec<u8>), VecDeque<u32>> = HashMap::new();
    for &row in rows {
        if changes[row as usize] == ChangeType::UpdatePreimage {
            waiting
                .entry(identity(row as usize))
                .or_default()
                .push_back(row);
        }
    }
    let mut pairs = HashMap::new();
    for &row in rows {
        if changes[row as usize] == ChangeType::UpdatePostimage
            && let Some(pre) = waiting
                .get_mut(&identity(row as usize))
                .and_then(VecDeque::pop_front)
        {
            pairs.insert(row, pre);
        }
    }
    Ok(pairs)
}
