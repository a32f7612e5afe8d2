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
use sluice_fuzzing::fuzz;
use sluice_fuzzing::proptest::collection::vec;
use sluice_fuzzing::proptest::option;
use sluice_fuzzing::proptest::prelude::*;
use sluice_fuzzing::proptest::sample::select;
use sluice_fuzzing::strategies::{index, integer, list, size, text};
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

fn rows() -> impl Strategy<Value = Vec<u32>> + Clone {
    list(index(ROWS), ROWS)
}

fn scalar() -> impl Strategy<Value = wit::Scalar> + Clone {
    prop_oneof![
        Just(wit::Scalar::Null),
        any::<bool>().prop_map(wit::Scalar::Boolean),
        integer().prop_map(wit::Scalar::Integer),
        any::<u64>().prop_map(|bits| wit::Scalar::Float(f64::from_bits(bits))),
        text(&["o1", "closedwon"]).prop_map(wit::Scalar::Text),
    ]
}

fn field_value() -> impl Strategy<Value = wit::FieldValue> + Clone {
    let substring = (
        text(COLUMNS),
        0..40u32,
        prop_oneof![3 => 0..30u32, 1 => Just(u32::MAX)],
    )
        .prop_map(|(column, pos, len)| wit::Substring { column, pos, len });
    prop_oneof![
        text(COLUMNS).prop_map(wit::FieldValue::Column),
        substring.prop_map(wit::FieldValue::Substring),
        scalar().prop_map(wit::FieldValue::Constant),
        Just(wit::FieldValue::ChangeType),
        Just(wit::FieldValue::CommitVersion),
        Just(wit::FieldValue::CommitTimestamp),
    ]
}

fn encode_spec() -> impl Strategy<Value = wit::EncodeSpec> {
    let json_field =
        (text(COLUMNS), field_value()).prop_map(|(name, value)| wit::JsonField { name, value });
    let value = prop_oneof![
        list(json_field, crate::budget::MAX_ENCODED_FIELDS.min(64))
            .prop_map(wit::ValueEncoding::Json),
        Just(wit::ValueEncoding::JsonRow),
        Just(wit::ValueEncoding::Tombstone),
    ];
    (
        rows(),
        option::of(field_value()),
        value,
        any::<bool>(),
        option::weighted(0.25, text(&["other"])),
        list((text(&["op"]), field_value()), 8),
    )
        .prop_map(
            |(rows, key, value, delete_as_tombstone, topic, headers)| wit::EncodeSpec {
                rows,
                key,
                value,
                delete_as_tombstone,
                topic,
                headers,
            },
        )
}

/// A length in packed records: usually small, sometimes negative or huge.
fn length() -> impl Strategy<Value = i32> + Clone {
    prop_oneof![4 => 0..12i32, 1 => Just(-1), 1 => Just(i32::MIN), 1 => Just(i32::MAX)]
}

fn packed() -> impl Strategy<Value = wit::PackedRecords> {
    size(ROWS).prop_flat_map(|records| {
        let lists = (
            list(any::<u8>(), 256),
            vec(index(ROWS), records),
            list(length(), records),
            list(length(), records),
            list(text(&["t"]), 3),
            list(index(4), records),
        );
        let more = (
            list(any::<i32>(), records),
            list(text(&["h"]), 3),
            list(index(3), records),
            list(index(4), records * 2),
            list(index(8), records * 2),
        );
        (lists, more).prop_map(
            |(
                (data, source_rows, key_lengths, value_lengths, topics, topic_indexes),
                (
                    partitions,
                    header_names,
                    header_counts,
                    header_name_indexes,
                    header_value_lengths,
                ),
            )| wit::PackedRecords {
                data,
                source_rows,
                key_lengths,
                value_lengths,
                topics,
                topic_indexes,
                partitions,
                header_names,
                header_counts,
                header_name_indexes,
                header_value_lengths,
            },
        )
    })
}

fn output_record() -> impl Strategy<Value = wit::OutputRecord> + Clone {
    let header =
        (text(&["h"]), list(any::<u8>(), 16)).prop_map(|(key, value)| wit::Header { key, value });
    (
        index(ROWS),
        option::weighted(0.25, text(&["t"])),
        option::weighted(0.25, any::<i32>()),
        option::of(list(any::<u8>(), 64)),
        option::of(size(8 * 1024).prop_map(|len| vec![b'v'; len])),
        list(header, 4),
    )
        .prop_map(
            |(source_row, topic, partition, key, value, headers)| wit::OutputRecord {
                source_row,
                topic,
                partition,
                key,
                value,
                headers,
            },
        )
}

/// One host call and its arguments.
#[derive(Clone, Debug)]
enum Call {
    Columns(Vec<String>),
    ArrowIpc,
    /// `change-types`, `commit-versions` and `commit-timestamps`, one after another.
    ChangeMetadata,
    SelectChangeTypes(Vec<wit::ChangeType>, Option<Vec<u32>>),
    SelectWhere(wit::Predicate, Option<Vec<u32>>),
    EmitEncoded(wit::EncodeSpec),
    EmitPacked(wit::PackedRecords),
    Emit(Vec<wit::OutputRecord>),
    Reject(u32, String),
    Log(String),
}

fn call() -> impl Strategy<Value = Call> {
    let change_type = select(&[
        wit::ChangeType::Insert,
        wit::ChangeType::UpdatePreimage,
        wit::ChangeType::UpdatePostimage,
        wit::ChangeType::Delete,
    ]);
    let comparison = select(&[
        wit::Comparison::Equal,
        wit::Comparison::NotEqual,
        wit::Comparison::Less,
        wit::Comparison::LessOrEqual,
        wit::Comparison::Greater,
        wit::Comparison::GreaterOrEqual,
        wit::Comparison::IsNull,
        wit::Comparison::IsNotNull,
    ]);
    let predicate = (text(COLUMNS), comparison, scalar())
        .prop_map(|(column, op, value)| wit::Predicate { column, op, value });
    prop_oneof![
        1 => list(text(COLUMNS), 8).prop_map(Call::Columns),
        1 => Just(Call::ArrowIpc),
        1 => Just(Call::ChangeMetadata),
        1 => (list(change_type, 4), option::of(rows()))
            .prop_map(|(types, within)| Call::SelectChangeTypes(types, within)),
        1 => (predicate, option::of(rows()))
            .prop_map(|(predicate, within)| Call::SelectWhere(predicate, within)),
        2 => encode_spec().prop_map(Call::EmitEncoded),
        1 => packed().prop_map(Call::EmitPacked),
        1 => list(output_record(), 16).prop_map(Call::Emit),
        1 => (index(ROWS), text(&["bad row"])).prop_map(|(row, message)| Call::Reject(row, message)),
        1 => text(&["hello"]).prop_map(Call::Log),
    ]
}

impl Call {
    /// Makes the call on the batch `rep`; `Err` is a trap.
    fn make(self, state: &mut HostState, rep: u32) -> wasmtime::Result<()> {
        let handle = || Resource::<BatchState>::new_borrow(rep);
        match self {
            Call::Columns(names) => {
                let _ = state.columns(handle(), names)?;
            }
            Call::ArrowIpc => {
                state.arrow_ipc(handle())?;
            }
            Call::ChangeMetadata => {
                state.change_types(handle())?;
                state.commit_versions(handle())?;
                state.commit_timestamps(handle())?;
            }
            Call::SelectChangeTypes(types, within) => {
                state.select_change_types(handle(), types, within)?;
            }
            Call::SelectWhere(predicate, within) => {
                let _ = state.select_where(handle(), predicate, within)?;
            }
            Call::EmitEncoded(spec) => {
                let _ = state.emit_encoded(handle(), spec)?;
            }
            Call::EmitPacked(packed) => state.emit_packed(handle(), packed)?,
            Call::Emit(records) => state.emit(handle(), records)?,
            Call::Reject(row, message) => state.reject(handle(), row, message)?,
            Call::Log(message) => state.log(wit::LogLevel::Info, message)?,
        }
        Ok(())
    }
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
    fuzz("host-calls", vec(call(), 1..=8), |calls| {
        let mut state = HostState::new(&limits, "fuzzed", None, std::sync::Arc::default());
        let handle = state
            .table
            .push(BatchState::new(batch.clone(), OUTPUT_CAP))
            .unwrap();
        let rep = handle.rep();
        for call in calls {
            if let Err(trap) = call.make(&mut state, rep) {
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
