//! A test fixture written against the raw bindings, so it can break the contract in
//! ways the SDK never would. Parameters:
//! - `behavior`: `reject` (reject the bad rows, emit the others), `error-row` (fail the
//!   batch naming its first bad row), `foreign-topic` (emit the bad rows' records to the
//!   topic `topic` names, the others to the pipeline's), `panic`, `loop`, `hog` (grow
//!   memory without end), `giant` (1 MiB value per row), `malformed` (packed lengths
//!   that do not add up), `flood` (10,000 log messages per batch) — every behavior but
//!   `reject`, `error-row` and `foreign-topic` applies only to batches holding a bad
//!   row;
//! - `bad_ids`: comma-separated `documentId`s that count as bad (default none);
//! - `topic`: the topic of the bad rows' records under `foreign-topic`;
//! - `note`: added to each rejection's reason, which is then also logged (default
//!   none): how tests put text of their own into logs and dead letters.
//!
//! Good rows become records keyed by `documentId` with the change type as value.

use std::cell::RefCell;

use sluice_transform_sys::exports::sluice::transform::transformer::Guest;
use sluice_transform_sys::sluice::transform::host::{self, Batch};
use sluice_transform_sys::sluice::transform::types::{
    ColumnValues, LogLevel, PackedRecords, RowError, TransformError,
};

struct Settings {
    behavior: String,
    bad_ids: Vec<String>,
    note: String,
    topic: String,
}

thread_local! {
    static SETTINGS: RefCell<Option<Settings>> = const { RefCell::new(None) };
}

/// The fixture's transformer, exported on Wasm targets.
pub struct Misbehaving;

impl Guest for Misbehaving {
    fn init(params: Vec<(String, String)>) -> Result<(), String> {
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let settings = Settings {
            behavior: get("behavior"),
            bad_ids: get("bad_ids")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            note: get("note"),
            topic: get("topic"),
        };
        SETTINGS.with(|s| *s.borrow_mut() = Some(settings));
        Ok(())
    }

    fn transform(batch: &Batch) -> Result<(), TransformError> {
        SETTINGS.with(|s| run(s.borrow().as_ref().expect("init ran"), batch))
    }
}

fn run(settings: &Settings, batch: &Batch) -> Result<(), TransformError> {
    let columns = batch
        .columns(&["documentId".to_string()])
        .map_err(TransformError::Batch)?;
    let ids = match &columns[0].values {
        ColumnValues::Utf8(ids) => ids.clone(),
        _ => return Err(TransformError::Batch("documentId is not a string".into())),
    };
    let changes = batch.change_types();
    let is_bad = |id: &Option<String>| {
        id.as_ref()
            .is_some_and(|id| settings.bad_ids.iter().any(|bad| bad == id))
    };
    let first_bad = ids.iter().position(is_bad);
    if first_bad.is_some() {
        match settings.behavior.as_str() {
            "panic" => panic!("this batch holds a poisoned deal"),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "hog" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 16 * 1024 * 1024]);
                    std::hint::black_box(&hoard);
                }
            }
            "giant" => {
                let value = vec![b'x'; 1024 * 1024];
                for row in 0..ids.len() as u32 {
                    let mut packed = empty();
                    packed.source_rows.push(row);
                    packed.key_lengths.push(-1);
                    packed.value_lengths.push(value.len() as i32);
                    packed.data.extend_from_slice(&value);
                    batch.emit_packed(&packed);
                }
                return Ok(());
            }
            "malformed" => {
                let mut packed = empty();
                packed.source_rows.push(0);
                packed.key_lengths.push(10);
                packed.value_lengths.push(10);
                packed.data.extend_from_slice(b"short");
                batch.emit_packed(&packed);
                return Ok(());
            }
            "flood" => {
                for i in 0..10_000 {
                    host::log(LogLevel::Warn, &format!("flood message {i}"));
                }
            }
            "error-row" => {
                let row = first_bad.unwrap_or_default() as u32;
                return Err(TransformError::Row(RowError {
                    row,
                    message: format!(
                        "deal {} is poisoned",
                        ids[row as usize].as_deref().unwrap_or("?")
                    ),
                }));
            }
            _ => {}
        }
    }
    let mut packed = empty();
    let foreign_topic = settings.behavior == "foreign-topic";
    if foreign_topic {
        packed.topics.push(settings.topic.clone());
    }
    for (row, (id, change)) in ids.iter().zip(changes).enumerate() {
        if foreign_topic {
            // Index 1 is `topics[0]`, 0 the pipeline's own topic.
            packed.topic_indexes.push(u32::from(is_bad(id)));
        } else if is_bad(id) {
            let mut reason = format!("deal {} is poisoned", id.as_deref().unwrap_or("?"));
            if !settings.note.is_empty() {
                reason = format!("{reason}: {}", settings.note);
                host::log(LogLevel::Warn, &reason);
            }
            batch.reject(row as u32, &reason);
            continue;
        }
        let key = id.as_deref().unwrap_or_default().as_bytes();
        let value = format!("{change:?}");
        packed.source_rows.push(row as u32);
        packed.key_lengths.push(key.len() as i32);
        packed.data.extend_from_slice(key);
        packed.value_lengths.push(value.len() as i32);
        packed.data.extend_from_slice(value.as_bytes());
    }
    batch.emit_packed(&packed);
    Ok(())
}

fn empty() -> PackedRecords {
    PackedRecords {
        data: Vec::new(),
        source_rows: Vec::new(),
        key_lengths: Vec::new(),
        value_lengths: Vec::new(),
        topics: Vec::new(),
        topic_indexes: Vec::new(),
        partitions: Vec::new(),
        header_names: Vec::new(),
        header_counts: Vec::new(),
        header_name_indexes: Vec::new(),
        header_value_lengths: Vec::new(),
    }
}

#[cfg(target_arch = "wasm32")]
sluice_transform_sys::export_transformer!(Misbehaving with_types_in sluice_transform_sys);
