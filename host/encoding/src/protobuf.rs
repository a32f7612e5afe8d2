//! Protobuf: values written in the wire format of a message the user supplies (a
//! `.proto` file), each spec field into the message field of the same name.
//!
//! Arrow values go into the field's kind: integers into any integer kind, floats and
//! integers into `double`/`float`, booleans into `bool`, binary and strings into
//! `bytes`, strings into enums by value name, structs into messages field by field,
//! timestamps into `google.protobuf.Timestamp`, lists into repeated fields (packed
//! where proto3 packs them), maps into map fields; a `string` field takes any value as
//! Spark casts it to text. A null leaves the field unset.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use prost_reflect::{FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};
use sluice_model::helpers::HelperError;
use sluice_model::{Column, Value};

use crate::fields::{self, SourceField};
use crate::framing::{SchemaKind, SchemaReference, WriterSchema};
use crate::wire::write_long;

/// A message of a supplied `.proto` file that values are written as.
#[derive(Clone, Debug)]
pub struct ProtobufSchema {
    /// The `.proto` file's text, as the registry stores it.
    pub text: String,
    /// The message.
    pub message: MessageDescriptor,
    /// The files it imports (but Protobuf's well-known types), as the registry's schema
    /// references: each registered under its import path first.
    pub imports: Vec<SchemaReference>,
}

impl PartialEq for ProtobufSchema {
    fn eq(&self, other: &ProtobufSchema) -> bool {
        self.text == other.text
            && self.message.full_name() == other.message.full_name()
            && self.imports == other.imports
    }
}

impl Eq for ProtobufSchema {}

impl ProtobufSchema {
    /// Compiles the `.proto` file at `path` and picks `message` (its full name), or the
    /// file's first message. Files it imports are found from its directory and become
    /// schema references (Protobuf's well-known types are the registry's own).
    pub fn compile(path: &Path, message: Option<&str>) -> Result<ProtobufSchema, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("the .proto file {shown} cannot be read: {e}"))?;
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(format!("{shown} is not a .proto file"));
        };
        let mut compiler = protox::Compiler::new([dir])
            .map_err(|e| format!("the .proto file {shown} cannot be compiled: {e}"))?;
        compiler
            .open_file(name)
            .map_err(|e| format!("the .proto file {shown} does not compile: {e}"))?;
        let pool = compiler.descriptor_pool();
        let file = pool
            .files()
            .find(|f| Path::new(f.name()) == Path::new(name))
            .ok_or_else(|| format!("the .proto file {shown} compiled to nothing"))?;
        let message = pick_message(&file, message, &format!("the .proto file {shown}"))?;
        let imports = imports_of(&file, dir)?;
        Ok(ProtobufSchema {
            text,
            message,
            imports,
        })
    }

    /// Compiles `.proto` text a module supplies and picks `message` (its full name), or
    /// the file's first message. Imports other than Protobuf's well-known types are
    /// refused.
    pub fn from_text(text: &str, message: Option<&str>) -> Result<ProtobufSchema, String> {
        const NAME: &str = "module.proto";
        // The parser recurses once per nesting level: bound it before parsing.
        let depth = nesting_depth(text);
        if depth > MAX_NESTING {
            return Err(format!(
                "the .proto text nests {depth} levels deep; at most {MAX_NESTING} are read"
            ));
        }
        let mut resolver = protox::file::ChainFileResolver::new();
        resolver.add(OneFile {
            file: protox::file::File::from_source(NAME, text)
                .map_err(|e| format!("the .proto text does not parse: {e}"))?,
        });
        resolver.add(protox::file::GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler
            .open_file(NAME)
            .map_err(|e| format!("the .proto text does not compile: {e}"))?;
        let pool = compiler.descriptor_pool();
        let file = pool
            .get_file_by_name(NAME)
            .ok_or_else(|| "the .proto text compiled to nothing".to_string())?;
        if let Some(import) = user_imports(&file).next() {
            return Err(format!(
                "the .proto text imports {}; a module's schema is one file, so put the messages it needs in it",
                import.name()
            ));
        }
        let message = pick_message(&file, message, "the .proto text")?;
        Ok(ProtobufSchema {
            text: text.to_string(),
            message,
            imports: Vec::new(),
        })
    }

    /// Confluent's message indexes of the message: its path from the file's top-level
    /// messages, written as zig-zag varints after the schema id. `[0]`, the first
    /// message, is written as the single byte 0.
    pub fn message_indexes(&self) -> Vec<u8> {
        let mut path = Vec::new();
        let mut message = self.message.clone();
        loop {
            match message.parent_message() {
                Some(parent) => {
                    let index = parent
                        .child_messages()
                        .position(|m| m == message)
                        .unwrap_or(0);
                    path.push(index as i64);
                    message = parent;
                }
                None => {
                    let index = message
                        .parent_file()
                        .messages()
                        .position(|m| m == message)
                        .unwrap_or(0);
                    path.push(index as i64);
                    break;
                }
            }
        }
        path.reverse();
        let mut out = Vec::new();
        if path == [0] {
            out.push(0);
            return out;
        }
        write_long(&mut out, path.len() as i64);
        for index in path {
            write_long(&mut out, index);
        }
        out
    }
}

/// How deep braces may nest in `.proto` text a module supplies.
const MAX_NESTING: usize = 64;

/// The deepest nesting of braces (and the angle brackets of maps and option literals)
/// in `.proto` text, strings and comments left out.
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' | '<' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' | '>' => depth = depth.saturating_sub(1),
            '"' | '\'' => {
                let mut escaped = false;
                for inner in chars.by_ref() {
                    match (escaped, inner) {
                        (false, '\\') => escaped = true,
                        (false, quote) if quote == c => break,
                        _ => escaped = false,
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for inner in chars.by_ref() {
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut star = false;
                for inner in chars.by_ref() {
                    if star && inner == '/' {
                        break;
                    }
                    star = inner == '*';
                }
            }
            _ => {}
        }
    }
    deepest
}

/// `message` (a full name) of `file`, or its first message; `shown` names the file in
/// errors. A file importing anything but Protobuf's well-known types is refused: the
/// registry would need the import as a reference.
fn pick_message(
    file: &FileDescriptor,
    message: Option<&str>,
    shown: &str,
) -> Result<MessageDescriptor, String> {
    match message {
        Some(wanted) => file
            .messages()
            .chain(
                file.messages()
                    .flat_map(|m| m.child_messages().collect::<Vec<_>>()),
            )
            .find(|m| m.full_name() == wanted)
            .ok_or_else(|| {
                let names: Vec<String> =
                    file.messages().map(|m| m.full_name().to_string()).collect();
                format!(
                    "{shown} has no message {wanted}; it has {}",
                    names.join(", ")
                )
            }),
        None => file
            .messages()
            .next()
            .ok_or_else(|| format!("{shown} has no message")),
    }
}

/// The files `file` imports, but Protobuf's well-known types (the registry has them).
fn user_imports(file: &FileDescriptor) -> impl Iterator<Item = FileDescriptor> {
    file.dependencies()
        .filter(|d| !d.name().starts_with("google/protobuf/"))
}

/// `file`'s imports as schema references, each with its own imports, read from `dir`
/// (where the compiler found them).
fn imports_of(file: &FileDescriptor, dir: &Path) -> Result<Vec<SchemaReference>, String> {
    user_imports(file)
        .map(|import| {
            let path = dir.join(import.name());
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "the imported .proto file {} cannot be read: {e}",
                    path.display()
                )
            })?;
            let name = import
                .messages()
                .next()
                .map(|m| m.full_name().to_string())
                .unwrap_or_else(|| import.package_name().to_string());
            Ok(SchemaReference {
                name: import.name().to_string(),
                schema: Arc::new(WriterSchema {
                    kind: SchemaKind::Protobuf,
                    text,
                    name,
                    references: imports_of(&import, dir)?,
                }),
            })
        })
        .collect()
}

/// Resolves the one in-memory file a module supplies.
struct OneFile {
    file: protox::file::File,
}

impl protox::file::FileResolver for OneFile {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name == self.file.name() {
            Ok(self.file.clone())
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// Writes rows of fields as a message; borrows the batch's arrays for one encode call,
/// so each column is read through a reader made once, not once per value.
pub(crate) struct MessageWriter<'a> {
    fields: Vec<FieldWriter<'a>>,
}

struct FieldWriter<'a> {
    number: u32,
    array: &'a ArrayRef,
    column: Column<'a>,
    node: Node<'a>,
}

enum Node<'a> {
    /// A scalar of `kind` (not a message).
    Scalar(Kind),
    /// A message from a struct, field by field.
    Message(MessageWriter<'a>),
    /// `google.protobuf.Timestamp` from a timestamp.
    Timestamp,
    /// A repeated field from a list: items written as `item`.
    Repeated(Box<FieldWriter<'a>>),
    /// A map field: entries of key (field 1) and value (field 2).
    Map(Box<FieldWriter<'a>>, Box<FieldWriter<'a>>),
}

impl<'a> MessageWriter<'a> {
    /// A writer of `fields` into `message`; fails naming a field the message lacks or a
    /// value its field cannot hold.
    pub(crate) fn new(
        message: &MessageDescriptor,
        fields: &'a [SourceField],
    ) -> Result<MessageWriter<'a>, HelperError> {
        MessageWriter::of(message, fields.iter().map(|f| (f.name.as_str(), &f.array)))
    }

    fn of(
        message: &MessageDescriptor,
        fields: impl Iterator<Item = (&'a str, &'a ArrayRef)>,
    ) -> Result<MessageWriter<'a>, HelperError> {
        let mut writers = Vec::new();
        for (name, array) in fields {
            let descriptor = message.get_field_by_name(name).ok_or_else(|| {
                HelperError(format!(
                    "Message {} has no field `{name}`; add it to the .proto or leave it out of the record.",
                    message.full_name(),
                ))
            })?;
            writers.push(field_writer(&descriptor, array, name)?);
        }
        Ok(MessageWriter { fields: writers })
    }

    /// The first of `rows` with a string that names no value of its enum field, as an
    /// error naming the field, the string and the row.
    pub(crate) fn check_enum_names(
        &self,
        rows: &mut dyn Iterator<Item = usize>,
    ) -> Result<(), HelperError> {
        let rows: Vec<usize> = rows.collect();
        for field in &self.fields {
            field.check_enum_names(&mut rows.iter().copied())?;
        }
        Ok(())
    }

    /// Writes the message of `row` (its fields, without a length).
    pub(crate) fn write_row(&self, row: usize, out: &mut Vec<u8>) {
        for field in &self.fields {
            field.write(row, out);
        }
    }
}

fn field_writer<'a>(
    descriptor: &FieldDescriptor,
    array: &'a ArrayRef,
    name: &str,
) -> Result<FieldWriter<'a>, HelperError> {
    let number = descriptor.number();
    let node = if descriptor.is_map() {
        let DataType::Map(..) = array.data_type() else {
            return Err(mismatch(name, descriptor, array));
        };
        let Kind::Message(entry) = descriptor.kind() else {
            return Err(mismatch(name, descriptor, array));
        };
        let map = array.as_map();
        let key = field_writer(&entry.map_entry_key_field(), map.keys(), name)?;
        let value = field_writer(&entry.map_entry_value_field(), map.values(), name)?;
        Node::Map(Box::new(key), Box::new(value))
    } else if descriptor.is_list() {
        let items = match array.data_type() {
            DataType::List(_) => array.as_list::<i32>().values(),
            DataType::LargeList(_) => array.as_list::<i64>().values(),
            _ => return Err(mismatch(name, descriptor, array)),
        };
        Node::Repeated(Box::new(single(descriptor, items, name)?))
    } else {
        return single(descriptor, array, name);
    };
    Ok(FieldWriter {
        number,
        array,
        column: Column::new(array.as_ref()),
        node,
    })
}

/// The writer of one (not repeated) value of `descriptor`'s kind from `array`.
fn single<'a>(
    descriptor: &FieldDescriptor,
    array: &'a ArrayRef,
    name: &str,
) -> Result<FieldWriter<'a>, HelperError> {
    let kind = descriptor.kind();
    let data_type = array.data_type();
    let fits = match &kind {
        Kind::String => true,
        Kind::Bytes => matches!(
            data_type,
            DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
        ),
        Kind::Bool => *data_type == DataType::Boolean,
        // A wider integer could overflow the field, which readers would take mangled.
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => matches!(
            data_type,
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16
        ),
        // Unsigned kinds would take a negative value as a huge one.
        Kind::Uint32 | Kind::Fixed32 => matches!(
            data_type,
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32
        ),
        Kind::Uint64 | Kind::Fixed64 => data_type.is_unsigned_integer(),
        Kind::Double | Kind::Float => data_type.is_floating() || data_type.is_integer(),
        Kind::Enum(_) => matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ),
        Kind::Message(message) => {
            if message.full_name() == "google.protobuf.Timestamp" {
                matches!(data_type, DataType::Timestamp(..))
            } else {
                matches!(data_type, DataType::Struct(_))
            }
        }
        _ => data_type.is_integer(),
    };
    if !fits && *data_type != DataType::Null {
        return Err(mismatch(name, descriptor, array));
    }
    let node = match kind {
        // An all-null column writes nothing, whatever the field's kind.
        kind if *data_type == DataType::Null => Node::Scalar(kind),
        Kind::Message(message) if message.full_name() == "google.protobuf.Timestamp" => {
            Node::Timestamp
        }
        Kind::Message(message) => {
            let structs = array.as_struct();
            let children = structs
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .zip(structs.columns());
            Node::Message(MessageWriter::of(&message, children)?)
        }
        kind => Node::Scalar(kind),
    };
    Ok(FieldWriter {
        number: descriptor.number(),
        array,
        column: Column::new(array.as_ref()),
        node,
    })
}

fn mismatch(name: &str, descriptor: &FieldDescriptor, array: &ArrayRef) -> HelperError {
    HelperError(format!(
        "Field `{name}` holds Arrow type {}, which Protobuf field {} ({:?}{}) cannot take.",
        array.data_type(),
        descriptor.full_name(),
        descriptor.kind(),
        if descriptor.is_list() {
            ", repeated"
        } else {
            ""
        }
    ))
}

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LENGTH: u32 = 2;
const FIXED32: u32 = 5;

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn write_tag(out: &mut Vec<u8>, number: u32, wire: u32) {
    write_varint(out, u64::from(number << 3 | wire));
}

fn write_length_delimited(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    write_tag(out, number, LENGTH);
    write_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl FieldWriter<'_> {
    fn check_enum_names(&self, rows: &mut dyn Iterator<Item = usize>) -> Result<(), HelperError> {
        let mut present = rows.filter(|&row| !self.column.is_null(row));
        match &self.node {
            Node::Scalar(Kind::Enum(descriptor)) => {
                for row in present {
                    if let Value::Str(name) = self.column.value(row)
                        && descriptor.get_value_by_name(name).is_none()
                    {
                        let names: Vec<String> =
                            descriptor.values().map(|v| v.name().to_string()).collect();
                        return Err(HelperError(format!(
                            "Row {row} has `{name}` for enum {}, which has no such value (it has {}); map the value in the module or add it to the .proto.",
                            descriptor.full_name(),
                            names.join(", ")
                        )));
                    }
                }
                Ok(())
            }
            Node::Message(writer) => writer.check_enum_names(&mut present),
            Node::Repeated(item) => item
                .check_enum_names(&mut present.flat_map(|row| fields::list_range(self.array, row))),
            Node::Map(_, value) => {
                let offsets = self.array.as_map().value_offsets();
                value.check_enum_names(
                    &mut present.flat_map(|row| offsets[row] as usize..offsets[row + 1] as usize),
                )
            }
            Node::Scalar(_) | Node::Timestamp => Ok(()),
        }
    }

    /// Writes the field for `row`, nothing when the value is null.
    fn write(&self, row: usize, out: &mut Vec<u8>) {
        if self.column.is_null(row) {
            return;
        }
        match &self.node {
            Node::Scalar(kind) => write_scalar(out, self.number, kind, &self.column.value(row)),
            Node::Timestamp => {
                let micros = match self.column.value(row) {
                    Value::Timestamp(m) | Value::TimestampNtz(m) => m,
                    _ => 0,
                };
                let mut message = Vec::new();
                let (seconds, nanos) = (
                    micros.div_euclid(1_000_000),
                    micros.rem_euclid(1_000_000) * 1000,
                );
                if seconds != 0 {
                    write_tag(&mut message, 1, VARINT);
                    write_varint(&mut message, seconds as u64);
                }
                if nanos != 0 {
                    write_tag(&mut message, 2, VARINT);
                    write_varint(&mut message, nanos as u64);
                }
                write_length_delimited(out, self.number, &message);
            }
            Node::Message(writer) => {
                let mut message = Vec::new();
                writer.write_row(row, &mut message);
                write_length_delimited(out, self.number, &message);
            }
            Node::Repeated(item) => {
                let range = fields::list_range(self.array, row);
                match &item.node {
                    Node::Scalar(kind) if packable(kind) => {
                        let mut packed = Vec::new();
                        // A repeated field has no null items: a null one is left out.
                        for index in range.filter(|&index| !item.column.is_null(index)) {
                            write_scalar_payload(&mut packed, kind, &item.column.value(index));
                        }
                        write_length_delimited(out, self.number, &packed);
                    }
                    _ => {
                        for index in range {
                            let mut one = Vec::new();
                            item.write(index, &mut one);
                            // The item writer tags with the item's own number, which is
                            // this field's: repeated entries are the field repeated.
                            out.extend_from_slice(&one);
                        }
                    }
                }
            }
            Node::Map(key, value) => {
                let map = self.array.as_map();
                let offsets = map.value_offsets();
                for entry in offsets[row] as usize..offsets[row + 1] as usize {
                    let mut message = Vec::new();
                    key.write(entry, &mut message);
                    value.write(entry, &mut message);
                    write_length_delimited(out, self.number, &message);
                }
            }
        }
    }
}

/// Numbers and booleans pack into one length-delimited run in proto3.
fn packable(kind: &Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

fn wire_type(kind: &Kind) -> u32 {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => FIXED64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => FIXED32,
        Kind::String | Kind::Bytes | Kind::Message(_) => LENGTH,
        _ => VARINT,
    }
}

fn write_scalar(out: &mut Vec<u8>, number: u32, kind: &Kind, value: &Value<'_>) {
    if *value == Value::Null {
        return;
    }
    write_tag(out, number, wire_type(kind));
    match (kind, value) {
        // Strings and bytes as they are, without a copy to learn their length.
        (Kind::String | Kind::Bytes, Value::Str(s)) => {
            write_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        (Kind::Bytes, Value::Bytes(b)) => {
            write_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        _ if wire_type(kind) == LENGTH => {
            let mut bytes = Vec::new();
            write_scalar_payload(&mut bytes, kind, value);
            write_varint(out, bytes.len() as u64);
            out.extend_from_slice(&bytes);
        }
        _ => write_scalar_payload(out, kind, value),
    }
}

/// The value's bytes without tag (and, for strings and bytes, without length).
fn write_scalar_payload(out: &mut Vec<u8>, kind: &Kind, value: &Value<'_>) {
    let int = || match value {
        Value::Int(i) => *i,
        Value::Boolean(b) => i64::from(*b),
        _ => 0,
    };
    let float = || match value {
        Value::Float(f) => *f,
        Value::Int(i) => *i as f64,
        _ => 0.0,
    };
    match kind {
        Kind::String => out.extend_from_slice(value.to_text().unwrap_or_default().as_bytes()),
        Kind::Bytes => match value {
            Value::Bytes(b) => out.extend_from_slice(b),
            Value::Str(s) => out.extend_from_slice(s.as_bytes()),
            _ => {}
        },
        Kind::Bool => out.push(u8::from(matches!(value, Value::Boolean(true)))),
        Kind::Double => out.extend_from_slice(&float().to_le_bytes()),
        Kind::Float => out.extend_from_slice(&(float() as f32).to_le_bytes()),
        Kind::Fixed64 | Kind::Sfixed64 => out.extend_from_slice(&int().to_le_bytes()),
        Kind::Fixed32 | Kind::Sfixed32 => out.extend_from_slice(&(int() as i32).to_le_bytes()),
        Kind::Sint32 | Kind::Sint64 => {
            let n = int();
            write_varint(out, ((n << 1) ^ (n >> 63)) as u64);
        }
        // Negative int32s are sign-extended to ten bytes, as protobuf does.
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 => write_varint(out, int() as u64),
        Kind::Enum(descriptor) => {
            let number = match value {
                Value::Str(name) => descriptor.get_value_by_name(name).map_or(0, |v| v.number()),
                _ => 0,
            };
            write_varint(out, i64::from(number) as u64);
        }
        Kind::Message(_) => {}
    }
}
