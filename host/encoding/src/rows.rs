//! The row loop for every format but plain JSON: keys, values (plain or in an
//! envelope), headers and tombstones, record by record in row order.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::RecordBatch;
use sluice_model::helpers::{
    EncodeSpec, HelperError, RecordSink, ValueEncoding, candidates, change_types, text_bytes,
};
use sluice_model::{ChangeType, Column, JsonKey, Record};

use crate::Encoded;
use crate::avro::{self, Names};
use crate::debezium::{self, Event, Op};
use crate::fields::{self, SourceField};
use crate::format::{Envelope, Format, KeyFormat, ValueFormat};
use crate::framing::{FRAME_LEN, SchemaKind, WriterSchema};
use crate::json_schema;
use crate::protobuf::{self, ProtobufSchema};
use crate::row_writer::RowWriter;

/// Makes the records of `spec` in `format` (not plain JSON) into `out`.
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
            let schema = WriterSchema {
                kind: SchemaKind::Avro,
                name: avro::full_name_of(&schema),
                text: schema.to_string(),
                references: Vec::new(),
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
        let (schema, writer) = value_writer(format, &fields, debezium, &rows)?;
        (schema, Some(writer))
    };
    // Protobuf values carry the message's indexes after the schema id.
    let value_prefix: Vec<u8> = match (&value_schema, &format.protobuf) {
        (None, _) => Vec::new(),
        (Some(_), Some(proto)) if format.value == ValueFormat::Protobuf => {
            let mut prefix = vec![0; FRAME_LEN];
            prefix.extend(proto.message_indexes());
            prefix
        }
        (Some(_), _) => vec![0; FRAME_LEN],
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
    let events = match &envelope {
        Some(envelope) => events(
            &rows,
            &changes,
            key_column.as_ref(),
            batch,
            envelope.snapshot,
        )?,
        None => HashMap::new(),
    };

    let mut encoded = 0;
    let mut key_bytes = Vec::new();
    for &row in &rows {
        let index = row as usize;
        let change = changes.get(index).copied();
        let event = events.get(&row).copied();
        if debezium && event.is_none() {
            // A pre-image written as the `before` of its post-image's event.
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
                let mut bytes = value_prefix.clone();
                match (&envelope, event) {
                    (Some(envelope), Some(event)) => {
                        envelope.write(writer, format.value, event, index, &mut bytes)
                    }
                    _ => writer.write(index, &mut bytes),
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
        // A tombstone needs a key: compacted topics refuse one without.
        let follow_with_tombstone =
            has_key && format.tombstones_after_delete && event.is_some_and(|e| e.op == Op::Delete);
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

/// The value's schema (none for plain JSON) and its row writer; refuses a null in `rows`
/// where the Avro schema allows none, JSON a supplied JSON Schema does not describe, and
/// a string no Protobuf enum value is named.
fn value_writer<'a>(
    format: &Format,
    fields: &'a [SourceField],
    debezium: bool,
    rows: &[u32],
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
        buffer: RefCell::default(),
    };
    let framed = |kind, text: String, name: String| {
        Some(Arc::new(WriterSchema {
            kind,
            text,
            name,
            references: Vec::new(),
        }))
    };
    Ok(match format.value {
        ValueFormat::Json => (None, json_writer(debezium)),
        ValueFormat::JsonSchema => {
            let title = format.value_name();
            let row = match &format.supplied {
                Some(supplied) => {
                    json_schema::check_supplied(&supplied.json, fields, rows, debezium)?;
                    supplied.json.clone()
                }
                None => json_schema::object(&title, fields),
            };
            let schema = match debezium {
                true => debezium::json_schema(format, row),
                false => row,
            };
            let name = schema["title"].as_str().unwrap_or(&title).to_string();
            (
                framed(SchemaKind::Json, schema.to_string(), name),
                json_writer(debezium),
            )
        }
        ValueFormat::Avro => {
            let mut names = Names::default();
            let (row, writer) = match &format.supplied {
                Some(supplied) => (
                    supplied.json.clone(),
                    avro::supplied(&supplied.json, fields)?,
                ),
                None => avro::record(&format.record_name, &format.namespace, fields, &mut names)?,
            };
            if let Some(at) = writer.null_in_non_null(rows) {
                let (name, row_number) = (avro::field_name(&row, &at.path), at.row);
                return Err(HelperError(match at.item {
                    false => format!(
                        "Field `{name}` is null in row {row_number}, and its Avro type does not allow null; make it a union with null in the schema."
                    ),
                    true => format!(
                        "Field `{name}` has a null item in row {row_number}, and the Avro type of its items does not allow null; make them a union with null in the schema."
                    ),
                }));
            }
            let schema = match debezium {
                true => debezium::avro_schema(format, row, &mut names),
                false => row,
            };
            (
                framed(
                    SchemaKind::Avro,
                    schema.to_string(),
                    avro::full_name_of(&schema),
                ),
                RowWriter::Avro(writer),
            )
        }
        ValueFormat::Protobuf => {
            let schema: &Arc<ProtobufSchema> = format.protobuf.as_ref().ok_or_else(|| {
                HelperError("The pipeline writes Protobuf but has no .proto message.".into())
            })?;
            if debezium {
                return Err(HelperError(
                    "The Debezium envelope is written as Avro, JSON Schema or JSON, not Protobuf."
                        .into(),
                ));
            }
            let writer = protobuf::MessageWriter::new(&schema.message, fields)?;
            writer.check_enum_names(&mut rows.iter().map(|&row| row as usize))?;
            (
                Some(Arc::new(WriterSchema {
                    kind: SchemaKind::Protobuf,
                    text: schema.text.clone(),
                    name: schema.message.full_name().to_string(),
                    references: schema.imports.clone(),
                })),
                RowWriter::Protobuf(writer),
            )
        }
    })
}

/// The Debezium event each selected row makes; a pre-image paired with its post-image
/// makes none (it is the `before` of the post-image's `u`).
///
/// Pre- and post-images pair by commit version and key (in row order without a key).
/// When the module selects pre-images, one without a post-image (the update changed
/// the key, or the batch ended between them) is a `d` and a post-image without one a
/// `c`, as Debezium writes an update that changes the key. When it selects none, each
/// post-image is a `u` without `before`, as Debezium's is for a table without full
/// replica identity.
fn events(
    rows: &[u32],
    changes: &[ChangeType],
    key: Option<&Column<'_>>,
    batch: &RecordBatch,
    snapshot: bool,
) -> Result<HashMap<u32, Event>, HelperError> {
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
    let selects_preimages = !waiting.is_empty();
    let event = |op, before: Option<u32>, after: Option<u32>| Event {
        op,
        before: before.map(|r| r as usize),
        after: after.map(|r| r as usize),
    };
    let mut events = HashMap::new();
    for &row in rows {
        let made = match changes[row as usize] {
            ChangeType::Insert if snapshot => event(Op::Read, None, Some(row)),
            ChangeType::Insert => event(Op::Create, None, Some(row)),
            ChangeType::Delete => event(Op::Delete, Some(row), None),
            ChangeType::UpdatePreimage => continue,
            ChangeType::UpdatePostimage => {
                let pre = waiting
                    .get_mut(&identity(row as usize))
                    .and_then(VecDeque::pop_front);
                match pre {
                    Some(pre) => event(Op::Update, Some(pre), Some(row)),
                    None if selects_preimages => event(Op::Create, None, Some(row)),
                    None => event(Op::Update, None, Some(row)),
                }
            }
        };
        events.insert(row, made);
    }
    for pre in waiting.into_values().flatten() {
        events.insert(pre, event(Op::Delete, Some(pre), None));
    }
    Ok(events)
}
