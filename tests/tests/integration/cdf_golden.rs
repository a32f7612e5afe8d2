//! The change feed reader against Spark's `table_changes()`: for every table and
//! version range in `tests/golden/cdf/manifest.json` (Spark, Databricks and DLT tables in
//! `tests/data/delta-tables`, and generated tables in `tests/data/cdf`), the rows Sluice
//! reads equal the rows Spark returned, or both refuse the range. The golden files come
//! from `tests/support/spark_changes.py`; `tests/support/compare_changes.py` compares.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use sluice_source::arrow::array::{ArrayRef, RecordBatch, new_null_array};
use sluice_source::arrow::datatypes::{Field, Schema, SchemaRef};
use sluice_source::arrow::ipc::writer::FileWriter;
use sluice_source::{ChangeFeed, Position, Preceded, SourceError, SourceOptions};
use sluice_tests::repo_root;

/// Ranges where the kernel and Spark disagree, and why. Each must still disagree, so a
/// kernel upgrade that changes the answer is noticed.
///
/// `kernel/cdf-table-with-dv` is a hand-made kernel fixture whose version 5 replaces a
/// file's deletion vector with a smaller one that covers a row the old one did not (no
/// engine writes that: deletion vectors only grow until the file is rewritten). The
/// kernel reads the new vector as deleting value 3 (a delete at version 5, an insert at
/// version 6 when the vector is dropped); Spark's own snapshots of versions 5 and 6
/// both still hold value 3, and its change feed agrees with them.
const KNOWN_DIFFERENCES: &[(&str, u64, u64)] = &[
    ("external:kernel/cdf-table-with-dv", 0, 6),
    ("external:kernel/cdf-table-with-dv", 1, 5),
    ("external:kernel/cdf-table-with-dv", 5, 5),
    ("external:kernel/cdf-table-with-dv", 6, 6),
];

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden/cdf")
}

fn table_path(name: &str) -> PathBuf {
    match name.split_once(':') {
        Some(("external", rest)) => repo_root().join("tests/data/delta-tables").join(rest),
        Some(("generated", rest)) => repo_root().join("tests/data/cdf").join(rest),
        _ => panic!("unknown table reference {name} in the manifest"),
    }
}

/// Reads `start..=end`, in small batches so that batching is exercised too.
fn read(table: &Path, start: u64, end: u64) -> Result<Vec<RecordBatch>, SourceError> {
    let options = SourceOptions {
        batch_rows: 3,
        ..SourceOptions::default()
    };
    let feed = ChangeFeed::open(table.to_str().unwrap(), options)?;
    feed.read(Position::at_version(start), end, Preceded::Nothing)?
        .map(|batch| batch.map(|b| b.batch))
        .collect()
}

/// The batches under the last batch's schema: columns a batch lacks (added by a later
/// version) are nulls, as Spark shows them.
fn unify(batches: &[RecordBatch]) -> Option<(SchemaRef, Vec<RecordBatch>)> {
    let last = batches.last()?.schema();
    let schema: SchemaRef = Arc::new(Schema::new(
        last.fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let unified = batches
        .iter()
        .map(|batch| {
            let columns: Vec<ArrayRef> = schema
                .fields()
                .iter()
                .map(|field| match batch.column_by_name(field.name()) {
                    Some(column) => column.clone(),
                    None => new_null_array(field.data_type(), batch.num_rows()),
                })
                .collect();
            RecordBatch::try_new(schema.clone(), columns).expect("the columns fit the schema")
        })
        .collect();
    Some((schema, unified))
}

fn write_arrow(path: &Path, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let Some((schema, batches)) = unify(batches) else {
        return;
    };
    let mut writer = FileWriter::try_new(file, &schema).unwrap();
    for batch in &batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
}

fn compare(golden: &Path, arrow: &Path) -> Result<(), String> {
    let output = Command::new("python3")
        .arg(repo_root().join("tests/support/compare_changes.py"))
        .arg("--golden")
        .arg(golden)
        .arg("--arrow")
        .arg(arrow)
        .output()
        .expect("python3 runs");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[test]
fn every_range_equals_spark_table_changes() {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(golden_dir().join("manifest.json")).unwrap())
            .unwrap();
    let work = tempfile::tempdir().unwrap();
    let (mut checked, mut refused, mut differing) = (0, 0, 0);
    let mut failures = Vec::new();
    for table in manifest["tables"].as_array().unwrap() {
        let name = table["table"].as_str().unwrap();
        let path = table_path(name);
        for range in table["ranges"].as_array().unwrap() {
            let (start, end) = (
                range["start"].as_u64().unwrap(),
                range["end"].as_u64().unwrap(),
            );
            let label = format!("{name} {start}..={end}");
            let result = read(&path, start, end);
            if let Some(class) = range["error_class"].as_str() {
                let expected = match class {
                    "DELTA_MISSING_CHANGE_DATA" => "did not have the change data feed enabled",
                    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA" => {
                        "changed its schema at version"
                    }
                    _ => "",
                };
                match result {
                    Err(e) if e.to_string().contains(expected) => {
                        refused += 1;
                        eprintln!("{label}: refused like Spark ({class}): {e}");
                    }
                    Err(e) => failures.push(format!(
                        "{label}: Spark refuses ({class}); Sluice's message lacks {expected:?}: {e}"
                    )),
                    Ok(rows) => failures.push(format!(
                        "{label}: Spark refuses ({class}) but Sluice read {} batches",
                        rows.len()
                    )),
                }
                continue;
            }
            let batches = match result {
                Ok(batches) => batches,
                Err(e) => {
                    failures.push(format!("{label}: {e}"));
                    continue;
                }
            };
            // Spark shows early versions under the table's latest schema; Sluice shows
            // them as they were, which Spark answered too.
            let golden = range["golden_end_schema"]
                .as_str()
                .or(range["golden"].as_str())
                .unwrap();
            let arrow = work
                .path()
                .join(format!("{name}-{start}-{end}.arrow").replace([':', '/'], "_"));
            write_arrow(&arrow, &batches);
            let known = KNOWN_DIFFERENCES.contains(&(name, start, end));
            match (compare(&golden_dir().join(golden), &arrow), known) {
                (Ok(()), false) => checked += 1,
                (Err(_), true) => differing += 1,
                (Ok(()), true) => failures.push(format!(
                    "{label}: now equals Spark's rows; remove it from KNOWN_DIFFERENCES"
                )),
                (Err(diff), false) => {
                    failures.push(format!("{label}: rows differ from Spark's\n{diff}"))
                }
            }
        }
    }
    eprintln!(
        "{checked} ranges equal Spark's rows; {refused} refused like Spark; {differing} known differences"
    );
    assert!(
        failures.is_empty(),
        "{} of {} ranges differ:\n{}",
        failures.len(),
        checked + refused + differing + failures.len(),
        failures.join("\n")
    );
}
