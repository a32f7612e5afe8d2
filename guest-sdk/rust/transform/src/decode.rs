//! The host's batch as Arrow: its IPC stream decoded in place, or the contract's typed
//! columns assembled. Apart from the batch, so the host calls can decode without
//! importing it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_buffer::Buffer;
use arrow_data::UnsafeFlag;
use arrow_ipc::reader::RecordBatchDecoder;
use arrow_ipc::{Message, MessageHeader};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use sluice_model::ChangeType;
use sluice_model::helpers::{CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
use sluice_transform_sys::sluice::transform::types as wit;

use crate::error::Error;

/// Decodes the host's Arrow IPC stream (one schema message, one record batch) in
/// place: the arrays point into `bytes` (only a buffer the stream left unaligned for
/// its type is copied), and the data is not validated again, since the host wrote it
/// from a valid batch with the same Arrow. (arrow-ipc 59's `StreamDecoder` slices
/// too, but validates every string whatever the flag says; `StreamReader` copies each
/// message body.)
pub(crate) fn from_ipc(bytes: Vec<u8>) -> Result<RecordBatch, Error> {
    let unreadable =
        |why: String| Error::Batch(format!("Cannot read the host's Arrow batch: {why}."));
    let stream = Buffer::from_vec(bytes);
    let mut messages = IpcMessages {
        stream: &stream,
        offset: 0,
    };
    let mut dictionaries = HashMap::new();
    let mut schema: Option<SchemaRef> = None;
    let mut batch = None;
    while let Some((message, body)) = messages.next().map_err(unreadable)? {
        match message.header_type() {
            MessageHeader::Schema => {
                let fb = message
                    .header_as_schema()
                    .ok_or_else(|| unreadable("a schema message without its schema".into()))?;
                schema = Some(Arc::new(arrow_ipc::convert::fb_to_schema(fb)));
            }
            MessageHeader::RecordBatch => {
                if batch.is_some() {
                    return Err(Error::Batch(
                        "The host sent more than one Arrow record batch; the contract promises one."
                            .into(),
                    ));
                }
                let schema = schema
                    .clone()
                    .ok_or_else(|| unreadable("a record batch before the schema".into()))?;
                let header = message
                    .header_as_record_batch()
                    .ok_or_else(|| unreadable("a record batch message without its batch".into()))?;
                let version = message.version();
                let mut trusted = UnsafeFlag::new();
                // SAFETY: the bytes are the host's `arrow-ipc` output for a batch it holds
                // (contract 1.0.0), so they are valid Arrow; a module trusts its host.
                // Validating every string again would cost a module more than decoding.
                unsafe { trusted.set(true) };
                let decoded =
                    RecordBatchDecoder::try_new(&body, header, schema, &dictionaries, &version)
                        .and_then(|decoder| {
                            decoder.with_skip_validation(trusted).read_record_batch()
                        })
                        .map_err(|e| unreadable(e.to_string()))?;
                batch = Some(decoded);
            }
            MessageHeader::DictionaryBatch => {
                let schema = schema
                    .as_deref()
                    .ok_or_else(|| unreadable("a dictionary before the schema".into()))?;
                let header = message.header_as_dictionary_batch().ok_or_else(|| {
                    unreadable("a dictionary message without its dictionary".into())
                })?;
                arrow_ipc::reader::read_dictionary(
                    &body,
                    header,
                    schema,
                    &mut dictionaries,
                    &message.version(),
                )
                .map_err(|e| unreadable(e.to_string()))?;
            }
            other => return Err(unreadable(format!("an unexpected {other:?} message"))),
        }
    }
    match (batch, schema) {
        (Some(batch), _) => Ok(batch),
        (None, Some(schema)) => Ok(RecordBatch::new_empty(schema)),
        (None, None) => Err(unreadable("the stream has no schema".into())),
    }
}

/// The messages of an Arrow IPC stream held in one buffer, each with its body as a
/// slice of that buffer.
struct IpcMessages<'a> {
    stream: &'a Buffer,
    offset: usize,
}

/// Marks a message length that follows (the IPC format since Arrow 0.15).
const CONTINUATION: u32 = 0xFFFF_FFFF;

impl<'a> IpcMessages<'a> {
    /// The next message and its body; `None` at the end-of-stream marker or the end.
    fn next(&mut self) -> Result<Option<(Message<'a>, Buffer)>, String> {
        let bytes: &'a [u8] = self.stream.as_slice();
        let start = self.offset;
        let truncated = move || format!("the stream ends inside the message at byte {start}");
        let word = |at: usize| {
            bytes
                .get(at..at + 4)
                .map(|w| u32::from_le_bytes(w.try_into().expect("four bytes")))
        };
        let Some(mut length) = word(self.offset) else {
            return Ok(None);
        };
        self.offset += 4;
        if length == CONTINUATION {
            length = word(self.offset).ok_or_else(truncated)?;
            self.offset += 4;
        }
        if length == 0 {
            return Ok(None);
        }
        let metadata = (self.offset.checked_add(length as usize))
            .and_then(|end| bytes.get(self.offset..end))
            .ok_or_else(truncated)?;
        let message = arrow_ipc::root_as_message(metadata)
            .map_err(|e| format!("a message that does not parse: {e}"))?;
        self.offset += length as usize;
        let body_length = usize::try_from(message.bodyLength())
            .ok()
            .filter(|&n| {
                self.offset
                    .checked_add(n)
                    .is_some_and(|end| end <= bytes.len())
            })
            .ok_or_else(truncated)?;
        let body = self.stream.slice_with_length(self.offset, body_length);
        self.offset += body_length;
        Ok(Some((message, body)))
    }
}

/// Assembles the contract's typed columns into Arrow, change columns last.
pub(crate) fn from_typed(
    columns: Vec<wit::Column>,
    change_types: &[ChangeType],
    versions: Vec<i64>,
    timestamps: Vec<i64>,
) -> Result<RecordBatch, Error> {
    let (fields, arrays) = typed_arrays(columns)?;
    let change_types = change_types.iter().map(|change| change.as_str()).collect();
    with_change_columns(fields, arrays, change_types, versions, timestamps)
}

/// The contract's typed columns as one Arrow batch, without change columns.
pub(crate) fn from_typed_columns(columns: Vec<wit::Column>) -> Result<RecordBatch, Error> {
    let rows = columns.first().map_or(0, |c| column_len(&c.values));
    let (fields, arrays) = typed_arrays(columns)?;
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        arrays,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| Error::Batch(format!("Cannot build the looked-up rows: {e}.")))
}

fn column_len(values: &wit::ColumnValues) -> usize {
    match values {
        wit::ColumnValues::Boolean(v) => v.len(),
        wit::ColumnValues::Int32(v) | wit::ColumnValues::Date(v) => v.len(),
        wit::ColumnValues::Int64(v)
        | wit::ColumnValues::Timestamp(v)
        | wit::ColumnValues::TimestampNtz(v) => v.len(),
        wit::ColumnValues::Float32(v) => v.len(),
        wit::ColumnValues::Float64(v) => v.len(),
        wit::ColumnValues::Utf8(v) | wit::ColumnValues::Text(v) | wit::ColumnValues::Decimal(v) => {
            v.len()
        }
        wit::ColumnValues::Binary(v) => v.len(),
    }
}

/// Each typed column as an Arrow field and array.
fn typed_arrays(columns: Vec<wit::Column>) -> Result<(Vec<Field>, Vec<ArrayRef>), Error> {
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    for column in columns {
        let array: ArrayRef = match column.values {
            wit::ColumnValues::Boolean(v) => Arc::new(BooleanArray::from(v)),
            wit::ColumnValues::Int32(v) => Arc::new(Int32Array::from(v)),
            wit::ColumnValues::Int64(v) => Arc::new(Int64Array::from(v)),
            wit::ColumnValues::Float32(v) => Arc::new(Float32Array::from(v)),
            wit::ColumnValues::Float64(v) => Arc::new(Float64Array::from(v)),
            wit::ColumnValues::Utf8(v) | wit::ColumnValues::Text(v) => {
                Arc::new(StringArray::from(v))
            }
            wit::ColumnValues::Binary(v) => Arc::new(BinaryArray::from_iter(v)),
            wit::ColumnValues::Date(v) => Arc::new(Date32Array::from(v)),
            wit::ColumnValues::Timestamp(v) => {
                Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
            }
            wit::ColumnValues::TimestampNtz(v) => Arc::new(TimestampMicrosecondArray::from(v)),
            wit::ColumnValues::Decimal(v) => decimal_array(&column.name, v)?,
        };
        fields.push(Field::new(&column.name, array.data_type().clone(), true));
        arrays.push(array);
    }
    Ok((fields, arrays))
}

/// Data columns with the change columns after them, as one batch: the layout of the
/// typed columns and of [`BatchBuilder`](crate::BatchBuilder) alike.
pub(crate) fn with_change_columns(
    mut fields: Vec<Field>,
    mut columns: Vec<ArrayRef>,
    change_types: Vec<&str>,
    versions: Vec<i64>,
    timestamps: Vec<i64>,
) -> Result<RecordBatch, Error> {
    fields.extend([
        Field::new(CHANGE_TYPE, DataType::Utf8, false),
        Field::new(COMMIT_VERSION, DataType::Int64, false),
        Field::new(
            COMMIT_TIMESTAMP,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]);
    columns.extend([
        Arc::new(StringArray::from(change_types)) as ArrayRef,
        Arc::new(Int64Array::from(versions)),
        Arc::new(TimestampMicrosecondArray::from(timestamps).with_timezone("UTC")),
    ]);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| Error::Batch(format!("Cannot build the batch: {e}.")))
}

/// Decimal text (`12.50`) back into a decimal column with the scale it was written in.
fn decimal_array(name: &str, values: Vec<Option<String>>) -> Result<ArrayRef, Error> {
    let scale = values
        .iter()
        .flatten()
        .next()
        .and_then(|v| v.split_once('.'))
        .map_or(0, |(_, fraction)| fraction.len());
    let parsed = values
        .iter()
        .map(|v| {
            v.as_deref()
                .map(|text| {
                    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
                    format!("{whole}{fraction:0<scale$}").parse::<i128>()
                })
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Batch(format!("Column `{name}` has a bad decimal: {e}.")))?;
    let array = Decimal128Array::from(parsed)
        .with_precision_and_scale(38, scale as i8)
        .map_err(|e| Error::Batch(format!("Column `{name}`: {e}.")))?;
    Ok(Arc::new(array))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BatchBuilder;
    use arrow_ipc::writer::StreamWriter;

    fn ipc(batch: &RecordBatch, with_batch: bool) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut writer = StreamWriter::try_new(&mut bytes, &batch.schema()).unwrap();
        if with_batch {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        bytes
    }

    fn deals() -> RecordBatch {
        BatchBuilder::new()
            .strings("documentId", &[Some("d1"), None, Some("dé3")])
            .timestamps("eventTimestamp", &[Some(5), Some(-7), None])
            .change(ChangeType::Insert, 1, 10)
            .change(ChangeType::UpdatePostimage, 2, 20)
            .change(ChangeType::Delete, 3, 30)
            .build()
            .arrow()
            .unwrap()
            .clone()
    }

    #[test]
    fn the_hosts_stream_decodes_to_the_same_batch() {
        let batch = deals();
        assert_eq!(from_ipc(ipc(&batch, true)).unwrap(), batch);
        let empty = from_ipc(ipc(&batch, false)).unwrap();
        assert_eq!((empty.num_rows(), empty.schema()), (0, batch.schema()));
    }

    #[test]
    fn dictionary_columns_decode_too() {
        let stages: arrow_array::DictionaryArray<arrow_array::types::Int32Type> =
            ["new", "won", "new"].into_iter().collect();
        let batch = RecordBatch::try_from_iter([("stage", Arc::new(stages) as ArrayRef)]).unwrap();
        assert_eq!(from_ipc(ipc(&batch, true)).unwrap(), batch);
    }

    #[test]
    fn a_cut_or_doubled_stream_is_refused_with_why() {
        let bytes = ipc(&deals(), true);
        let cut = from_ipc(bytes[..bytes.len() / 2].to_vec()).unwrap_err();
        assert!(cut.to_string().contains("ends inside"), "{cut}");
        let body = &bytes[..bytes.len() - 8];
        let schema_end = body.len() - (bytes.len() - ipc(&deals(), false).len());
        let mut doubled = body.to_vec();
        doubled.extend_from_slice(&body[schema_end..]);
        let err = from_ipc(doubled).unwrap_err();
        assert!(err.to_string().contains("more than one"), "{err}");
        assert!(
            from_ipc(Vec::new())
                .unwrap_err()
                .to_string()
                .contains("no schema")
        );
    }
}
