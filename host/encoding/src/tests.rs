use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, Decimal128Array, Int64Array, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use sluice_model::Record;
use sluice_model::helpers::{
    CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, EncodeSpec, FieldValue, Scalar, ValueEncoding,
};

use super::*;

/// id, amount, price, tags, doc{stage}, then the change columns; four rows: an
/// insert, an update's pre- and post-image, a delete.
fn batch() -> RecordBatch {
    let mut tags = ListBuilder::new(StringBuilder::new());
    tags.append_value([Some("a"), Some("b")]);
    tags.append_value([None::<&str>]);
    tags.append_null();
    tags.append_value(Vec::<Option<&str>>::new());
    let tags = tags.finish();
    let stage_fields = Fields::from(vec![Field::new("stage", DataType::Utf8, true)]);
    let doc = StructArray::new(
        stage_fields.clone(),
        vec![Arc::new(StringArray::from(vec![
            Some("won"),
            Some("new"),
            Some("won"),
            None,
        ])) as ArrayRef],
        None,
    );
    let schema = Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, true),
        Field::new("price", DataType::Decimal128(10, 2), true),
        Field::new("tags", tags.data_type().clone(), true),
        Field::new("doc", DataType::Struct(stage_fields), true),
        Field::new(CHANGE_TYPE, DataType::Utf8, false),
        Field::new(COMMIT_VERSION, DataType::Int64, false),
        Field::new(
            COMMIT_TIMESTAMP,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["a", "b", "b", "c"])),
        Arc::new(Int64Array::from(vec![Some(1), Some(-1), None, Some(64)])),
        Arc::new(
            Decimal128Array::from(vec![Some(1250), Some(-5), None, Some(0)])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(tags),
        Arc::new(doc),
        Arc::new(StringArray::from(vec![
            "insert",
            "update_preimage",
            "update_postimage",
            "delete",
        ])),
        Arc::new(Int64Array::from(vec![1, 2, 2, 3])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![1_000, 2_000, 2_000, 3_000]).with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

fn spec(value: ValueEncoding) -> EncodeSpec {
    EncodeSpec {
        rows: vec![0, 1, 2, 3],
        key: Some(FieldValue::Column("id".into())),
        value,
        delete_as_tombstone: true,
        topic: None,
        headers: Vec::new(),
    }
}

fn format(value: ValueFormat, envelope: Envelope) -> Format {
    Format {
        value,
        envelope,
        pipeline: "gold".into(),
        table: "deals".into(),
        ..Format::default()
    }
}

fn run(spec: &EncodeSpec, format: &Format) -> (Vec<Record>, Encoded) {
    let mut records = Vec::new();
    let encoded = encode(&batch(), spec, format, &mut records).unwrap();
    (records, encoded)
}

#[test]
fn plain_json_is_what_the_helpers_always_wrote() {
    let spec = spec(ValueEncoding::JsonRow);
    let (records, encoded) = run(&spec, &Format::default());
    let mut expected = Vec::new();
    sluice_model::helpers::encode(&batch(), &spec, &mut expected).unwrap();
    assert_eq!(records, expected);
    assert_eq!(encoded.value, None);
}

#[test]
fn whole_rows_in_avro_follow_the_binary_encoding() {
    let (records, encoded) = run(
        &spec(ValueEncoding::JsonRow),
        &format(ValueFormat::Avro, Envelope::None),
    );
    let schema: serde_json::Value =
        serde_json::from_str(&encoded.value.as_ref().unwrap().text).unwrap();
    assert_eq!(schema["name"], "Value");
    assert_eq!(schema["namespace"], "sluice");
    assert_eq!(
        schema["fields"][0],
        serde_json::json!({"name": "id", "type": "string"})
    );
    assert_eq!(
        schema["fields"][2]["type"][1],
        serde_json::json!({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2})
    );
    assert_eq!(
        schema["fields"][3]["type"][1]["items"],
        serde_json::json!(["null", "string"])
    );
    assert_eq!(schema["fields"][4]["type"][1]["name"], "doc");
    // Row 0: "a", 1, 12.50, ["a", "b"], {stage: "won"}.
    let row0 = records[0].value.as_ref().unwrap();
    assert_eq!(
        &row0[..FRAME_LEN],
        &[0; FRAME_LEN],
        "a placeholder for the id"
    );
    assert_eq!(
        &row0[FRAME_LEN..],
        &[
            2, b'a', // id
            2, 2, // amount: union branch 1, zig-zag 1
            2, 4, 0x04, 0xe2, // price: branch 1, 2 bytes, 1250 big-endian
            2, 4, 2, 2, b'a', 2, 2, b'b', 0, // tags: branch 1, block of 2, end
            2, 2, 6, b'w', b'o', b'n', // doc: branch 1, stage: branch 1, "won"
        ][..]
    );
    // Row 1: amount -1 and price -0.05 are negative; row 2 has nulls.
    let row1 = &records[1].value.as_ref().unwrap()[FRAME_LEN..];
    assert_eq!(
        &row1[2..8],
        &[2, 1, 2, 2, 0xfb, 2],
        "zig-zag -1, one byte of -5, tags branch"
    );
    let row2 = &records[2].value.as_ref().unwrap()[FRAME_LEN..];
    assert_eq!(&row2[2..5], &[0, 0, 0], "null amount, price and tags");
    // The delete is a tombstone; its key stays text.
    assert_eq!(records[3].value, None);
    assert_eq!(records[3].key.as_deref(), Some(&b"c"[..]));
}

#[test]
fn the_same_table_and_spec_give_the_same_schema_text() {
    let avro = format(ValueFormat::Avro, Envelope::None);
    let (_, first) = run(&spec(ValueEncoding::JsonRow), &avro);
    let (_, second) = run(&spec(ValueEncoding::JsonRow), &avro);
    assert_eq!(first.value, second.value);
}

#[test]
fn avro_keys_are_framed_primitives() {
    let mut avro = format(ValueFormat::Avro, Envelope::None);
    avro.key = KeyFormat::Avro;
    let (records, encoded) = run(&spec(ValueEncoding::JsonRow), &avro);
    let key = encoded.key.unwrap();
    assert_eq!(
        (key.text.as_str(), key.name.as_str()),
        ("\"string\"", "string")
    );
    assert_eq!(
        records[0].key.as_deref(),
        Some(&[0, 0, 0, 0, 0, 2, b'a'][..])
    );
}

#[test]
fn json_schema_values_are_the_json_after_a_frame() {
    let fields = ValueEncoding::Json(vec![
        ("id".into(), FieldValue::Column("id".into())),
        ("stage".into(), FieldValue::Column("doc.stage".into())),
    ]);
    let (records, encoded) = run(
        &spec(fields),
        &format(ValueFormat::JsonSchema, Envelope::None),
    );
    assert_eq!(
        &records[0].value.as_ref().unwrap()[FRAME_LEN..],
        br#"{"id":"a","stage":"won"}"#
    );
    let schema: serde_json::Value = serde_json::from_str(&encoded.value.unwrap().text).unwrap();
    assert_eq!(schema["required"], serde_json::json!(["id"]));
    assert_eq!(schema["properties"]["stage"]["oneOf"][1]["type"], "string");
}

#[test]
fn debezium_pairs_an_update_and_follows_a_delete_with_a_tombstone() {
    let fields = ValueEncoding::Json(vec![
        ("id".into(), FieldValue::Column("id".into())),
        ("amount".into(), FieldValue::Column("amount".into())),
    ]);
    let (records, _) = run(
        &spec(fields),
        &format(ValueFormat::Json, Envelope::Debezium),
    );
    let events: Vec<serde_json::Value> = records
        .iter()
        .filter_map(|r| r.value.as_ref())
        .map(|v| serde_json::from_slice(v).unwrap())
        .collect();
    let ops: Vec<&str> = events.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["c", "u", "d"]);
    assert_eq!(events[0]["before"], serde_json::Value::Null);
    assert_eq!(
        events[0]["after"],
        serde_json::json!({"id": "a", "amount": 1})
    );
    assert_eq!(
        events[1]["before"],
        serde_json::json!({"id": "b", "amount": -1})
    );
    assert_eq!(
        events[1]["after"],
        serde_json::json!({"id": "b", "amount": null})
    );
    assert_eq!(events[2]["before"]["id"], "c");
    assert_eq!(events[2]["after"], serde_json::Value::Null);
    assert_eq!(events[2]["source"]["commit_version"], 3);
    assert_eq!(events[2]["source"]["ts_ms"], 3);
    assert_eq!(events[2]["source"]["table"], "deals");
    assert_eq!(records.len(), 4, "c, u, d and the delete's tombstone");
    assert_eq!(
        (records[3].key.as_deref(), &records[3].value),
        (Some(&b"c"[..]), &None)
    );
    assert_eq!(
        records[1].source_row, 2,
        "the update is the post-image's record"
    );
}

#[test]
fn debezium_json_keeps_debeziums_field_order_with_nulls_in_place() {
    let fields = ValueEncoding::Json(vec![
        ("id".into(), FieldValue::Column("id".into())),
        ("amount".into(), FieldValue::Column("amount".into())),
        ("price".into(), FieldValue::Column("price".into())),
    ]);
    let (records, _) = run(
        &spec(fields),
        &format(ValueFormat::Json, Envelope::Debezium),
    );
    let update = std::str::from_utf8(records[1].value.as_ref().unwrap()).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(update).unwrap();
    let (ms, us, ns) = (&parsed["ts_ms"], &parsed["ts_us"], &parsed["ts_ns"]);
    // The post-image's amount and price are null: written in their places, not last.
    let expected = format!(
        concat!(
            r#"{{"before":{{"id":"b","amount":-1,"price":-0.05}},"#,
            r#""after":{{"id":"b","amount":null,"price":null}},"#,
            r#""source":{{"version":"{version}","connector":"sluice","name":"gold","#,
            r#""ts_ms":2,"snapshot":"false","db":"delta","sequence":null,"#,
            r#""ts_us":2000,"ts_ns":2000000,"table":"deals","commit_version":2}},"#,
            r#""transaction":null,"op":"u","ts_ms":{ms},"ts_us":{us},"ts_ns":{ns}}}"#
        ),
        version = env!("CARGO_PKG_VERSION"),
        ms = ms,
        us = us,
        ns = ns,
    );
    assert_eq!(update, expected);
    let (ms, us, ns) = (
        ms.as_i64().unwrap(),
        us.as_i64().unwrap(),
        ns.as_i64().unwrap(),
    );
    assert_eq!(
        (us / 1000, ns / 1000),
        (ms, us),
        "one instant in three units"
    );
}

#[test]
fn debezium_avro_records_are_named_and_ordered_as_debeziums() {
    let avro = Format {
        namespace: debezium_namespace("gold", "s3://lake/crm/deals/"),
        ..format(ValueFormat::Avro, Envelope::Debezium)
    };
    let (records, encoded) = run(&spec(ValueEncoding::JsonRow), &avro);
    let schema = encoded.value.unwrap();
    assert_eq!(schema.name, "gold.delta.deals.Envelope");
    let envelope: serde_json::Value = serde_json::from_str(&schema.text).unwrap();
    let names = |record: &serde_json::Value| -> Vec<String> {
        record["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&envelope),
        [
            "before",
            "after",
            "source",
            "transaction",
            "op",
            "ts_ms",
            "ts_us",
            "ts_ns"
        ]
    );
    assert_eq!(envelope["fields"][0]["type"][1]["name"], "Value");
    let source = &envelope["fields"][2]["type"];
    assert_eq!(
        (&source["namespace"], &source["name"]),
        (
            &serde_json::json!("io.debezium.connector.sluice"),
            &serde_json::json!("Source")
        )
    );
    assert_eq!(
        names(source),
        [
            "version",
            "connector",
            "name",
            "ts_ms",
            "snapshot",
            "db",
            "sequence",
            "ts_us",
            "ts_ns",
            "table",
            "commit_version"
        ]
    );
    let transaction = &envelope["fields"][3]["type"][1];
    assert_eq!(
        (&transaction["namespace"], &transaction["name"]),
        (&serde_json::json!("event"), &serde_json::json!("block"))
    );
    assert_eq!(
        names(transaction),
        ["id", "total_order", "data_collection_order"]
    );
    // What Avro readers make of the bytes, through the registered schema.
    let delete = decode(&schema, records[2].value.as_ref().unwrap(), None).unwrap();
    assert_eq!(delete["op"], "d");
    assert_eq!(delete["transaction"], serde_json::Value::Null);
    let source = &delete["source"];
    assert_eq!(
        (
            &source["ts_ms"],
            &source["ts_us"],
            &source["ts_ns"],
            &source["commit_version"]
        ),
        (
            &serde_json::json!(3),
            &serde_json::json!(3000),
            &serde_json::json!(3_000_000),
            &serde_json::json!(3)
        )
    );
    assert_eq!(source["snapshot"], "false");
    assert_eq!(source["sequence"], serde_json::Value::Null);
    assert_eq!(
        delete["ts_us"].as_i64().unwrap() / 1000,
        delete["ts_ms"].as_i64().unwrap()
    );
}

#[test]
fn snapshot_rows_are_reads() {
    let batch = batch();
    let schema = batch
        .schema()
        .as_ref()
        .clone()
        .with_metadata([(SNAPSHOT_METADATA.to_string(), "true".to_string())].into());
    let batch = batch.with_schema(Arc::new(schema)).unwrap();
    let mut records = Vec::new();
    let spec = EncodeSpec {
        rows: vec![0],
        ..spec(ValueEncoding::JsonRow)
    };
    encode(
        &batch,
        &spec,
        &format(ValueFormat::Json, Envelope::Debezium),
        &mut records,
    )
    .unwrap();
    let event: serde_json::Value =
        serde_json::from_slice(records[0].value.as_ref().unwrap()).unwrap();
    assert_eq!(event["op"], "r");
    assert_eq!(event["source"]["snapshot"], "true");
}

#[test]
fn an_unsupported_type_is_named() {
    let schema = Schema::new(vec![Field::new(
        "t",
        DataType::Time64(TimeUnit::Microsecond),
        true,
    )]);
    let column: ArrayRef = Arc::new(arrow_array::Time64MicrosecondArray::from(vec![1]));
    let batch = RecordBatch::try_new(Arc::new(schema), vec![column]).unwrap();
    let spec = EncodeSpec {
        rows: vec![0],
        key: None,
        ..spec(ValueEncoding::JsonRow)
    };
    let error = encode(
        &batch,
        &spec,
        &format(ValueFormat::Avro, Envelope::None),
        &mut Vec::new(),
    );
    assert_eq!(
        error.unwrap_err().0,
        "Column `t` has Arrow type Time64(µs), which the Avro encoding does not support."
    );
}

#[test]
fn a_post_image_before_its_pre_image_still_pairs() {
    let spec = EncodeSpec {
        rows: vec![2, 1],
        ..spec(ValueEncoding::JsonRow)
    };
    let (records, _) = run(&spec, &format(ValueFormat::Json, Envelope::Debezium));
    assert_eq!(records.len(), 1, "one update event");
    let event: serde_json::Value =
        serde_json::from_slice(records[0].value.as_ref().unwrap()).unwrap();
    assert_eq!(
        (event["op"].as_str(), event["before"]["amount"].as_i64()),
        (Some("u"), Some(-1))
    );
}

#[test]
fn an_update_that_changes_the_key_is_a_delete_and_a_create() {
    let spec = EncodeSpec {
        rows: vec![1, 2],
        key: Some(FieldValue::Column("amount".into())),
        ..spec(ValueEncoding::JsonRow)
    };
    let (records, _) = run(&spec, &format(ValueFormat::Json, Envelope::Debezium));
    let ops: Vec<Option<String>> = records
        .iter()
        .map(|r| {
            r.value.as_ref().map(|v| {
                let event: serde_json::Value = serde_json::from_slice(v).unwrap();
                event["op"].as_str().unwrap().to_string()
            })
        })
        .collect();
    // Row 2's key (amount) is null: no key, so no tombstone after the delete either.
    assert_eq!(ops, [Some("d".into()), None, Some("c".into())]);
    assert_eq!(
        records[1].key.as_deref(),
        Some(&b"-1"[..]),
        "the delete's tombstone"
    );
}

#[test]
fn protobuf_values_follow_the_supplied_message() {
    let dir = tempfile::tempdir().unwrap();
    let proto = dir.path().join("deal.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\";\npackage crm;\nmessage Other { string x = 1; }\nmessage Deal {\n  string id = 1;\n  sint64 amount = 2;\n  repeated string tags = 3;\n  Doc doc = 4;\n  message Doc { string stage = 1; }\n}\n",
    )
    .unwrap();
    let schema = Arc::new(ProtobufSchema::compile(&proto, Some("crm.Deal")).unwrap());
    assert_eq!(
        schema.message_indexes(),
        [2, 2],
        "one index: the second message"
    );
    let mut protobuf = format(ValueFormat::Protobuf, Envelope::None);
    protobuf.protobuf = Some(schema.clone());
    let fields = ValueEncoding::Json(vec![
        ("id".into(), FieldValue::Column("id".into())),
        ("amount".into(), FieldValue::Column("amount".into())),
        ("tags".into(), FieldValue::Column("tags".into())),
        ("doc".into(), FieldValue::Column("doc".into())),
    ]);
    let (records, encoded) = run(&spec(fields), &protobuf);
    let value = encoded.value.unwrap();
    assert_eq!(
        (value.kind, value.name.as_str()),
        (SchemaKind::Protobuf, "crm.Deal")
    );
    let row0 = records[0].value.as_ref().unwrap();
    assert_eq!(
        &row0[FRAME_LEN..],
        &[
            2, 2, // message indexes: [1]
            0x0a, 1, b'a', // id = "a"
            0x10, 2, // amount = 1 (zig-zag)
            0x1a, 1, b'a', 0x1a, 1, b'b', // tags, one entry each
            0x22, 5, 0x0a, 3, b'w', b'o', b'n', // doc { stage = "won" }
        ][..]
    );
    // Read back with the .proto's field names (a 64-bit integer is a string in JSON).
    assert_eq!(
        decode(&value, row0, Some(&schema)).unwrap(),
        serde_json::json!({"id": "a", "amount": "1", "tags": ["a", "b"], "doc": {"stage": "won"}})
    );
    let missing = ValueEncoding::Json(vec![("nope".into(), FieldValue::Column("id".into()))]);
    let mut out = Vec::new();
    let error = encode(&batch(), &spec(missing), &protobuf, &mut out).unwrap_err();
    assert_eq!(
        error.0,
        "Message crm.Deal has no field `nope`; add it to the .proto or leave it out of the record."
    );
}

#[test]
fn a_supplied_avro_schema_takes_fields_by_name_and_nulls_where_it_allows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deal.avsc");
    std::fs::write(
        &path,
        r#"{"type": "record", "name": "Deal", "namespace": "crm", "fields": [
            {"name": "amount", "type": ["null", "double", "long"], "default": null},
            {"name": "id", "type": ["string"]},
            {"name": "region", "type": ["null", "string"], "default": null},
            {"name": "price", "type": ["null", "string"]},
            {"name": "at", "type": [{"type": "long", "logicalType": "timestamp-millis"}, "null"]}
        ]}"#,
    )
    .unwrap();
    let mut avro = format(ValueFormat::Avro, Envelope::None);
    avro.supplied = Some(Arc::new(SuppliedSchema::read_avro(&path).unwrap()));
    let fields = ValueEncoding::Json(vec![
        ("id".into(), FieldValue::Column("id".into())),
        ("amount".into(), FieldValue::Column("amount".into())),
        ("price".into(), FieldValue::Column("price".into())),
        ("at".into(), FieldValue::CommitTimestamp),
        ("ignored".into(), FieldValue::Column("tags".into())),
    ]);
    let (records, encoded) = run(&spec(fields), &avro);
    let value = encoded.value.unwrap();
    assert_eq!(value.name, "crm.Deal");
    assert_eq!(
        &records[0].value.as_ref().unwrap()[FRAME_LEN..],
        &[
            4, 2, // amount: a long does not fit a double, branch 2 takes it
            0, 2, b'a', // id: branch 0 of a union without null
            0,    // region: not in the record, null
            2, 10, b'1', b'2', b'.', b'5', b'0', // price: a decimal as text
            0, 2, // at: branch 0 of [long, null], 1 ms
        ][..]
    );
    // A null where the schema allows none names the field.
    let nulls = spec(ValueEncoding::Json(vec![(
        "id".into(),
        FieldValue::Column("doc.stage".into()),
    )]));
    let error = encode(&batch(), &nulls, &avro, &mut Vec::new()).unwrap_err();
    assert_eq!(
        error.0,
        "Field `id` is null in row 3, and its Avro type does not allow null; make it a union with null in the schema."
    );
}

#[test]
fn protobuf_refuses_what_its_fields_cannot_hold_and_skips_what_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let proto = dir.path().join("deal.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\";\npackage crm;\nmessage Deal {\n  Stage stage = 1;\n  int32 small = 2;\n  Doc doc = 3;\n  repeated int64 counts = 4;\n  enum Stage { UNKNOWN = 0; WON = 1; NEW = 2; }\n  message Doc { string stage = 1; }\n}\n",
    )
    .unwrap();
    let mut protobuf = format(ValueFormat::Protobuf, Envelope::None);
    protobuf.protobuf = Some(Arc::new(
        ProtobufSchema::compile(&proto, Some("crm.Deal")).unwrap(),
    ));
    let encode_fields = |fields: Vec<(&str, FieldValue)>| {
        let fields = fields
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        encode(
            &batch(),
            &spec(ValueEncoding::Json(fields)),
            &protobuf,
            &mut Vec::new(),
        )
    };
    // Enum values by name: `new` and `won` are not UNKNOWN/WON/NEW (names are exact).
    let error = encode_fields(vec![("stage", FieldValue::Column("doc.stage".into()))]).unwrap_err();
    assert_eq!(
        error.0,
        "Row 0 has `won` for enum crm.Deal.Stage, which has no such value (it has UNKNOWN, WON, NEW); map the value in the module or add it to the .proto."
    );
    // A 64-bit column into an int32 could overflow it.
    let error = encode_fields(vec![("small", FieldValue::Column("amount".into()))]).unwrap_err();
    assert_eq!(
        error.0,
        "Field `small` holds Arrow type Int64, which Protobuf field crm.Deal.small (int32) cannot take."
    );
    // A constant null into a message field leaves it unset.
    let null_doc = vec![("doc", FieldValue::Constant(Scalar::Null))];
    assert!(encode_fields(null_doc).is_ok());
}

/// Values without their null fields, as the `json` encoding leaves them out.
fn without_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(fields) => fields
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k, without_nulls(v)))
            .collect(),
        other => other,
    }
}

#[test]
fn decoded_avro_and_json_schema_values_read_as_the_json_encoding_writes_them() {
    let spec = spec(ValueEncoding::JsonRow);
    let (plain, _) = run(&spec, &Format::default());
    let expected: Vec<serde_json::Value> = plain
        .iter()
        .filter_map(|r| r.value.as_ref())
        .map(|v| serde_json::from_slice(v).unwrap())
        .collect();
    for value_format in [ValueFormat::Avro, ValueFormat::JsonSchema] {
        let (records, encoded) = run(&spec, &format(value_format, Envelope::None));
        let schema = encoded.value.unwrap();
        let decoded: Vec<serde_json::Value> = records
            .iter()
            .filter_map(|r| r.value.as_ref())
            .map(|v| without_nulls(decode(&schema, v, None).unwrap()))
            .collect();
        assert_eq!(decoded, expected, "{value_format:?}");
    }
    // A payload cut short says so instead of reading past its end.
    let (records, encoded) = run(&spec, &format(ValueFormat::Avro, Envelope::None));
    let value = records[0].value.as_ref().unwrap();
    let error = decode(
        encoded.value.as_ref().unwrap(),
        &value[..value.len() - 2],
        None,
    );
    assert!(error.unwrap_err().starts_with("the Avro value ends early"));
}

#[test]
fn a_supplied_json_schema_is_registered_when_the_records_fit_it() {
    let dir = tempfile::tempdir().unwrap();
    let schema_at = |text: &str| {
        let path = dir.path().join("deal.json");
        std::fs::write(&path, text).unwrap();
        let mut json_schema = format(ValueFormat::JsonSchema, Envelope::None);
        json_schema.supplied = Some(Arc::new(SuppliedSchema::read_json_schema(&path).unwrap()));
        json_schema
    };
    let deal = r#"{"type": "object", "title": "crm.Deal", "additionalProperties": false,
        "required": ["id"],
        "properties": {"id": {"type": "string"}, "amount": {"type": ["integer", "null"]},
            "price": {"type": "number"}, "tags": {"type": "array"}, "doc": {}}}"#;
    let (records, encoded) = run(&spec(ValueEncoding::JsonRow), &schema_at(deal));
    let value = encoded.value.unwrap();
    assert_eq!(
        (value.kind, value.name.as_str()),
        (SchemaKind::Json, "crm.Deal")
    );
    let registered: serde_json::Value = serde_json::from_str(&value.text).unwrap();
    assert_eq!(
        registered,
        serde_json::from_str::<serde_json::Value>(deal).unwrap()
    );
    assert_eq!(
        &records[0].value.as_ref().unwrap()[FRAME_LEN..],
        br#"{"id":"a","amount":1,"price":12.50,"tags":["a","b"],"doc":{"stage":"won"}}"#
    );
    let refused = |text: &str, fields: Vec<(&str, &str)>| {
        let fields = fields
            .into_iter()
            .map(|(name, column)| (name.to_string(), FieldValue::Column(column.into())))
            .collect();
        encode(
            &batch(),
            &spec(ValueEncoding::Json(fields)),
            &schema_at(text),
            &mut Vec::new(),
        )
        .unwrap_err()
        .0
    };
    assert_eq!(
        refused(deal, vec![("id", "id"), ("nope", "id")]),
        "Field `nope` is not a property of the supplied JSON Schema, which allows no others (additionalProperties is false); add it to the schema or leave it out of the record."
    );
    assert_eq!(
        refused(
            &deal.replace(r#"["integer", "null"]"#, r#""string""#),
            vec![("id", "id"), ("amount", "amount")]
        ),
        r#"Field `amount` is written as a JSON integer, which its property in the supplied JSON Schema ({"type":"string"}) does not allow."#
    );
    assert_eq!(
        refused(
            &deal.replace(r#"["id"]"#, r#"["id", "price"]"#),
            vec![("id", "id"), ("price", "price")]
        ),
        "Field `price` is null in row 2, and the supplied JSON Schema requires it (nulls are left out of the JSON); make it optional in the schema."
    );
    assert_eq!(
        refused(deal, vec![("amount", "amount")]),
        "The supplied JSON Schema requires property `id`, which the record does not have; add the field to the record or make it optional in the schema."
    );
}

#[test]
fn debezium_events_wrap_a_supplied_avro_record_and_decode_before_it_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deal.avsc");
    std::fs::write(
        &path,
        r#"{"type": "record", "name": "Deal", "namespace": "crm", "fields": [
            {"name": "id", "type": "string"},
            {"name": "amount", "type": ["null", "long"], "default": null}
        ]}"#,
    )
    .unwrap();
    let mut avro = format(ValueFormat::Avro, Envelope::Debezium);
    avro.supplied = Some(Arc::new(SuppliedSchema::read_avro(&path).unwrap()));
    let fields = ValueEncoding::Json(vec![
        ("id".into(), FieldValue::Column("id".into())),
        ("amount".into(), FieldValue::Column("amount".into())),
    ]);
    let (records, encoded) = run(&spec(fields), &avro);
    let schema = encoded.value.unwrap();
    let envelope: serde_json::Value = serde_json::from_str(&schema.text).unwrap();
    // The envelope is in namespace sluice: `after` names the record in full.
    assert_eq!(
        envelope["fields"][1]["type"],
        serde_json::json!(["null", "crm.Deal"])
    );
    // The insert's `before` is null: its record is read through `after`'s reference.
    let insert = decode(&schema, records[0].value.as_ref().unwrap(), None).unwrap();
    assert_eq!(insert["op"], "c");
    assert_eq!(insert["before"], serde_json::Value::Null);
    assert_eq!(insert["after"], serde_json::json!({"id": "a", "amount": 1}));
}

#[test]
fn a_null_item_where_the_supplied_avro_items_allow_none_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deal.avsc");
    let write = |items: &str| {
        std::fs::write(
            &path,
            format!(
                r#"{{"type": "record", "name": "Deal", "fields": [
                    {{"name": "tags", "type": ["null", {{"type": "array", "items": {items}}}]}}
                ]}}"#
            ),
        )
        .unwrap();
        let mut avro = format(ValueFormat::Avro, Envelope::None);
        avro.supplied = Some(Arc::new(SuppliedSchema::read_avro(&path).unwrap()));
        avro
    };
    let tags = spec(ValueEncoding::Json(vec![(
        "tags".into(),
        FieldValue::Column("tags".into()),
    )]));
    // Row 1's tags are [null].
    let error = encode(&batch(), &tags, &write("\"string\""), &mut Vec::new()).unwrap_err();
    assert_eq!(
        error.0,
        "Field `tags` has a null item in row 1, and the Avro type of its items does not allow null; make them a union with null in the schema."
    );
    assert!(
        encode(
            &batch(),
            &tags,
            &write(r#"["null", "string"]"#),
            &mut Vec::new()
        )
        .is_ok()
    );
}

#[test]
fn a_supplied_avro_schema_may_reuse_a_named_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deal.avsc");
    std::fs::write(
        &path,
        r#"{"type": "record", "name": "Deal", "namespace": "crm", "fields": [
            {"name": "doc", "type": ["null", {"type": "record", "name": "Doc",
                "fields": [{"name": "stage", "type": ["null", "string"]}]}]},
            {"name": "draft", "type": ["null", "Doc"]},
            {"name": "final", "type": ["null", "crm.Doc"]}
        ]}"#,
    )
    .unwrap();
    let mut avro = format(ValueFormat::Avro, Envelope::None);
    avro.supplied = Some(Arc::new(SuppliedSchema::read_avro(&path).unwrap()));
    let fields = ValueEncoding::Json(
        ["doc", "draft", "final"]
            .map(|name| (name.to_string(), FieldValue::Column("doc".into())))
            .to_vec(),
    );
    let (records, encoded) = run(&spec(fields), &avro);
    let value = records[0].value.as_ref().unwrap();
    // doc { stage = "won" } three times: branch 1, then stage's branch 1 and "won".
    assert_eq!(
        &value[FRAME_LEN..],
        &[2, 2, 6, b'w', b'o', b'n'].repeat(3)[..]
    );
    // The registered schema keeps the references as written.
    assert!(
        encoded
            .value
            .unwrap()
            .text
            .contains(r#""type":["null","Doc"]"#)
    );
}
