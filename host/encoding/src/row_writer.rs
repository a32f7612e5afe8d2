//! How a row's fields become the bytes of a value in each format, without framing.

use std::cell::RefCell;

use sluice_model::{Column, JsonKey, JsonObject, write_json_string};

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
                let mut object = JsonObject::in_buffer(std::mem::take(&mut *buffer));
                for (key, _, column) in fields {
                    object.push_keyed(key, &column.value(row));
                }
                let mut text = object.finish();
                if *with_nulls {
                    text = with_null_fields(fields, row, text);
                }
                out.extend_from_slice(text.as_bytes());
                *buffer = text;
            }
            RowWriter::Avro(writer) => writer.write_row(row, out),
            RowWriter::Protobuf(writer) => writer.write_row(row, out),
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
