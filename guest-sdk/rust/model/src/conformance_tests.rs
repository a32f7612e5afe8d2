//! The SDK conformance suite (`guest-sdk/conformance/`) run against the host's own
//! implementation: the packer the Rust SDK uses, the host's unpacking of what a module
//! hands it, and the selection helpers the host runs for every SDK.

use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, RecordBatch};
use arrow_array::{StringArray, builder::StringBuilder};
use serde_json::Value as Json;

use crate::helpers::{
    CHANGE_TYPE, Comparison, Predicate, Scalar, select_change_types, select_where,
};
use crate::packed::{PackedRecords, Record};
use crate::value::ChangeType;

const PACKING: &str = include_str!("../../../conformance/packing.json");
const UNPACKING: &str = include_str!("../../../conformance/unpacking.json");
const SELECTIONS: &str = include_str!("../../../conformance/selections.json");

fn cases(file: &str) -> Vec<Json> {
    let document: Json = serde_json::from_str(file).expect("a conformance file is JSON");
    document["cases"]
        .as_array()
        .expect("a list of cases")
        .clone()
}

/// Text as UTF-8, `{"hex": ...}` as the bytes it spells.
fn bytes(value: &Json) -> Vec<u8> {
    match value {
        Json::String(text) => text.as_bytes().to_vec(),
        Json::Object(object) => hex(object["hex"].as_str().expect("hex text")),
        other => panic!("not bytes: {other}"),
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex digits"))
        .collect()
}

fn numbers<T: TryFrom<i64>>(value: &Json) -> Vec<T> {
    value.as_array().map_or_else(Vec::new, |list| {
        list.iter()
            .map(|n| {
                let n = n.as_i64().expect("an integer");
                T::try_from(n).unwrap_or_else(|_| panic!("{n} is out of range"))
            })
            .collect()
    })
}

fn texts(value: &Json) -> Vec<String> {
    value.as_array().map_or_else(Vec::new, |list| {
        list.iter()
            .map(|t| t.as_str().expect("text").to_string())
            .collect()
    })
}

fn record(value: &Json) -> Record {
    Record {
        source_row: value["row"].as_u64().expect("a row") as u32,
        key: value.get("key").map(bytes),
        value: value.get("value").map(bytes),
        topic: value
            .get("topic")
            .map(|t| t.as_str().expect("text").to_string()),
        partition: value
            .get("partition")
            .map(|p| p.as_i64().expect("int") as i32),
        headers: value.get("headers").map_or_else(Vec::new, |headers| {
            headers
                .as_array()
                .expect("a list of headers")
                .iter()
                .map(|pair| {
                    (
                        pair[0].as_str().expect("a name").to_string(),
                        bytes(&pair[1]),
                    )
                })
                .collect()
        }),
    }
}

fn records(case: &Json) -> Vec<Record> {
    case["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(record)
        .collect()
}

fn packed(value: &Json) -> PackedRecords {
    PackedRecords {
        data: hex(value["data"].as_str().unwrap_or_default()),
        source_rows: numbers(&value["source_rows"]),
        key_lengths: numbers(&value["key_lengths"]),
        value_lengths: numbers(&value["value_lengths"]),
        topics: texts(&value["topics"]),
        topic_indexes: numbers(&value["topic_indexes"]),
        partitions: numbers(&value["partitions"]),
        header_names: texts(&value["header_names"]),
        header_counts: numbers(&value["header_counts"]),
        header_name_indexes: numbers(&value["header_name_indexes"]),
        header_value_lengths: numbers(&value["header_value_lengths"]),
    }
}

/// The cases of packing.json that `pack` gets wrong, each named with what it made.
fn packing_failures(pack: impl Fn(&[Record]) -> PackedRecords) -> Vec<String> {
    cases(PACKING)
        .iter()
        .filter_map(|case| {
            let records = records(case);
            let made = pack(&records);
            let expected = packed(&case["packed"]);
            (made != expected)
                .then(|| format!("{}: made {made:?}, expected {expected:?}", case["name"]))
        })
        .collect()
}

fn pack_as_the_sdk_does(records: &[Record]) -> PackedRecords {
    let mut packed = PackedRecords::default();
    for record in records {
        packed.push(record);
    }
    packed
}

#[test]
fn the_packer_makes_the_packed_lists_of_every_case() {
    let failures = packing_failures(pack_as_the_sdk_does);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The suite has teeth: a packer that lists a topic once per use fails it.
#[test]
fn a_packer_repeating_topic_names_fails_the_suite() {
    let failures = packing_failures(|records| {
        let mut packed = pack_as_the_sdk_does(records);
        packed.topics.clear();
        for (i, record) in records.iter().enumerate() {
            if let Some(topic) = &record.topic {
                packed.topics.push(topic.clone());
                packed.topic_indexes[i] = packed.topics.len() as u32;
            }
        }
        packed
    });
    assert!(
        failures
            .iter()
            .any(|f| f.starts_with("\"topics are listed once")),
        "{failures:#?}"
    );
}

#[test]
fn the_host_reads_every_packing_case_back_to_its_records() {
    for case in cases(PACKING) {
        let records = records(&case);
        let rows = records.iter().map(|r| r.source_row + 1).max().unwrap_or(0);
        let unpacked = packed(&case["packed"]).unpack(rows);
        assert_eq!(unpacked.as_ref(), Ok(&records), "{}", case["name"]);
    }
}

#[test]
fn the_host_refuses_every_malformed_case_with_its_reason() {
    for case in cases(UNPACKING) {
        let rows = case["num_rows"].as_u64().unwrap() as u32;
        let error = packed(&case["packed"])
            .unpack(rows)
            .expect_err(case["name"].as_str().unwrap());
        let expected = case["error"].as_str().unwrap();
        assert!(error.0.contains(expected), "{}: {error}", case["name"]);
    }
}

fn column(column: &Json) -> ArrayRef {
    let values = column["values"].as_array().expect("values");
    match column["type"].as_str().expect("a type") {
        "long" => Arc::new(values.iter().map(Json::as_i64).collect::<Int64Array>()),
        "double" => Arc::new(values.iter().map(Json::as_f64).collect::<Float64Array>()),
        "string" => Arc::new(values.iter().map(Json::as_str).collect::<StringArray>()),
        "boolean" => Arc::new(values.iter().map(Json::as_bool).collect::<BooleanArray>()),
        "binary" => {
            let values: Vec<Option<Vec<u8>>> = values
                .iter()
                .map(|v| (!v.is_null()).then(|| bytes(v)))
                .collect();
            Arc::new(BinaryArray::from_iter(values))
        }
        other => panic!("the suite has no type {other}"),
    }
}

fn batch(batch: &Json) -> RecordBatch {
    let mut columns: Vec<(String, ArrayRef)> = batch["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), column(c)))
        .collect();
    let mut changes = StringBuilder::new();
    for change in texts(&batch["change_types"]) {
        changes.append_value(change);
    }
    columns.push((CHANGE_TYPE.to_string(), Arc::new(changes.finish())));
    RecordBatch::try_from_iter(columns).expect("a batch")
}

fn scalar(value: &Json) -> Scalar {
    match value {
        Json::Null => Scalar::Null,
        Json::Bool(b) => Scalar::Boolean(*b),
        Json::Number(n) => n
            .as_i64()
            .map_or_else(|| Scalar::Float(n.as_f64().unwrap()), Scalar::Integer),
        Json::String(s) => Scalar::Text(s.clone()),
        other => panic!("not a constant: {other}"),
    }
}

fn comparison(op: &str) -> Comparison {
    match op {
        "==" => Comparison::Equal,
        "!=" => Comparison::NotEqual,
        "<" => Comparison::Less,
        "<=" => Comparison::LessOrEqual,
        ">" => Comparison::Greater,
        ">=" => Comparison::GreaterOrEqual,
        "is null" => Comparison::IsNull,
        "is not null" => Comparison::IsNotNull,
        other => panic!("the suite has no comparison {other}"),
    }
}

#[test]
fn the_host_selects_the_rows_of_every_case() {
    let document: Json = serde_json::from_str(SELECTIONS).unwrap();
    let batch = batch(&document["batch"]);
    for case in cases(SELECTIONS) {
        let selected = if let Some(call) = case.get("select_change_types") {
            let types: Vec<ChangeType> = texts(&call["types"])
                .iter()
                .map(|t| ChangeType::parse(t).expect("a change type"))
                .collect();
            let within: Option<Vec<u32>> = call.get("within").map(numbers);
            select_change_types(&batch, &types, within.as_deref())
        } else {
            let call = &case["select_where"];
            let predicate = Predicate {
                column: call["column"].as_str().unwrap().to_string(),
                op: comparison(call["op"].as_str().unwrap()),
                value: scalar(&call["value"]),
            };
            let within: Option<Vec<u32>> = call.get("within").map(numbers);
            select_where(&batch, &predicate, within.as_deref())
        };
        match (case.get("rows"), selected) {
            (Some(rows), Ok(selected)) => {
                assert_eq!(selected, numbers::<u32>(rows), "{}", case["name"])
            }
            (None, Err(error)) => {
                let expected = case["error"].as_str().unwrap();
                assert!(error.0.contains(expected), "{}: {error}", case["name"]);
            }
            (_, outcome) => panic!("{}: {outcome:?}", case["name"]),
        }
    }
}
