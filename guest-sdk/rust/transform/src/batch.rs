//! A batch of change rows: decoded lazily, so a transform that only uses the host
//! helpers never pays for decoding.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_buffer::Buffer;
use arrow_data::UnsafeFlag;
use arrow_ipc::reader::RecordBatchDecoder;
use arrow_ipc::{Message, MessageHeader};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use sluice_model::helpers::{CHANGE_COLUMNS, CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
use sluice_model::{ChangeType, Column, JsonObject, LeafColumn, Value, leaf_columns};

use crate::Predicate;
use crate::guest::Handle;
use crate::guest::sys::sluice::transform::types as wit;
use crate::output::Error;
use crate::output::helpers_error;

/// A batch of change rows from one Delta table, in commit order.
pub struct Batch {
    source: Source,
    len: usize,
    decoded: OnceCell<Decoded>,
}

enum Source {
    Native(RecordBatch),
    Guest(Handle),
}

/// The batch as Arrow with its columns indexed by name.
struct Decoded {
    arrow: RecordBatch,
    leaves: HashMap<String, LeafColumn>,
    change_types: Vec<ChangeType>,
    // Read on first use: most transforms never look at them.
    versions: OnceCell<Vec<i64>>,
    timestamps: OnceCell<Vec<i64>>,
}

impl Decoded {
    /// `change_types` of every row, when the caller has them already (a module asks
    /// the host, which knows them natively); otherwise parsed from `_change_type`.
    fn new(arrow: RecordBatch, change_types: Option<Vec<ChangeType>>) -> Result<Decoded, Error> {
        let change_types = match change_types {
            Some(change_types) => change_types,
            None => sluice_model::helpers::change_types(&arrow).map_err(helpers_error)?,
        };
        let leaves = leaf_columns(&arrow, &CHANGE_COLUMNS)
            .into_iter()
            .map(|leaf| (leaf.name.clone(), leaf))
            .collect();
        Ok(Decoded {
            arrow,
            leaves,
            change_types,
            versions: OnceCell::new(),
            timestamps: OnceCell::new(),
        })
    }

    /// `_commit_version` of every row.
    fn commit_versions(&self) -> &[i64] {
        self.integers(&self.versions, COMMIT_VERSION)
    }

    /// `_commit_timestamp` of every row, in microseconds.
    fn commit_timestamps(&self) -> &[i64] {
        self.integers(&self.timestamps, COMMIT_TIMESTAMP)
    }

    /// The integers of a change column, 0 where it is null or missing.
    fn integers<'a>(&self, cell: &'a OnceCell<Vec<i64>>, name: &str) -> &'a [i64] {
        cell.get_or_init(|| {
            let Ok(column) = Column::find(&self.arrow, name) else {
                return vec![0; self.arrow.num_rows()];
            };
            (0..self.arrow.num_rows())
                .map(|row| match column.value(row) {
                    Value::Int(v) | Value::Timestamp(v) | Value::TimestampNtz(v) => v,
                    _ => 0,
                })
                .collect()
        })
    }
}

impl Batch {
    /// A batch of Arrow change rows: data columns plus `_change_type`,
    /// `_commit_version` and `_commit_timestamp`.
    pub fn from_arrow(arrow: RecordBatch) -> Batch {
        Batch {
            len: arrow.num_rows(),
            source: Source::Native(arrow),
            decoded: OnceCell::new(),
        }
    }

    pub(crate) fn from_guest(handle: Handle) -> Batch {
        Batch {
            len: handle.num_rows(),
            source: Source::Guest(handle),
            decoded: OnceCell::new(),
        }
    }

    pub(crate) fn guest(&self) -> Option<&Handle> {
        match &self.source {
            Source::Guest(handle) => Some(handle),
            Source::Native(_) => None,
        }
    }

    fn decoded(&self) -> Result<&Decoded, Error> {
        if let Some(decoded) = self.decoded.get() {
            return Ok(decoded);
        }
        let decoded = match &self.source {
            Source::Native(arrow) => Decoded::new(arrow.clone(), None)?,
            Source::Guest(handle) => Decoded::new(handle.read()?, Some(handle.change_types()))?,
        };
        Ok(self.decoded.get_or_init(|| decoded))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch as Arrow, change columns included.
    pub fn arrow(&self) -> Result<&RecordBatch, Error> {
        Ok(&self.decoded()?.arrow)
    }

    /// A data column by name, struct fields by dotted path (`fullDocument.owner_id`),
    /// ready to read row by row: the fast way to touch many rows.
    pub fn column(&self, name: &str) -> Result<Column<'_>, Error> {
        let decoded = self.decoded()?;
        match decoded.leaves.get(name) {
            Some(leaf) => Ok(leaf.reader()),
            None => Column::find(&decoded.arrow, name).map_err(|e| Error::Batch(e.to_string())),
        }
    }

    /// One row by index.
    pub fn row(&self, index: usize) -> Result<Row<'_>, Error> {
        if index >= self.len {
            return Err(Error::Batch(format!(
                "Row {index} is out of range: the batch has {} rows.",
                self.len
            )));
        }
        Ok(Row {
            decoded: self.decoded()?,
            index,
        })
    }

    /// Every row, in order.
    pub fn rows(&self) -> Result<impl Iterator<Item = Row<'_>>, Error> {
        let decoded = self.decoded()?;
        Ok((0..self.len).map(move |index| Row { decoded, index }))
    }

    /// The rows (of `within`, or all) whose change type is one of `types`, in order.
    /// In a module the host selects them without decoding the batch.
    pub fn select_change_types(
        &self,
        types: &[ChangeType],
        within: Option<&[u32]>,
    ) -> Result<Vec<u32>, Error> {
        match &self.source {
            Source::Guest(handle) => Ok(handle.select_change_types(types, within)),
            Source::Native(arrow) => {
                sluice_model::helpers::select_change_types(arrow, types, within)
                    .map_err(helpers_error)
            }
        }
    }

    /// The rows (of `within`, or all) where `predicate` holds, in order; null never
    /// matches a comparison. In a module the host selects them.
    pub fn select_where(
        &self,
        predicate: &Predicate,
        within: Option<&[u32]>,
    ) -> Result<Vec<u32>, Error> {
        match &self.source {
            Source::Guest(handle) => handle.select_where(predicate, within),
            Source::Native(arrow) => {
                sluice_model::helpers::select_where(arrow, predicate, within).map_err(helpers_error)
            }
        }
    }

    pub(crate) fn native(&self) -> Option<&RecordBatch> {
        match &self.source {
            Source::Native(arrow) => Some(arrow),
            Source::Guest(_) => None,
        }
    }
}

/// One row of a [`Batch`].
#[derive(Clone, Copy)]
pub struct Row<'a> {
    decoded: &'a Decoded,
    index: usize,
}

impl<'a> Row<'a> {
    /// Index of the row within its batch.
    pub fn index(&self) -> u32 {
        self.index as u32
    }

    /// What happened to the row.
    pub fn change_type(&self) -> ChangeType {
        self.decoded.change_types[self.index]
    }

    /// The Delta version that made the change.
    pub fn commit_version(&self) -> i64 {
        self.decoded.commit_versions()[self.index]
    }

    /// When the change was committed: microseconds since 1970-01-01T00:00:00Z.
    pub fn commit_timestamp_micros(&self) -> i64 {
        self.decoded.commit_timestamps()[self.index]
    }

    /// The value of a column; an error names the row if the column does not exist.
    pub fn get(&self, column: &str) -> Result<Value<'a>, Error> {
        let reader = match self.decoded.leaves.get(column) {
            Some(leaf) => leaf.reader(),
            None => Column::find(&self.decoded.arrow, column)
                .map_err(|e| Error::row(self.index(), e.to_string()))?,
        };
        Ok(reader.value(self.index))
    }

    /// A string column's value; an error if the column is missing or not a string.
    pub fn str(&self, column: &str) -> Result<Option<&'a str>, Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Str(s) => Ok(Some(s)),
            other => Err(self.type_error(column, "string", &other)),
        }
    }

    /// An integer column's value; an error if the column is missing or not an integer.
    pub fn int(&self, column: &str) -> Result<Option<i64>, Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Int(i) => Ok(Some(i)),
            other => Err(self.type_error(column, "integer", &other)),
        }
    }

    /// Every data column (structs nested) and the change columns as one JSON object,
    /// nulls left out: the shape of Spark's `to_json(struct(*))` over a change row.
    pub fn to_json(&self) -> String {
        let arrow = &self.decoded.arrow;
        let mut json = JsonObject::new();
        for (field, array) in arrow.schema_ref().fields().iter().zip(arrow.columns()) {
            if !CHANGE_COLUMNS.contains(&field.name().as_str()) {
                json.push(field.name(), &Column::new(array.as_ref()).value(self.index));
            }
        }
        json.field(CHANGE_TYPE, Value::Str(self.change_type().as_str()))
            .field(COMMIT_VERSION, Value::Int(self.commit_version()))
            .field(
                COMMIT_TIMESTAMP,
                Value::Timestamp(self.commit_timestamp_micros()),
            )
            .finish()
    }

    fn type_error(&self, column: &str, wanted: &str, found: &Value<'_>) -> Error {
        Error::row(
            self.index(),
            format!("Column `{column}` is not a {wanted}: found {found:?}."),
        )
    }
}

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
    change_types: Vec<wit::ChangeType>,
    versions: Vec<i64>,
    timestamps: Vec<i64>,
) -> Result<RecordBatch, Error> {
    let mut builder = BatchBuilder::new();
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
        builder = builder.column(&column.name, array);
    }
    for ((change, version), timestamp) in change_types.into_iter().zip(versions).zip(timestamps) {
        builder = builder.change(crate::guest::from_wit_change(change), version, timestamp);
    }
    builder.try_build()
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

/// Builds a [`Batch`] by hand, for unit tests of transforms on the native target.
#[derive(Default)]
pub struct BatchBuilder {
    fields: Vec<Field>,
    columns: Vec<ArrayRef>,
    change_types: Vec<&'static str>,
    versions: Vec<i64>,
    timestamps: Vec<i64>,
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// Adds a data column; a dotted name stands for a struct field.
    pub fn column(mut self, name: &str, array: ArrayRef) -> BatchBuilder {
        self.fields
            .push(Field::new(name, array.data_type().clone(), true));
        self.columns.push(array);
        self
    }

    /// Adds a string column.
    pub fn strings(self, name: &str, values: &[Option<&str>]) -> BatchBuilder {
        self.column(name, Arc::new(StringArray::from(values.to_vec())))
    }

    /// Adds a long column.
    pub fn longs(self, name: &str, values: &[Option<i64>]) -> BatchBuilder {
        self.column(name, Arc::new(Int64Array::from(values.to_vec())))
    }

    /// Adds a timestamp column (microseconds since 1970-01-01T00:00:00Z).
    pub fn timestamps(self, name: &str, micros: &[Option<i64>]) -> BatchBuilder {
        let array = TimestampMicrosecondArray::from(micros.to_vec()).with_timezone("UTC");
        self.column(name, Arc::new(array))
    }

    /// Adds the change columns of one row.
    pub fn change(
        mut self,
        change: ChangeType,
        version: i64,
        timestamp_micros: i64,
    ) -> BatchBuilder {
        self.change_types.push(change.as_str());
        self.versions.push(version);
        self.timestamps.push(timestamp_micros);
        self
    }

    /// The batch; one row per [`BatchBuilder::change`] call. Panics if a column's
    /// length differs from the number of rows.
    pub fn build(self) -> Batch {
        match self.try_build() {
            Ok(arrow) => Batch::from_arrow(arrow),
            Err(e) => panic!("{e}"),
        }
    }

    fn try_build(mut self) -> Result<RecordBatch, Error> {
        self.fields.extend([
            Field::new(CHANGE_TYPE, DataType::Utf8, false),
            Field::new(COMMIT_VERSION, DataType::Int64, false),
            Field::new(
                COMMIT_TIMESTAMP,
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
        ]);
        self.columns.extend([
            Arc::new(StringArray::from(self.change_types)) as ArrayRef,
            Arc::new(Int64Array::from(self.versions)),
            Arc::new(TimestampMicrosecondArray::from(self.timestamps).with_timezone("UTC")),
        ]);
        RecordBatch::try_new(Arc::new(Schema::new(self.fields)), self.columns)
            .map_err(|e| Error::Batch(format!("Cannot build the batch: {e}.")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn change_columns_are_read_on_first_use() {
        let batch = Batch::from_arrow(deals());
        let rows: Vec<_> = batch.rows().unwrap().collect();
        let decoded = batch.decoded().unwrap();
        assert!(decoded.versions.get().is_none() && decoded.timestamps.get().is_none());
        assert_eq!(rows[1].change_type(), ChangeType::UpdatePostimage);
        assert_eq!(
            (rows[2].commit_version(), rows[2].commit_timestamp_micros()),
            (3, 30)
        );
    }
}
