//! Measures the transform boundary on the motivating workload: the gold-deals
//! transform over batches shaped like the bronze deals table (a struct of eight
//! strings, a timestamp, change columns; 80% of rows kept, JSON-encoded, keyed).
//!
//! Paths, all in this process on the same batch:
//! - `native`: the transform's Rust code called directly (the limit);
//! - `guest arrow`: the same code as a Wasm component reading Arrow IPC and returning
//!   packed records (the contract's fast path);
//! - `guest typed`: the same component reading the contract's typed columns;
//! - `guest helpers`: `gold-deals-helpers`, which only describes the work and lets the
//!   host select and encode natively;
//! - `python helpers`, `js helpers`, `c helpers`: gold-deals in Python
//!   (componentize-py), JavaScript (componentize-js) and C (clang), the same
//!   description through each language's SDK; skipped when the toolchain cannot be
//!   installed.
//!
//! Then the pass-through transform in each language, which reads every value of every
//! row itself: what row-by-row code costs in each guest language. Last, bytes a module
//! encodes itself with its own schema (`emit-framed`): the Rust pass-through's JSON
//! framed with a JSON Schema (the cost of the host's check and frame against `rust
//! rows`), and `own-schema`'s hand-encoded JSON, Avro and Protobuf.
//!
//! Each guest timing covers everything a pipeline pays per batch: the host's
//! conversion, the call, the guest's decoding and work, and unpacking the records.
//! Usage: `cargo run -p sluice-bench -- [ROWS] [ITERATIONS]` (default 100000 5).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use arrow_array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use sluice_engine::{EngineConfig, TransformEngine};
use sluice_transform::{Batch, Output, Params, Transform};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let iterations: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let batch = bronze_batch(rows);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("bench/ has a parent")?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("guests");
    let options = sluice_build::BuildOptions::new(target.clone(), target.join("components"));
    let build = |name: &str| {
        sluice_build::build_transform(&root.join("transforms").join(name), &options)
            .map(|built| built.component)
    };
    let gold = build("gold-deals")?;
    let helpers = build("gold-deals-helpers")?;

    println!("gold-deals on {rows}-row batches, best of {iterations} (2 cores, this machine)");
    println!(
        "{:<16} {:>12} {:>10} {:>10} {:>9}",
        "path", "rows/s", "batch ms", "records", "vs native"
    );

    let native = measure(iterations, || {
        let mut transform = gold_deals::GoldDeals::init(&Params::default()).expect("init");
        let mut out = Output::default();
        transform
            .transform(&Batch::from_arrow(batch.clone()), &mut out)
            .expect("transform");
        out.records().len()
    });
    report("native", rows, native, native.0);

    let engine = TransformEngine::new(EngineConfig::default())?;
    let typed = vec![("sluice.input".to_string(), "typed".to_string())];
    let mut paths = vec![
        ("guest arrow", gold.clone(), vec![]),
        ("guest typed", gold, typed),
        ("guest helpers", helpers, vec![]),
    ];
    for (path, name) in [
        ("python helpers", "gold-deals-python"),
        ("js helpers", "gold-deals-js"),
        ("c helpers", "gold-deals-c"),
        ("go helpers", "gold-deals-go"),
    ] {
        match build(name) {
            Ok(module) => paths.push((path, module, vec![])),
            Err(e) => println!("({path} skipped: {e})"),
        }
    }
    for (path, module, params) in &paths {
        let module = engine.load(module)?;
        let mut instance = module.instantiate(params, Arc::default())?;
        let timing = measure(iterations, || {
            instance.transform(&batch).expect("transform").records.len()
        });
        report(path, rows, timing, native.0);
    }

    println!();
    println!("pass-through, every value read row by row by the guest; vs the Rust module");
    let mut rust_rows = None;
    for (path, name) in [
        ("rust rows", "passthrough"),
        ("js rows", "passthrough-js"),
        ("python rows", "passthrough-python"),
        ("c rows", "passthrough-c"),
        ("go rows", "passthrough-go"),
    ] {
        let module = match build(name) {
            Ok(module) => engine.load(&module)?,
            Err(e) => {
                println!("({path} skipped: {e})");
                continue;
            }
        };
        let mut instance = module.instantiate(&[], Arc::default())?;
        // An interpreted guest may pass its deadline or memory cap on a large batch,
        // on the first call or a later one (its heap grows): reported, not measured.
        let mut failed = instance.transform(&batch).err();
        let timing = measure(iterations, || match instance.transform(&batch) {
            Ok(output) => output.records.len(),
            Err(e) => {
                failed.get_or_insert(e);
                0
            }
        });
        if let Some(e) = failed {
            let first_line = e.to_string();
            let first_line = first_line.lines().next().unwrap_or_default().to_string();
            println!("({path} failed on a {rows}-row batch: {first_line})");
            continue;
        }
        let baseline = *rust_rows.get_or_insert(timing.0);
        report(path, rows, timing, baseline);
    }

    println!();
    println!(
        "bytes the module encodes itself, checked and framed by the host (emit-framed); vs rust rows"
    );
    let schema = r#"{"type":"object","title":"Change","required":["_change_type"]}"#;
    let param = |name: &str, value: &str| vec![(name.to_string(), value.to_string())];
    for (path, name, params) in [
        (
            "rust rows framed",
            "passthrough",
            param("json_schema", schema),
        ),
        (
            "own json-schema",
            "own-schema",
            param("format", "json-schema"),
        ),
        ("own avro", "own-schema", param("format", "avro")),
        ("own protobuf", "own-schema", param("format", "protobuf")),
    ] {
        let module = engine.load(&build(name)?)?;
        let mut instance = module.instantiate(&params, Arc::default())?;
        let timing = measure(iterations, || {
            instance.transform(&batch).expect("transform").records.len()
        });
        report(path, rows, timing, rust_rows.unwrap_or(timing.0));
    }
    Ok(())
}

/// The fastest of `iterations` runs and the record count it produced.
fn measure(iterations: usize, mut run: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = (Duration::MAX, 0);
    for _ in 0..iterations.max(1) {
        let start = Instant::now();
        let records = run();
        best = best.min((start.elapsed(), records));
    }
    best
}

fn report(path: &str, rows: usize, (time, records): (Duration, usize), native: Duration) {
    println!(
        "{path:<16} {:>12.0} {:>10.1} {records:>10} {:>8.0}%",
        rows as f64 / time.as_secs_f64(),
        time.as_secs_f64() * 1000.0,
        native.as_secs_f64() / time.as_secs_f64() * 100.0
    );
}

/// A batch shaped like the bronze deals table's change feed.
fn bronze_batch(rows: usize) -> RecordBatch {
    let object_id = |tag: u64, i: usize| format!("ObjectId('{:024x}')", tag * 1_000_000 + i as u64);
    let strings = |f: &dyn Fn(usize) -> Option<String>| -> ArrayRef {
        Arc::new((0..rows).map(f).collect::<StringArray>())
    };
    let names = [
        "owner_id",
        "owner_type",
        "account_id",
        "manager_account_id",
        "hubspot_deal_id",
        "stage",
        "status",
        "title",
    ];
    let document_columns = vec![
        strings(&|i| Some(object_id(0x65A1, i))),
        strings(&|_| Some("user".into())),
        strings(&|i| Some(object_id(0xACC0, i))),
        strings(&|i| (i % 5 != 0).then(|| object_id(0xBEEF, i))),
        strings(&|i| Some((900_000 + i).to_string())),
        strings(&|i| Some(["appointmentscheduled", "closedwon", "closedlost"][i % 3].into())),
        strings(&|_| Some("open".into())),
        strings(&|i| Some(format!("Deal {i} for \"Acme\" \u{e9}quipe"))),
    ];
    let fields = Fields::from(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    );
    let document = StructArray::new(fields.clone(), document_columns, None);
    let changes = [
        "insert",
        "insert",
        "insert",
        "insert",
        "insert",
        "insert",
        "update_preimage",
        "update_postimage",
        "delete",
        "insert",
    ];
    let timestamp = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let schema = Schema::new(vec![
        Field::new("documentId", DataType::Utf8, true),
        Field::new("eventTimestamp", timestamp.clone(), true),
        Field::new("fullDocument", DataType::Struct(fields), true),
        Field::new("_change_type", DataType::Utf8, false),
        Field::new("_commit_version", DataType::Int64, false),
        Field::new("_commit_timestamp", timestamp, false),
    ]);
    let micros = |i: usize| 1_705_314_600_000_000 + i as i64 * 1000;
    let columns: Vec<ArrayRef> = vec![
        strings(&|i| Some(format!("deal-{i:08}"))),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values((0..rows).map(micros)).with_timezone("UTC"),
        ),
        Arc::new(document),
        strings(&|i| Some(changes[i % changes.len()].into())),
        Arc::new(Int64Array::from_iter_values(
            (0..rows).map(|i| 1 + i as i64 / 10_000),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values((0..rows).map(micros)).with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("a consistent batch")
}
