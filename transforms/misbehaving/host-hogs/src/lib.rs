//! A hostile tenant's transform, written against the raw bindings and built for
//! `wasm32-wasip2` so it also reaches WASI. Each `behavior` asks the host to do work or
//! hold memory on its behalf, at little cost to its own budgets:
//! - `columns-repeat`: `columns` with one column name repeated `count` times (default
//!   20,000);
//! - `encode-rows`: `emit-encoded` over 5,000,000 row indexes, values `json-row`;
//! - `encode-headers`: `emit-encoded` over every row with 20,000 headers;
//! - `encode-wide`: `emit-encoded` over every row with 1,000 headers of 16 KiB each;
//! - `emit-flood`: `emit` of 100,000 empty records at a time, without end;
//! - `packed-names`: `emit-packed` whose headers all name one 64 KiB header name;
//! - `select-within`: `select-where` within 5,000,000 row indexes;
//! - `reject-flood`: `reject` with a 4 KiB message 250,000 times (1 GiB of reasons), each row many times;
//! - `sleep`: sleeps an hour (WASI's monotonic clock and `poll`);
//! - `random`: asks WASI for 2^40 random bytes;
//! - `handles`: makes WASI pollables without end and never drops them;
//! - `stderr-flood`: writes to stderr without end;
//! - `state-hoard`: puts 256 KiB values in keyed state under new keys without end;
//!
//! anything else emits one record per row, so the fixture also shows a working module.

use std::cell::RefCell;

use sluice_transform_sys::exports::sluice::transform::transformer::Guest;
use sluice_transform_sys::sluice::transform::host::Batch;
use sluice_transform_sys::sluice::transform::types::{
    Comparison, EncodeSpec, FieldValue, OutputRecord, PackedRecords, Predicate, Scalar,
    TransformError, ValueEncoding,
};

thread_local! {
    static PARAMS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

fn param(name: &str) -> Option<String> {
    PARAMS.with(|p| {
        p.borrow()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
}

/// The fixture's transformer, exported on Wasm targets.
pub struct HostHogs;

impl Guest for HostHogs {
    fn init(params: Vec<(String, String)>) -> Result<(), String> {
        PARAMS.with(|p| *p.borrow_mut() = params);
        Ok(())
    }

    fn transform(batch: &Batch) -> Result<(), TransformError> {
        let behavior = param("behavior").unwrap_or_default();
        let rows = batch.num_rows();
        let all_rows = || (0..rows).collect::<Vec<u32>>();
        match behavior.as_str() {
            "columns-repeat" => {
                let count = param("count").map_or(20_000, |c| c.parse().expect("a count"));
                let names = vec!["documentId".to_string(); count];
                let columns = batch.columns(&names).map_err(TransformError::Batch)?;
                std::hint::black_box(columns);
            }
            "encode-rows" => {
                let spec = spec(vec![0; 5_000_000], Vec::new());
                batch.emit_encoded(&spec).map_err(TransformError::Batch)?;
            }
            "encode-headers" => {
                let headers = vec![("h".to_string(), FieldValue::CommitVersion); 20_000];
                let spec = spec(all_rows(), headers);
                batch.emit_encoded(&spec).map_err(TransformError::Batch)?;
            }
            "encode-wide" => {
                let value = FieldValue::Constant(Scalar::Text("x".repeat(16 * 1024)));
                let headers = vec![("h".to_string(), value); 1_000];
                let spec = spec(all_rows(), headers);
                batch.emit_encoded(&spec).map_err(TransformError::Batch)?;
            }
            "emit-flood" => {
                let empty = OutputRecord {
                    source_row: 0,
                    topic: None,
                    partition: None,
                    key: None,
                    value: None,
                    headers: Vec::new(),
                };
                let records = vec![empty; 100_000];
                loop {
                    batch.emit(&records);
                }
            }
            "packed-names" => {
                let headers_per_record = 10;
                let records = 100_000;
                let packed = PackedRecords {
                    data: Vec::new(),
                    source_rows: vec![0; records],
                    key_lengths: vec![-1; records],
                    value_lengths: vec![-1; records],
                    topics: Vec::new(),
                    topic_indexes: Vec::new(),
                    partitions: Vec::new(),
                    header_names: vec!["n".repeat(64 * 1024)],
                    header_counts: vec![headers_per_record; records],
                    header_name_indexes: vec![0; records * headers_per_record as usize],
                    header_value_lengths: vec![0; records * headers_per_record as usize],
                };
                batch.emit_packed(&packed);
            }
            "select-within" => {
                let predicate = Predicate {
                    column: "documentId".to_string(),
                    op: Comparison::IsNotNull,
                    value: Scalar::Null,
                };
                let within = vec![0; 5_000_000];
                let rows = batch
                    .select_where(&predicate, Some(&within))
                    .map_err(TransformError::Batch)?;
                std::hint::black_box(rows);
            }
            "reject-flood" => {
                let message = "x".repeat(4096);
                for i in 0..250_000u32 {
                    batch.reject(i % rows, &message);
                }
            }
            "sleep" => std::thread::sleep(std::time::Duration::from_secs(3600)),
            "random" => {
                let bytes = wasip2::random::random::get_random_bytes(1 << 40);
                std::hint::black_box(bytes);
            }
            "handles" => loop {
                std::mem::forget(wasip2::clocks::monotonic_clock::subscribe_duration(0));
            },
            "stderr-flood" => {
                let chunk = "e".repeat(1024 * 1024);
                loop {
                    eprintln!("{chunk}");
                }
            }
            "state-hoard" => {
                let value = vec![7u8; 256 * 1024];
                for key in 0u64.. {
                    sluice_transform_sys::sluice::transform::state::put(&key.to_be_bytes(), &value);
                }
            }
            _ => {
                let spec = EncodeSpec {
                    key: Some(FieldValue::Column("documentId".to_string())),
                    ..spec(all_rows(), Vec::new())
                };
                batch.emit_encoded(&spec).map_err(TransformError::Batch)?;
            }
        }
        Ok(())
    }
}

/// An `emit-encoded` spec over `rows`: values as JSON rows, no key.
fn spec(rows: Vec<u32>, headers: Vec<(String, FieldValue)>) -> EncodeSpec {
    EncodeSpec {
        rows,
        key: None,
        value: ValueEncoding::JsonRow,
        delete_as_tombstone: false,
        topic: None,
        headers,
    }
}

#[cfg(target_arch = "wasm32")]
sluice_transform_sys::export_transformer!(HostHogs with_types_in sluice_transform_sys);
