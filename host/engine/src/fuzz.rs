//! Fuzzing of the contract's host functions: sequences of calls with generated
//! arguments (lengths at and past their bounds, indexes out of range, unknown columns,
//! malformed packed lists, huge headers) on a real batch. No call may panic, every
//! refusal is an error the module sees or a trap the policy handles, and the output
//! the host holds never passes the output cap by more than one record.

use std::sync::Arc;
use std::time::Duration;

use delta_kernel::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, StringArray, StructArray, TimestampMicrosecondArray,
};
use delta_kernel::arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use delta_kernel::arrow::record_batch::RecordBatch;
use sluice_fuzzing::{Gen, fuzz};
use sluice_model::helpers::{CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
use wasmtime::component::Resource;

use crate::budget::HostLimitExceeded;
use crate::contract::v1::sluice::transform::host::{Host, HostBatch};
use crate::contract::v1::sluice::transform::types as wit;
use crate::limits::InstanceLimits;
use crate::state::{BatchState, HostState};

const ROWS: usize = 40;
const OUTPUT_CAP: usize = 64 * 1024;
const COLUMNS: &[&str] = &[
    "id",
    "amount",
    "won",
    "doc.owner",
    "_change_type",
    "nope",
    "",
];

fn batch() -> RecordBatch {
    let owner = StructArray::new(
        Fields::from(vec![Field::new("owner", DataType::Utf8, true)]),
        vec![Arc::new(StringArray::from_iter(
            (0..ROWS).map(|i| (i % 3 > 0).then(|| format!("o{i}"))),
        )) as ArrayRef],
        None,
    );
    let changes = ["insert", "update_preimage", "update_postimage", "delete"];
    let columns: Vec<(Field, ArrayRef)> = vec![
        (
            Field::new("id", DataType::Utf8, true),
            Arc::new(StringArray::from_iter(
                (0..ROWS).map(|i| Some(format!("ObjectId('{i:024}')"))),
            )),
        ),
        (
            Field::new("amount", DataType::Int64, true),
            Arc::new(Int64Array::from_iter(
                (0..ROWS).map(|i| (i % 5 > 0).then_some(i as i64 * 7)),
            )),
        ),
        (
            Field::new("won", DataType::Boolean, true),
            Arc::new(BooleanArray::from_iter((0..ROWS).map(|i| Some(i % 2 == 0)))),
        ),
        (
            Field::new("doc", owner.data_type().clone(), true),
            Arc::new(owner),
        ),
        (
            Field::new(CHANGE_TYPE, DataType::Utf8, false),
            Arc::new(StringArray::from_iter_values(
                (0..ROWS).map(|i| changes[i % 4]),
            )),
        ),
        (
            Field::new(COMMIT_VERSION, DataType::Int64, false),
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS).map(|i| i as i64 / 10),
            )),
        ),
        (
            Field::new(
                COMMIT_TIMESTAMP,
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    (0..ROWS).map(|i| i as i64 * 1_000_000),
                )
                .with_timezone("UTC"),
            ),
        ),
    ];
    let (fields, arrays): (Vec<_>, Vec<_>) = columns.into_iter().unzip();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
}

fn rows(g: &mut Gen) -> Vec<u32> {
    let len = g.size(ROWS);
    (0..len).map(|_| g.index(ROWS) as u32).collect()
}

fn scalar(g: &mut Gen) -> wit::Scalar {
    match g.below(5) {
        0 => wit::Scalar::Null,
        1 => wit::Scalar::Boolean(g.one_in(2)),
        2 => wit::Scalar::Integer(g.i64()),
        3 => wit::Scalar::Float(f64::from_bits(g.u64())),
        _ => wit::Scalar::Text(g.text(&["o1", "closedwon"])),
    }
}

fn field_value(g: &mut Gen) -> wit::FieldValue {
    match g.below(6) {
        0 => wit::FieldValue::Column(g.text(COLUMNS)),
        1 => wit::FieldValue::Substring(wit::Substring {
            column: g.text(COLUMNS),
            pos: g.u64() as u32 % 40,
            len: if g.one_in(4) {
                u32::MAX
            } else {
                g.below(30) as u32
            },
        }),
        2 => wit::FieldValue::Constant(scalar(g)),
        3 => wit::FieldValue::ChangeType,
        4 => wit::FieldValue::CommitVersion,
        _ => wit::FieldValue::CommitTimestamp,
    }
}

fn encode_spec(g: &mut Gen) -> wit::EncodeSpec {
    wit::EncodeSpec {
        rows: rows(g),
        key: g.one_in(2).then(|| field_value(g)),
        value: match g.below(3) {
            0 => wit::ValueEncoding::Json(
                (0..g.size(crate::budget::MAX_ENCODED_FIELDS.min(64)))
                    .map(|_| wit::JsonField {
                        name: g.text(COLUMNS),
                        value: field_value(g),
                    })
                    .collect(),
            ),
            1 => wit::ValueEncoding::JsonRow,
            _ => wit::ValueEncoding::Tombstone,
        },
        delete_as_tombstone: g.one_in(2),
        topic: g.one_in(4).then(|| g.text(&["other"])),
        headers: (0..g.size(8))
            .map(|_| (g.text(&["op"]), field_value(g)))
            .collect(),
    }
}

fn list<T>(g: &mut Gen, bound: usize, mut item: impl FnMut(&mut Gen) -> T) -> Vec<T> {
    (0..g.size(bound)).map(|_| item(g)).collect()
}

fn packed(g: &mut Gen) -> wit::PackedRecords {
    let records = g.size(ROWS);
    let length = |g: &mut Gen| match g.below(6) {
        0 => -1,
        1 => i32::MIN,
        2 => i32::MAX,
        _ => g.below(12) as i32,
    };
    wit::PackedRecords {
        data: list(g, 256, |g| g.u64() as u8),
        source_rows: (0..records).map(|_| g.index(ROWS) as u32).collect(),
        key_lengths: (0..g.size(records)).map(|_| length(g)).collect(),
        value_lengths: (0..g.size(records)).map(|_| length(g)).collect(),
        topics: list(g, 3, |g| g.text(&["t"])),
        topic_indexes: list(g, records, |g| g.index(4) as u32),
        partitions: list(g, records, |g| g.u64() as i32),
        header_names: list(g, 3, |g| g.text(&["h"])),
        header_counts: list(g, records, |g| g.index(3) as u32),
        header_name_indexes: list(g, records * 2, |g| g.index(4) as u32),
        header_value_lengths: list(g, records * 2, |g| g.index(8) as u32),
    }
}

fn output_record(g: &mut Gen) -> wit::OutputRecord {
    wit::OutputRecord {
        source_row: g.index(ROWS) as u32,
        topic: g.one_in(4).then(|| g.text(&["t"])),
        partition: g.one_in(4).then(|| g.u64() as i32),
        key: g.one_in(2).then(|| list(g, 64, |g| g.u64() as u8)),
        value: g.one_in(2).then(|| vec![b'v'; g.size(8 * 1024)]),
        headers: list(g, 4, |g| wit::Header {
            key: g.text(&["h"]),
            value: list(g, 16, |g| g.u64() as u8),
        }),
    }
}

fn change_type(g: &mut Gen) -> wit::ChangeType {
    *g.pick(&[
        wit::ChangeType::Insert,
        wit::ChangeType::UpdatePreimage,
        wit::ChangeType::UpdatePostimage,
        wit::ChangeType::Delete,
    ])
}

/// One host call with generated arguments; `Err` is a trap.
fn call(g: &mut Gen, state: &mut HostState, rep: u32) -> wasmtime::Result<()> {
    let handle = || Resource::<BatchState>::new_borrow(rep);
    match g.below(11) {
        0 => {
            let names = list(g, 8, |g| g.text(COLUMNS));
            let _ = state.columns(handle(), names)?;
        }
        1 => {
            state.arrow_ipc(handle())?;
        }
        2 => {
            state.change_types(handle())?;
            state.commit_versions(handle())?;
            state.commit_timestamps(handle())?;
        }
        3 => {
            let types = list(g, 4, change_type);
            let within = g.one_in(2).then(|| rows(g));
            state.select_change_types(handle(), types, within)?;
        }
        4 => {
            let predicate = wit::Predicate {
                column: g.text(COLUMNS),
                op: *g.pick(&[
                    wit::Comparison::Equal,
                    wit::Comparison::NotEqual,
                    wit::Comparison::Less,
                    wit::Comparison::LessOrEqual,
                    wit::Comparison::Greater,
                    wit::Comparison::GreaterOrEqual,
                    wit::Comparison::IsNull,
                    wit::Comparison::IsNotNull,
                ]),
                value: scalar(g),
            };
            let within = g.one_in(2).then(|| rows(g));
            let _ = state.select_where(handle(), predicate, within)?;
        }
        5 | 6 => {
            let spec = encode_spec(g);
            let _ = state.emit_encoded(handle(), spec)?;
        }
        7 => state.emit_packed(handle(), packed(g))?,
        8 => {
            let records = list(g, 16, output_record);
            state.emit(handle(), records)?;
        }
        9 => {
            let row = g.index(ROWS) as u32;
            let message = g.text(&["bad row"]);
            state.reject(handle(), row, message)?;
        }
        _ => {
            let message = g.text(&["hello"]);
            state.log(wit::LogLevel::Info, message)?;
        }
    }
    Ok(())
}

#[test]
fn fuzz_host_calls() {
    let batch = crate::convert::normalize(&batch()).unwrap();
    let limits = InstanceLimits {
        memory_limit_bytes: 1024 * 1024,
        batch_deadline: Duration::from_secs(5),
        max_output_bytes: OUTPUT_CAP,
        ..InstanceLimits::default()
    };
    let mut traps = 0u64;
    fuzz("host-calls", |g| {
        let mut state = HostState::new(&limits, "fuzzed", None, std::sync::Arc::default());
        let handle = state
            .table
            .push(BatchState::new(batch.clone(), OUTPUT_CAP))
            .unwrap();
        let rep = handle.rep();
        for _ in 0..1 + g.below(8) {
            if let Err(trap) = call(g, &mut state, rep) {
                assert!(
                    trap.downcast_ref::<HostLimitExceeded>().is_some(),
                    "a host call failed with something else than a host limit: {trap:#}"
                );
                traps += 1;
                break;
            }
        }
        let state = state.table.delete(handle).unwrap();
        let held = state.held_output_bytes();
        // One record may be charged past the cap before the call stops.
        assert!(
            held <= OUTPUT_CAP + 64 * 1024,
            "the host holds {held} bytes of output for a {OUTPUT_CAP}-byte cap"
        );
    });
    assert!(traps > 0, "the generated calls reached the limits");
}
