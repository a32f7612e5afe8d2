//! How a row's fields become the bytes of a value in each format, without framing.

use std::cell::RefCell;

use sluice_model::{Column, JsonKey, JsonObject, write_json_string, write_json_value};

use crate::avro;
use crate::protobuf::MessageWriter;

/// Writes the fields of one row as a value.
pub(crate) enum RowWriter<'a> {
    /// A JSON object, nulls left out (plain) or written (`with_nulls`, Debezium's).
    Json {
        /// Each field's prepared key, name and values.
        fields: Vec<(JsonKey, &'a str, Column<'a>)>,
        /// Whether top-level null fields are written as `null`.
        with_nulls: bool,
        /// The text of the last row, its allocation reused for the next.
        buffer: RefCell<String>,
    },
    /// An Avro record.
    Avro(avro::Writer),
    /// A Protobuf message.
    Protobuf(MessageWriter<'a>),
}

impl RowWriter<'_> {
    /// Appends the value of `row` to `out`.
    pub(crate) fn write(&self, row: usize, out: &mut Vec<u8>) {
        match self {
            RowWriter::Json {
                fields,
                with_nulls,
                buffer,
            } => {
                let mut buffer = buffer.borrow_mut();
                let text = match with_nulls {
                    true => with_null_fields(fields, row, std::mem::take(&mut *buffer)),
                    false => {
                        let mut object = JsonObject::in_buffer(std::mem::take(&mut *buffer));
                        for (key, _, column) in fields {
                            object.push_keyed(key, &column.value(row));
                        }
                        object.finish()
                    }
                };
                out.extend_from_slice(text.as_bytes());
                *buffer = text;
            }
            RowWriter::Avro(writer) => writer.write_row(row, out),
            RowWriter::Protobuf(writer) => writer.write_row(row, out),
        }
    }
}

/// Debezium's JSON carries every field in the row's order, null ones as `null`
/// (Kafka Connect's `JsonConverter` writes a struct's fields in schema order).
fn with_null_fields(
    fields: &[(JsonKey, &str, Column<'_>)],
    row: usize,
    mut text: String,
) -> String {
    text.clear();
    text.push('{');
    for (i, (_, name, column)) in fields.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        write_json_string(&mut text, name);
        text.push(':');
        write_json_value(&mut text, &column.value(row));
    }
    text.push('}');
    text
}
