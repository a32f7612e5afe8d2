//! Sluice's Debezium change events read by real Debezium-format readers, from the events
//! a pipeline wrote of a real Delta table's change feed into the real broker: Flink SQL's
//! `debezium-json` format (Flink's own deserializer, `tests/support/flink-debezium`) and
//! a Kafka Connect sink's path for Avro (a registry-backed AvroConverter and Debezium's
//! `ExtractNewRecordState`, `tests/support/connect-debezium`), every field they read
//! checked against the change feed; Confluent's JSON Schema deserializer validates the
//! events against the envelope's registered schema.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sluice_tests::{
    Extra, PipelineFiles, connect_debezium_read, consume_all, deals_table, flink_debezium_read,
    kafka_bootstrap, registry_decoded, registry_url, repo_root, run_to_latest, transform_component,
    unique_topic,
};

/// gold-deals' columns as a Flink table declares them.
const COLUMNS: [&str; 10] = [
    "documentId:STRING",
    "eventTimestamp:TIMESTAMP_LTZ",
    "owner_id:STRING",
    "owner_type:STRING",
    "account_id:STRING",
    "manager_account_id:STRING",
    "hubspot_deal_id:STRING",
    "stage:STRING",
    "status:STRING",
    "title:STRING",
];

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The table's change feed, read from its log and Parquet files without a Delta library
/// (`tests/support/expected_changes.py`).
fn change_feed(table: &Path) -> Vec<Value> {
    let output = Command::new("python3")
        .arg(repo_root().join("tests/support/expected_changes.py"))
        .arg(table)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "expected_changes.py failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Milliseconds since the epoch of an ISO-8601 instant in UTC.
fn millis(text: &str) -> i64 {
    let time = humantime::parse_rfc3339_weak(&text.replace("+00:00", "Z")).unwrap();
    time.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A change row as gold-deals-helpers writes it, in Flink's terms.
fn gold(change: &Value) -> Value {
    let document = &change["fullDocument"];
    let text = |value: &Value| value.as_str().map_or(Value::Null, |s| json!(s));
    // Spark's substring(owner_id, 11, 24): the ObjectId's hex digits.
    let cut = |value: &Value| {
        value.as_str().map_or(Value::Null, |s| {
            json!(s.chars().skip(10).take(24).collect::<String>())
        })
    };
    json!({
        "documentId": text(&change["documentId"]),
        "eventTimestamp": millis(change["eventTimestamp"].as_str().unwrap()),
        "owner_id": cut(&document["owner_id"]),
        "owner_type": text(&document["owner_type"]),
        "account_id": cut(&document["account_id"]),
        "manager_account_id": cut(&document["manager_account_id"]),
        "hubspot_deal_id": text(&document["hubspot_deal_id"]),
        "stage": text(&document["stage"]),
        "status": text(&document["status"]),
        "title": text(&document["title"]),
    })
}

/// The commit timestamp of `version` in milliseconds: without in-commit timestamps,
/// Delta's is the modification time of the version's log file.
fn commit_millis(table: &Path, version: u64) -> i64 {
    let log = table.join(format!("_delta_log/{version:020}.json"));
    let modified = std::fs::metadata(&log).unwrap().modified().unwrap();
    modified.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Flink's metadata columns for an event of commit `version` of `table` that pipeline
/// `name` wrote (but `ingestion-timestamp`, when Sluice made the event).
fn flink_metadata(table: &Path, name: &str, version: u64, snapshot: bool) -> Value {
    let location = table.display().to_string();
    let commit = commit_millis(table, version);
    json!({
        "source.timestamp": commit,
        "source.database": "delta",
        "source.schema": null,
        "source.table": location,
        "source.properties": {
            "version": env!("CARGO_PKG_VERSION"),
            "connector": "sluice",
            "name": name,
            "ts_ms": commit.to_string(),
            "snapshot": snapshot.to_string(),
            "db": "delta",
            "sequence": null,
            "ts_us": (commit * 1000).to_string(),
            "ts_ns": (commit * 1_000_000).to_string(),
            "table": location,
            "commit_version": version.to_string(),
        },
    })
}

/// A row Flink emits: its kind, the row in Flink's terms, the metadata columns.
fn flink_row(kind: &str, change: &Value, metadata: Value) -> Value {
    let mut row = metadata;
    row["kind"] = json!(kind);
    row["row"] = gold(change);
    row
}

/// Every row Flink should emit for the changes after version `after` (all with `None`)
/// of `table`, which pipeline `name` read: one `-U`/`+U` pair per update, each with the
/// metadata columns of its commit.
fn expected_rows(table: &Path, name: &str, after: Option<u64>) -> Vec<Value> {
    change_feed(table)
        .iter()
        .filter(|change| Some(change["_commit_version"].as_u64().unwrap()) > after)
        .map(|change| {
            let kind = match change["_change_type"].as_str().unwrap() {
                "insert" => "+I",
                "update_preimage" => "-U",
                "update_postimage" => "+U",
                "delete" => "-D",
                other => panic!("change type {other}"),
            };
            let version = change["_commit_version"].as_u64().unwrap();
            flink_row(kind, change, flink_metadata(table, name, version, false))
        })
        .collect()
}

/// The rows of `table` as of `version`, by its change feed.
fn rows_at(table: &Path, version: u64) -> Vec<Value> {
    let mut rows: std::collections::BTreeMap<String, Value> = Default::default();
    let mut changes = change_feed(table);
    changes.retain(|change| change["_commit_version"].as_u64().unwrap() <= version);
    changes.sort_by_key(|change| change["_commit_version"].as_u64());
    for change in changes {
        let key = change["documentId"].as_str().unwrap().to_string();
        match change["_change_type"].as_str().unwrap() {
            "insert" | "update_postimage" => {
                rows.insert(key, change);
            }
            "delete" => {
                rows.remove(&key);
            }
            _ => {}
        }
    }
    rows.into_values().collect()
}

fn sorted_texts(rows: &[Value]) -> Vec<String> {
    let mut texts: Vec<String> = rows.iter().map(Value::to_string).collect();
    texts.sort();
    texts
}

/// `[sink]` lines that write `value` format Debezium events with the test registry.
fn registry_sink(value: &str) -> String {
    format!(
        "[sink.encoding]\nvalue = \"{value}\"\nenvelope = \"debezium\"\n[sink.schema_registry]\nurl = \"{}\"\n",
        registry_url()
    )
}

/// The scenario's deals table and a pipeline that writes gold-deals-helpers' events of
/// every change type, pre-images too, to a topic of its own with `[source]` lines
/// `source` and `[sink]` lines `sink`.
struct Scenario {
    table: std::path::PathBuf,
    topic: String,
    files: PipelineFiles,
}

impl Scenario {
    fn new(work: &Path, topic: &str, source: &str, sink: &str) -> Scenario {
        let table = work.join("deals");
        deals_table(&table, &["scenario"]);
        let topic = unique_topic(topic);
        let files = PipelineFiles::new(
            &table,
            &transform_component("gold-deals-helpers"),
            &topic,
            &kafka_bootstrap(),
            Extra {
                source,
                sink,
                params: "change_types = \"insert,update_preimage,update_postimage,delete\"",
                ..Extra::default()
            },
        );
        Scenario {
            table,
            topic,
            files,
        }
    }

    /// Runs the pipeline to the table's latest version.
    fn run(&self) {
        run_to_latest(&self.files.config);
    }
}

/// JSON Debezium events, to which `source` lines apply.
const JSON_EVENTS: &str = "[sink.encoding]\nenvelope = \"debezium\"\n";

/// Runs `scenario` and has Flink's `debezium-json` read its topic: the rows Flink
/// emitted, checked against the raw events for what Flink does not read (`ts_us`,
/// `ts_ns`, `transaction`) and with `ingestion-timestamp` (the envelope's `ts_ms`, when
/// Sluice made the event) checked and taken out; a tombstone must follow each delete.
fn flink_rows(scenario: &Scenario) -> Vec<Value> {
    let started = now_millis();
    scenario.run();
    let finished = now_millis();
    let records = consume_all(&scenario.topic);
    let values: Vec<Option<String>> = records.iter().map(|r| r.value.clone()).collect();
    let read = flink_debezium_read(&COLUMNS, &values);
    assert_eq!(read.len(), records.len(), "one answer per record");

    let mut emitted = Vec::new();
    let mut versions: HashMap<String, Vec<u64>> = HashMap::new();
    for (i, (record, rows)) in records.iter().zip(&read).enumerate() {
        let key = record.key.clone().unwrap();
        let rows = rows.as_array().unwrap();
        let Some(value) = &record.value else {
            // A tombstone: Flink skips it; Sluice writes one after each delete.
            assert!(rows.is_empty(), "{rows:?}");
            let before = &read[i - 1][0];
            assert_eq!(
                (
                    before["kind"].as_str(),
                    before["row"]["documentId"].as_str()
                ),
                (Some("-D"), Some(key.as_str())),
                "the tombstone of {key} follows its delete"
            );
            continue;
        };
        let raw: Value = serde_json::from_str(value).unwrap();
        let (ms, us, ns) = (
            raw["ts_ms"].as_i64().unwrap(),
            raw["ts_us"].as_i64().unwrap(),
            raw["ts_ns"].as_i64().unwrap(),
        );
        assert_eq!((us / 1000, ns / 1000), (ms, us), "{value}");
        assert!((started..=finished).contains(&ms), "{value}");
        assert_eq!(raw["transaction"], Value::Null, "{value}");
        let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
        let expected_kinds: &[&str] = match raw["op"].as_str().unwrap() {
            "c" | "r" => &["+I"],
            "u" => &["-U", "+U"],
            "d" => &["-D"],
            op => panic!("op {op} in {value}"),
        };
        assert_eq!(kinds, expected_kinds, "{value}");
        for row in rows {
            let mut row = row.clone();
            let ingested = row.as_object_mut().unwrap().remove("ingestion-timestamp");
            assert_eq!(ingested, Some(json!(ms)), "{value}");
            assert_eq!(row["row"]["documentId"], key.as_str(), "{value}");
            let version = row["source.properties"]["commit_version"].as_str().unwrap();
            versions
                .entry(key.clone())
                .or_default()
                .push(version.parse().unwrap());
            emitted.push(row);
        }
    }
    // A key's events come in commit order.
    for (key, versions) in &versions {
        assert!(versions.is_sorted(), "{key}: {versions:?}");
    }
    emitted
}

#[test]
fn flinks_debezium_json_reads_every_field_of_the_events_as_the_change_feed_has_it() {
    let work = tempfile::tempdir().unwrap();
    let scenario = Scenario::new(work.path(), "debezium-flink", "", JSON_EVENTS);
    let emitted = flink_rows(&scenario);
    let expected = expected_rows(&scenario.table, &scenario.topic, None);
    assert_eq!(
        sorted_texts(&emitted),
        sorted_texts(&expected),
        "what Flink read against the change feed"
    );
    // The scenario: 31 creates, 3 updates, 2 deletes (see scripts/deals_table.py).
    let count = |kind: &str| emitted.iter().filter(|r| r["kind"] == kind).count();
    assert_eq!(
        (count("+I"), count("+U"), count("-D")),
        (31, 3, 2),
        "{emitted:?}"
    );
}

#[test]
fn flinks_debezium_json_reads_an_initial_snapshot_as_the_tables_rows_then_its_changes() {
    let work = tempfile::tempdir().unwrap();
    // Version 2 won deals 3 and 7; deletes and a merge follow it.
    let start = 2;
    let scenario = Scenario::new(
        work.path(),
        "debezium-snapshot",
        &format!("snapshot = true\nstarting_version = {start}"),
        JSON_EVENTS,
    );
    let emitted = flink_rows(&scenario);
    let (table, topic) = (&scenario.table, &scenario.topic);
    // Each row as of the start is an `r` (Flink's +I) of that version, marked as a
    // snapshot's; the changes after it follow as always.
    let snapshot = rows_at(table, start);
    let mut expected: Vec<Value> = snapshot
        .iter()
        .map(|row| flink_row("+I", row, flink_metadata(table, topic, start, true)))
        .collect();
    expected.extend(expected_rows(table, topic, Some(start)));
    assert_eq!(
        sorted_texts(&emitted),
        sorted_texts(&expected),
        "what Flink read against the table's rows and changes"
    );
    let reads = consume_all(topic)
        .iter()
        .filter_map(|r| r.value.as_deref())
        .filter(|v| serde_json::from_str::<Value>(v).unwrap()["op"] == "r")
        .count();
    assert_eq!(reads, snapshot.len());
}

#[test]
fn json_schema_events_validate_against_their_registered_schema_in_confluents_reader() {
    let work = tempfile::tempdir().unwrap();
    let sink = registry_sink("json-schema");
    let scenario = Scenario::new(work.path(), "debezium-json-schema", "", &sink);
    scenario.run();
    let topic = &scenario.topic;
    // Confluent's JSONDeserializer validates each value against the registered schema.
    let decoded = registry_decoded(topic, "json-schema", &["--keep-nulls"]);
    let written: Vec<String> = consume_all(topic)
        .iter()
        .map(|record| {
            // The event after Confluent's frame (the magic byte and the schema id).
            let value = record
                .value
                .as_ref()
                .map_or("<tombstone>".to_string(), |v| {
                    v[v.find("{\"before\":").unwrap()..].to_string()
                });
            format!("{}\t{value}", record.key.as_deref().unwrap_or_default())
        })
        .collect();
    assert_eq!(decoded, written);
    assert_eq!(decoded.len(), 36 + 2, "36 events and 2 tombstones");
}

/// The envelope and source fields the Kafka Connect sink's transform adds to each row.
const ADD_FIELDS: &str = "op,ts_ms,ts_us,ts_ns,version,connector,name,source.ts_ms,source.ts_us,source.ts_ns,snapshot,db,sequence,table,commit_version,transaction.id,transaction.total_order,transaction.data_collection_order";

#[test]
fn a_kafka_connect_sink_unwraps_the_avro_events_with_debeziums_transform() {
    let work = tempfile::tempdir().unwrap();
    let sink = registry_sink("avro");
    let scenario = Scenario::new(work.path(), "debezium-connect", "", &sink);
    let started = now_millis();
    scenario.run();
    let finished = now_millis();
    let (table, topic) = (&scenario.table, &scenario.topic);
    let read = connect_debezium_read(topic, ADD_FIELDS);

    // Debezium's transform unwraps only an envelope named `<...>.Envelope`, into its
    // row's record: here `<pipeline>.delta.deals.Value`.
    let row_record = format!("{}.delta.deals.Value", topic.replace('-', "_"));
    let mut rows = Vec::new();
    for record in read.iter().filter(|r| !r.is_null()) {
        assert_eq!(record["schema"], row_record.as_str(), "{record}");
        let mut row = record["value"].clone();
        let fields = row.as_object_mut().unwrap();
        let (ms, us, ns) = (
            fields.remove("__ts_ms").unwrap().as_i64().unwrap(),
            fields.remove("__ts_us").unwrap().as_i64().unwrap(),
            fields.remove("__ts_ns").unwrap().as_i64().unwrap(),
        );
        assert_eq!((us / 1000, ns / 1000), (ms, us), "{record}");
        assert!((started..=finished).contains(&ms), "{record}");
        rows.push(row);
    }
    // The tombstones after the deletes are dropped.
    assert_eq!(read.len() - rows.len(), 2, "{read:?}");

    let location = table.display().to_string();
    let expected: Vec<Value> = change_feed(table)
        .iter()
        .filter_map(|change| {
            let (op, deleted) = match change["_change_type"].as_str().unwrap() {
                "insert" => ("c", "false"),
                "update_postimage" => ("u", "false"),
                "delete" => ("d", "true"),
                _ => return None,
            };
            let version = change["_commit_version"].as_u64().unwrap();
            let commit = commit_millis(table, version);
            let mut row = gold(change);
            // Avro's timestamp-micros, which Kafka Connect's Avro data keeps a long.
            row["eventTimestamp"] = json!(row["eventTimestamp"].as_i64().unwrap() * 1000);
            let added = json!({
                "__deleted": deleted,
                "__op": op,
                "__version": env!("CARGO_PKG_VERSION"),
                "__connector": "sluice",
                "__name": topic,
                "__source_ts_ms": commit,
                "__source_ts_us": commit * 1000,
                "__source_ts_ns": commit * 1_000_000,
                "__snapshot": "false",
                "__db": "delta",
                "__sequence": null,
                "__table": location,
                "__commit_version": version,
                "__transaction_id": null,
                "__transaction_total_order": null,
                "__transaction_data_collection_order": null,
            });
            row.as_object_mut()
                .unwrap()
                .extend(added.as_object().unwrap().clone());
            Some(row)
        })
        .collect();
    assert_eq!(
        sorted_texts(&rows),
        sorted_texts(&expected),
        "what the sink read against the change feed"
    );
}
