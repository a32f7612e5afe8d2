//! Records in the formats schema-registry users read: the host helpers write Avro and
//! JSON Schema values (and Avro keys) in Confluent's wire format, optionally as
//! Debezium change events, registered in a real registry (Apicurio, started by
//! `scripts/test.sh`); Confluent's own Python deserializers read them back.

use std::path::Path;

use serde_json::Value;
use sluice_tests::{
    Extra, PipelineFiles, by_key, consume_all, create_topic, deals_table, kafka_bootstrap,
    kafka_run_file, oidc_url, preview_records, registry_decoded, registry_decoded_at, registry_url,
    repo_root, run_expecting_failure, run_to_latest, secured_registry_url, sluice_binary,
    sluice_check, transform_component, unique_topic,
};

/// gold-deals on the host helpers, in every SDK language.
const GOLD_DEALS_HELPERS: [&str; 5] = [
    "gold-deals-helpers",
    "gold-deals-js",
    "gold-deals-python",
    "gold-deals-c",
    "gold-deals-go",
];

/// `[sink]` lines that write values in `value` format (plus `more` lines of
/// `[sink.encoding]`) with the test registry.
fn encoding(value: &str, more: &str) -> String {
    format!(
        "[sink.encoding]\nvalue = \"{value}\"\n{more}\n[sink.schema_registry]\nurl = \"{}\"\n",
        registry_url()
    )
}

fn pipeline(table: &Path, module: &str, topic: &str, sink: &str, params: &str) -> PipelineFiles {
    PipelineFiles::new(
        table,
        &transform_component(module),
        topic,
        &kafka_bootstrap(),
        Extra {
            sink,
            params,
            ..Extra::default()
        },
    )
}

/// The registry's answer to a GET of `path` (under the Confluent API).
fn registry_get(path: &str) -> Value {
    ureq::get(format!("{}{path}", registry_url()))
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .body_mut()
        .read_to_string()
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap()
}

/// The motivating scenario's gold-deals records (key, tab, value), in key order.
fn gold_deals() -> Vec<String> {
    std::fs::read_to_string(repo_root().join("tests/golden/gold-deals.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn versions(subject: &str) -> Vec<u64> {
    let versions = registry_get(&format!("/subjects/{subject}/versions"));
    serde_json::from_value(versions).unwrap()
}

#[test]
fn avro_json_schema_and_protobuf_decode_to_the_motivating_records_in_every_sdk() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let golden = gold_deals();
    let proto = repo_root().join("tests/data/schemas/gold-deal.proto");
    let proto = proto.to_str().unwrap();
    let message = "crm.gold.Deal";
    for module in GOLD_DEALS_HELPERS {
        for format in ["avro", "json-schema", "protobuf"] {
            let topic = unique_topic(&format!("{module}-{format}"));
            let (more, flags) = match format {
                "protobuf" => (
                    format!("protobuf_schema = \"{proto}\"\nprotobuf_message = \"{message}\""),
                    vec!["--proto", proto, "--message", message],
                ),
                _ => (String::new(), Vec::new()),
            };
            let files = pipeline(&table, module, &topic, &encoding(format, &more), "");
            run_to_latest(&files.config);
            let got = by_key(registry_decoded(&topic, format, &flags));
            assert_eq!(got, golden, "{module} in {format}");
            assert_eq!(
                versions(&format!("{topic}-value")),
                [1],
                "{module} in {format}"
            );
        }
    }
}

#[test]
fn a_module_writing_its_own_value_bytes_is_refused_where_the_encoding_frames_values() {
    // The Rust gold-deals writes its JSON itself (emit-bytes, for speed): under
    // value = "avro" its records would reach consumers without a schema id.
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic("own-bytes-avro");
    let files = pipeline(&table, "gold-deals", &topic, &encoding("avro", ""), "");
    let (passed, report) = sluice_check(&files.config);
    assert!(
        !passed
            && report.contains("writes record values of the first batch as bytes of its own")
            && report.contains("value = \"avro\""),
        "{report}"
    );
    let stderr = run_expecting_failure(&files.config);
    assert!(
        stderr.contains("the module wrote a record's value as bytes of its own")
            && stderr.contains("[sink.encoding] value = \"avro\""),
        "{stderr}"
    );
    assert!(consume_all(&topic).is_empty(), "nothing is produced");
}

#[test]
fn a_proto_file_that_imports_another_is_registered_with_a_schema_reference() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let proto = repo_root().join("tests/data/schemas/gold-deal-split.proto");
    let proto = proto.to_str().unwrap();
    let message = "crm.gold.split.Deal";
    let topic = unique_topic("split-protobuf");
    let more = format!("protobuf_schema = \"{proto}\"\nprotobuf_message = \"{message}\"");
    let files = pipeline(
        &table,
        "gold-deals-helpers",
        &topic,
        &encoding("protobuf", &more),
        "",
    );
    run_to_latest(&files.config);
    // The stage is the imported enum's value name, as the golden JSON has it.
    let flags = ["--proto", proto, "--message", message];
    assert_eq!(
        by_key(registry_decoded(&topic, "protobuf", &flags)),
        gold_deals()
    );
    let imported = "gold-deal-stage.proto";
    let registered = registry_get(&format!("/subjects/{topic}-value/versions/latest"));
    let version = *versions(imported).last().unwrap();
    assert_eq!(
        registered["references"],
        serde_json::json!([{"name": imported, "subject": imported, "version": version}])
    );
    let stage = registry_get(&format!("/subjects/{imported}/versions/{version}"));
    assert!(
        stage["schema"].as_str().unwrap().contains("enum Stage"),
        "{stage}"
    );
}

/// Whether `json` (Spark's rendering) and `avro` (Confluent's decoding of the Avro
/// record) hold the same values: decimals decode as text, a map with non-string keys is
/// an Avro array of key-value records, and the decoder's lines leave out every null
/// field (a missing field is a null one).
fn same_values(json: &Value, avro: &Value) -> bool {
    match (json, avro) {
        (Value::Object(json), Value::Object(avro)) => json.keys().chain(avro.keys()).all(|k| {
            same_values(
                json.get(k).unwrap_or(&Value::Null),
                avro.get(k).unwrap_or(&Value::Null),
            )
        }),
        (Value::Object(json), Value::Array(entries)) => {
            json.len() == entries.len()
                && entries.iter().all(|entry| {
                    let key = match &entry["key"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    json.get(&key)
                        .is_some_and(|v| same_values(v, entry.get("value").unwrap_or(&Value::Null)))
                })
        }
        (Value::Array(json), Value::Array(avro)) => {
            json.len() == avro.len() && json.iter().zip(avro).all(|(j, a)| same_values(j, a))
        }
        (Value::Number(json), Value::String(decimal)) => {
            decimal.parse::<f64>().ok() == json.as_f64()
        }
        (Value::Number(json), Value::Number(avro)) => json.as_f64() == avro.as_f64(),
        _ => json == avro,
    }
}

#[test]
fn whole_rows_of_every_delta_type_decode_from_avro() {
    let table = repo_root().join("tests/data/cdf/update_all_types");
    let rows = "behavior = \"rows\"";
    let json_topic = unique_topic("all-types-json");
    let files = pipeline(&table, "misbehaving/behaviors-c", &json_topic, "", rows);
    run_to_latest(&files.config);
    let avro_topic = unique_topic("all-types-avro");
    let files = pipeline(
        &table,
        "misbehaving/behaviors-c",
        &avro_topic,
        &encoding("avro", ""),
        rows,
    );
    run_to_latest(&files.config);

    let json: Vec<Value> = consume_all(&json_topic)
        .iter()
        .map(|r| serde_json::from_str(r.value.as_deref().unwrap()).unwrap())
        .collect();
    let avro: Vec<Value> = registry_decoded(&avro_topic, "avro", &[])
        .iter()
        .map(|line| serde_json::from_str(line.split_once('\t').unwrap().1).unwrap())
        .collect();
    assert!(json.len() >= 10, "{} rows", json.len());
    assert_eq!(avro.len(), json.len());
    for (i, (json, avro)) in json.iter().zip(&avro).enumerate() {
        assert!(
            same_values(json, avro),
            "row {i}:\n json {json}\n avro {avro}"
        );
    }
    let schema = registry_get(&format!("/subjects/{avro_topic}-value/versions/latest"));
    let schema: Value = serde_json::from_str(schema["schema"].as_str().unwrap()).unwrap();
    let types: Vec<String> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["type"][1].to_string())
        .collect();
    for expected in [
        r#"{"logicalType":"decimal","precision":12,"scale":3,"type":"bytes"}"#,
        r#"{"logicalType":"date","type":"int"}"#,
        r#"{"logicalType":"timestamp-micros","type":"long"}"#,
        r#"{"logicalType":"local-timestamp-micros","type":"long"}"#,
    ] {
        assert!(
            types.iter().any(|t| t == expected),
            "{expected} in {types:?}"
        );
    }
}

/// Runs gold-deals over the motivating scenario in `format` with the schema file `file`
/// (in tests/data/schemas) supplied as `key`: the topic, and the schema registered.
fn run_with_supplied_schema(format: &str, key: &str, file: &str) -> (String, Value) {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic(&format!("supplied-{format}"));
    let path = repo_root().join("tests/data/schemas").join(file);
    let more = format!("{key} = \"{}\"", path.display());
    let files = pipeline(
        &table,
        "gold-deals-helpers",
        &topic,
        &encoding(format, &more),
        "",
    );
    run_to_latest(&files.config);
    let registered = registry_get(&format!("/subjects/{topic}-value/versions/latest"));
    let schema = serde_json::from_str(registered["schema"].as_str().unwrap()).unwrap();
    (topic, schema)
}

#[test]
fn a_supplied_avro_schema_shapes_the_values() {
    let (topic, schema) = run_with_supplied_schema("avro", "avro_schema", "gold-deal.avsc");
    assert_eq!(
        (schema["name"].as_str(), schema["namespace"].as_str()),
        (Some("Deal"), Some("crm.gold"))
    );
    // The golden records, cut to the supplied schema's fields (region is null: left out).
    let golden: Vec<String> = gold_deals()
        .iter()
        .map(|line| {
            let (key, value) = line.split_once('\t').unwrap();
            if value == "<tombstone>" {
                return line.to_string();
            }
            let full: Value = serde_json::from_str(value).unwrap();
            let cut: serde_json::Map<String, Value> =
                ["documentId", "eventTimestamp", "stage", "title"]
                    .iter()
                    .map(|name| (name.to_string(), full[name].clone()))
                    .collect();
            format!("{key}\t{}", Value::Object(cut))
        })
        .collect();
    let got: Vec<String> = by_key(registry_decoded(&topic, "avro", &[]))
        .into_iter()
        .map(|line| {
            let (key, value) = line.split_once('\t').unwrap();
            match serde_json::from_str::<Value>(value) {
                Ok(value) => format!("{key}\t{value}"),
                Err(_) => line.to_string(),
            }
        })
        .collect();
    assert_eq!(got, golden);
}

#[test]
fn a_supplied_json_schema_is_registered_and_the_records_validate_against_it() {
    let file = "gold-deal.schema.json";
    let (topic, schema) = run_with_supplied_schema("json-schema", "json_schema", file);
    let supplied = std::fs::read_to_string(repo_root().join("tests/data/schemas").join(file));
    assert_eq!(
        schema,
        serde_json::from_str::<Value>(&supplied.unwrap()).unwrap()
    );
    // Confluent's JSONDeserializer validates each value against the registered schema.
    let golden = gold_deals();
    assert_eq!(
        by_key(registry_decoded(&topic, "json-schema", &[])),
        by_key(golden)
    );
}

/// `sluice preview --config` of a pipeline: one JSON object per record.
fn preview_lines(config: &Path) -> Vec<Value> {
    let output = std::process::Command::new(sluice_binary())
        .args(["preview", "--limit", "3", "--config"])
        .arg(config)
        .output()
        .unwrap();
    sluice_tests::json_lines(&output)
}

#[test]
fn preview_shows_decoded_values_and_the_schema_id_they_would_carry() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let topic = unique_topic("preview-avro");
    let files = pipeline(
        &table,
        "gold-deals-helpers",
        &topic,
        &encoding("avro", ""),
        "",
    );
    // The same module's records in plain JSON, as a preview without a config shows them.
    let golden: Vec<Value> =
        preview_records(&table, &transform_component("gold-deals-helpers"), &[])
            .iter()
            .map(|line| serde_json::from_str(line["value"].as_str().unwrap()).unwrap())
            .collect();
    assert_eq!(golden.len(), 3);
    assert_eq!(golden[0]["documentId"], "deal-0000");
    let subject = format!("{topic}-value");
    // Before any run: the values decoded, and the subject would take the schema as new.
    let before = preview_lines(&files.config);
    assert_eq!(before.len(), 3);
    for (line, expected) in before.iter().zip(&golden) {
        let decoded: serde_json::Map<String, Value> = line["value"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(&Value::Object(decoded), expected, "{line}");
    }
    assert_eq!(before[0]["value_schema"]["subject"], subject.as_str());
    assert_eq!(before[0]["value_schema"]["registers"], "a new version");
    assert!(
        before[0]["value_schema"]["schema"].is_string(),
        "{}",
        before[0]
    );
    assert!(
        before[1]["value_schema"].get("schema").is_none(),
        "{}",
        before[1]
    );
    let subjects = registry_get("/subjects");
    assert!(
        !subjects
            .as_array()
            .unwrap()
            .contains(&Value::from(subject.as_str())),
        "a preview registers nothing: {subjects}"
    );
    // After a run registered it: the id the records carry.
    run_to_latest(&files.config);
    let registered = registry_get(&format!("/subjects/{subject}/versions/latest"));
    let after = preview_lines(&files.config);
    assert_eq!(
        after[0]["value_schema"]["id"], registered["id"],
        "{}",
        after[0]
    );
    assert_eq!(after[0]["value"], before[0]["value"]);
}

#[test]
fn debezium_events_pair_updates_and_follow_deletes_with_tombstones() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic("debezium");
    let sink = encoding(
        "avro",
        "key = \"avro\"\nenvelope = \"debezium\"\nnamespace = \"crm.deals\"",
    );
    let params = "change_types = \"insert,update_preimage,update_postimage,delete\"";
    let files = pipeline(&table, "gold-deals-helpers", &topic, &sink, params);
    run_to_latest(&files.config);
    let lines = registry_decoded(&topic, "avro", &["--avro-keys", "--keep-nulls"]);
    let events: Vec<(String, Option<Value>)> = lines
        .iter()
        .map(|line| {
            let (key, value) = line.split_once('\t').unwrap();
            let value = (value != "<tombstone>").then(|| serde_json::from_str(value).unwrap());
            (key.to_string(), value)
        })
        .collect();
    let ops: Vec<&str> = events
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .map(|v| v["op"].as_str().unwrap())
        .collect();
    let count = |op| ops.iter().filter(|o| **o == op).count();
    // 30 deals created, then deals 3 and 7 won, 5 and 10 deleted, a merge that changes
    // deal 1 and creates deal 100.
    assert_eq!((count("c"), count("u"), count("d")), (31, 3, 2), "{ops:?}");
    for (key, event) in &events {
        let Some(event) = event else { continue };
        let fields: Vec<&str> = event
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // Debezium's envelope (serde_json lists the fields sorted).
        assert_eq!(
            fields,
            [
                "after",
                "before",
                "op",
                "source",
                "transaction",
                "ts_ms",
                "ts_ns",
                "ts_us"
            ],
            "{key}"
        );
        assert_eq!(event["transaction"], Value::Null, "{key}");
        let source = &event["source"];
        assert_eq!(source["connector"], "sluice");
        assert_eq!(source["db"], "delta");
        assert_eq!(source["snapshot"], "false");
        assert!(
            source["ts_ms"].as_i64().unwrap() > 1_600_000_000_000,
            "{source}"
        );
        assert!(event["ts_ms"].as_i64().unwrap() >= source["ts_ms"].as_i64().unwrap());
        assert_eq!(
            (source["ts_us"].as_i64(), source["ts_ns"].as_i64()),
            (
                source["ts_ms"].as_i64().map(|ms| ms * 1000),
                source["ts_ms"].as_i64().map(|ms| ms * 1_000_000)
            ),
            "{source}"
        );
        assert_eq!(
            event["ts_us"].as_i64().unwrap() / 1000,
            event["ts_ms"].as_i64().unwrap()
        );
        match event["op"].as_str().unwrap() {
            "c" => {
                assert!(event["before"].is_null() && event["after"]["documentId"] == key.as_str())
            }
            "u" => {
                assert_eq!(event["before"]["documentId"], key.as_str());
                assert_eq!(event["after"]["documentId"], key.as_str());
                assert_ne!(event["before"]["stage"], event["after"]["stage"], "{event}");
            }
            "d" => {
                assert!(event["after"].is_null() && event["before"]["documentId"] == key.as_str())
            }
            op => panic!("unexpected op {op}"),
        }
    }
    let won = events
        .iter()
        .find(|(key, e)| key == "deal-0003" && e.as_ref().is_some_and(|e| e["op"] == "u"))
        .and_then(|(_, e)| e.clone())
        .unwrap();
    assert_eq!(won["after"]["stage"], "closedwon");
    assert_eq!(won["before"]["stage"], "appointmentscheduled");
    // Each delete is followed by its tombstone.
    for (i, (key, event)) in events.iter().enumerate() {
        if event.as_ref().is_some_and(|e| e["op"] == "d") {
            assert_eq!(
                events[i + 1],
                (key.clone(), None),
                "the tombstone after {key}'s delete"
            );
        }
    }
    let envelope = registry_get(&format!("/subjects/{topic}-value/versions/latest"));
    let schema: Value = serde_json::from_str(envelope["schema"].as_str().unwrap()).unwrap();
    assert_eq!(
        (schema["name"].as_str(), schema["namespace"].as_str()),
        (Some("Envelope"), Some("crm.deals"))
    );
    // Debezium's names for the source block and the transaction block.
    let source = &schema["fields"][2]["type"];
    assert_eq!(
        (source["name"].as_str(), source["namespace"].as_str()),
        (Some("Source"), Some("io.debezium.connector.sluice"))
    );
    let transaction = &schema["fields"][3]["type"][1];
    assert_eq!(
        (
            transaction["name"].as_str(),
            transaction["namespace"].as_str()
        ),
        (Some("block"), Some("event"))
    );
    assert_eq!(versions(&format!("{topic}-key")), [1]);
}

#[test]
fn a_new_column_registers_a_new_version_and_a_refused_schema_stops_the_pipeline() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "5"]);
    let topic = unique_topic("evolving");
    // Whole rows of deal 3, as the host selects them.
    let params = "behavior = \"where\"\nid = \"deal-0003\"";
    let files = pipeline(
        &table,
        "misbehaving/behaviors-c",
        &topic,
        &encoding("avro", ""),
        params,
    );
    // `sluice check` runs the module on the first batch and asks the registry about its
    // schema, registering nothing.
    let subject = format!("{topic}-value");
    let (ok, report) = sluice_check(&files.config);
    assert!(ok, "{report}");
    assert!(
        report.contains(&format!("Subject `{subject}` would take the AVRO schema the first records are written with as its next version: {{\"fields\":[{{\"default\":null,\"name\":\"documentId\"")),
        "{report}"
    );
    run_to_latest(&files.config);
    deals_table(&table, &["region"]);
    run_to_latest(&files.config);
    assert_eq!(
        versions(&subject).len(),
        2,
        "ADD COLUMNS made a second version"
    );
    let lines = registry_decoded(&topic, "avro", &[]);
    assert!(lines.len() >= 2, "{lines:?}");
    assert!(!lines[0].contains("region"), "{}", lines[0]);
    // The update's post-image, in the new schema.
    let emea: Vec<Value> = lines[1..]
        .iter()
        .map(|line| serde_json::from_str(line.split_once('\t').unwrap().1).unwrap())
        .filter(|value: &Value| value["region"] == "emea")
        .collect();
    assert_eq!(emea.len(), 1, "{lines:?}");
    assert_eq!(emea[0]["fullDocument"]["title"], "Deal 3");

    // Another writer put an incompatible schema in the subject (documentId a long), then
    // the subject was set to BACKWARD: the next column the table gains makes a schema the
    // registry refuses, and the pipeline stops before any record of that version.
    let delivered = consume_all(&topic).len();
    let other = serde_json::json!({"type": "record", "name": "Value", "namespace": "sluice", "fields": [
        {"name": "documentId", "type": ["null", "long"], "default": null},
    ]});
    ureq::post(format!("{}/subjects/{subject}/versions", registry_url()))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send(serde_json::json!({"schema": other.to_string()}).to_string())
        .unwrap();
    let set_compatibility = |level: &str| {
        ureq::put(format!("{}/config/{subject}", registry_url()))
            .header("Content-Type", "application/vnd.schemaregistry.v1+json")
            .send(format!(r#"{{"compatibility":"{level}"}}"#))
            .unwrap();
    };
    set_compatibility("BACKWARD");
    deals_table(&table, &["region", "--name", "tier"]);
    // A check from the change's version shows the refusal before any run.
    let change_version = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse::<u64>().ok()
        })
        .max()
        .unwrap();
    let starting = format!("starting_version = {change_version}");
    let from_change = PipelineFiles::new(
        &table,
        &transform_component("misbehaving/behaviors-c"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: &starting,
            sink: &encoding("avro", ""),
            params,
            ..Extra::default()
        },
    );
    let (ok, report) = sluice_check(&from_change.config);
    assert!(!ok, "{report}");
    assert!(
        report.contains(&format!(
            "Subject `{subject}` would refuse the AVRO schema the first records are written with"
        )),
        "{report}"
    );
    let log = run_expecting_failure(&files.config);
    assert!(
        log.contains(&format!(
            "refused a new schema for subject `{subject}` as incompatible with its compatibility level BACKWARD"
        )),
        "{log}"
    );
    assert!(
        log.contains("Nothing after the change was produced"),
        "{log}"
    );
    assert_eq!(
        consume_all(&topic).len(),
        delivered,
        "nothing of the change was produced"
    );
    assert_eq!(versions(&subject).len(), 3);

    // The way out the message gives: a compatibility that allows the change, then a
    // restart, which resumes at the change: its records once, nothing before again.
    set_compatibility("NONE");
    run_to_latest(&files.config);
    let lines = registry_decoded(&topic, "avro", &[]);
    assert_eq!(
        lines.len(),
        delivered + 2,
        "the update's pre- and post-image: {lines:?}"
    );
    assert!(
        lines[delivered..]
            .iter()
            .any(|l| l.contains(r#""tier":"emea""#)),
        "{lines:?}"
    );
}

#[test]
fn a_registry_over_https_takes_basic_credentials_and_bearer_tokens() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "20"]);
    let url = secured_registry_url();
    let ca = kafka_run_file("tls/ca.crt");
    let secured = |credentials: &str| {
        format!(
            "[sink.encoding]\nvalue = \"avro\"\n[sink.schema_registry]\nurl = \"{url}\"\nca_location = \"{ca}\"\n{credentials}\n"
        )
    };

    // Basic credentials, as Confluent Cloud's API key and secret (the registry
    // exchanges them for a token at its OIDC server).
    let topic = unique_topic("registry-basic");
    let secret_file = work.path().join("registry-secret");
    std::fs::write(&secret_file, "secret\n").unwrap();
    let basic = secured(&format!(
        "username = \"sluice\"\npassword = \"${{file:{}}}\"",
        secret_file.display()
    ));
    let files = pipeline(&table, "gold-deals-helpers", &topic, &basic, "");
    run_to_latest(&files.config);
    let flags = [
        "--registry-ca",
        ca.as_str(),
        "--registry-basic",
        "sluice:secret",
    ];
    let lines = registry_decoded_at(&url, &topic, "avro", &flags);
    assert_eq!(lines.len(), 20);
    assert!(
        lines[0].starts_with("deal-0000\t{\"documentId\":\"deal-0000\""),
        "{}",
        lines[0]
    );

    // A bearer token from the same issuer, read from a file.
    let token: Value = serde_json::from_str(
        &ureq::post(format!("{}/registry/token", oidc_url()))
            .content_type("application/x-www-form-urlencoded")
            .send("grant_type=client_credentials&client_id=sluice&client_secret=secret")
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    let token_file = work.path().join("registry-token");
    std::fs::write(&token_file, token["access_token"].as_str().unwrap()).unwrap();
    let topic = unique_topic("registry-bearer");
    let bearer = secured(&format!("token = \"${{file:{}}}\"", token_file.display()));
    let files = pipeline(&table, "gold-deals-helpers", &topic, &bearer, "");
    run_to_latest(&files.config);
    assert_eq!(registry_decoded_at(&url, &topic, "avro", &flags).len(), 20);

    // No credentials: refused at once, with the settings to check.
    let topic = unique_topic("registry-anonymous");
    create_topic(&kafka_bootstrap(), &topic, 1);
    let files = pipeline(&table, "gold-deals-helpers", &topic, &secured(""), "");
    let log = run_expecting_failure(&files.config);
    assert!(
        log.contains(&format!(
            "The schema registry at {url} refused the credentials (HTTP 401"
        )),
        "{log}"
    );
    assert!(
        log.contains("Check [sink.schema_registry] username and password"),
        "{log}"
    );
    assert!(consume_all(&topic).is_empty());

    // The registry's certificate from a CA the pipeline was not told to trust.
    let untrusting = format!(
        "[sink.encoding]\nvalue = \"avro\"\n[sink.schema_registry]\nurl = \"{url}\"\nusername = \"sluice\"\npassword = \"secret\"\n"
    );
    let files = pipeline(&table, "gold-deals-helpers", &topic, &untrusting, "");
    let log = run_expecting_failure(&files.config);
    assert!(
        log.contains(&format!(
            "The schema registry at {url} presented a certificate this host does not trust"
        )),
        "{log}"
    );
    assert!(log.contains("ca_location"), "{log}");
}

/// The table's change rows as the plain pass-through sees them: (documentId, change
/// type, commit version) in feed order.
fn change_rows(table: &Path) -> Vec<(String, String, u64)> {
    preview_values(table, "passthrough", &[])
        .into_iter()
        .map(|value| {
            let value = value.expect("pass-through values are never tombstones");
            (
                value["documentId"].as_str().unwrap().to_string(),
                value["_change_type"].as_str().unwrap().to_string(),
                value["_commit_version"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The values `module` makes of `table` in `sluice preview` (plain bytes, parsed as JSON).
fn preview_values(table: &Path, module: &str, args: &[&str]) -> Vec<Option<Value>> {
    preview_records(table, &transform_component(module), args)
        .into_iter()
        .map(|line| {
            line["value"]
                .as_str()
                .map(|text| without_nulls(serde_json::from_str(text).unwrap()))
        })
        .collect()
}

/// `value` with its null fields left out, as the registry consumer prints values.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Decoded `key<TAB>value` lines as (key, value), tombstones as `None`.
fn decoded_pairs(lines: Vec<String>) -> Vec<(String, Option<Value>)> {
    lines
        .into_iter()
        .map(|line| {
            let (key, value) = line.split_once('\t').unwrap();
            let value = (value != "<tombstone>").then(|| serde_json::from_str(value).unwrap());
            (key.to_string(), value)
        })
        .collect()
}

#[test]
fn bytes_a_module_encodes_with_its_own_schema_are_framed_with_the_registered_id() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let rows = change_rows(&table);
    let registry = format!("[sink.schema_registry]\nurl = \"{}\"\n", registry_url());
    let proto = repo_root().join("tests/data/schemas/own-change.proto");
    for format in ["avro", "protobuf", "json-schema"] {
        let topic = unique_topic(&format!("own-{format}"));
        let files = pipeline(
            &table,
            "own-schema",
            &topic,
            &registry,
            &format!("format = \"{format}\""),
        );
        run_to_latest(&files.config);
        let flags = match format {
            "avro" => vec!["--avro-keys"],
            "protobuf" => vec![
                "--proto",
                proto.to_str().unwrap(),
                "--message",
                "crm.Change",
            ],
            _ => Vec::new(),
        };
        let expected: Vec<(String, Option<Value>)> = rows
            .iter()
            .map(|(id, change, version)| {
                let mut value = serde_json::json!({"documentId": id, "change": change});
                // Protobuf's JSON mapping writes int64 as text and leaves out zero.
                match (format, version) {
                    ("protobuf", 0) => {}
                    ("protobuf", v) => value["version"] = Value::String(v.to_string()),
                    (_, v) => value["version"] = (*v).into(),
                }
                (id.clone(), (change != "delete").then_some(value))
            })
            .collect();
        let got = decoded_pairs(registry_decoded(&topic, format, &flags));
        assert_eq!(got, expected, "own-schema in {format}");
        assert_eq!(versions(&format!("{topic}-value")), [1], "{format}");
        if format == "avro" {
            let key = registry_get(&format!("/subjects/{topic}-key/versions/latest"));
            assert_eq!(key["schema"], "\"string\"");
        }
    }

    // The pass-through in every SDK language frames the JSON it writes with a JSON
    // Schema; Confluent's JSONDeserializer validates every value against it.
    let schema = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"crm.Change","type":"object","properties":{"_change_type":{"enum":["insert","update_preimage","update_postimage","delete"]}},"required":["_change_type","_commit_version"]}"#;
    for module in [
        "passthrough",
        "passthrough-js",
        "passthrough-python",
        "passthrough-c",
        "passthrough-go",
    ] {
        let topic = unique_topic(&format!("own-{module}"));
        let params = format!("json_schema = '{schema}'");
        let files = pipeline(&table, module, &topic, &registry, &params);
        run_to_latest(&files.config);
        let expected: Vec<(String, Option<Value>)> = preview_values(&table, module, &[])
            .into_iter()
            .map(|value| ("<no key>".to_string(), value))
            .collect();
        let got = decoded_pairs(registry_decoded(&topic, "json-schema", &[]));
        assert_eq!(got, expected, "{module}");
        let registered = registry_get(&format!("/subjects/{topic}-value/versions/latest"));
        assert_eq!(registered["schemaType"], "JSON", "{module}");
        assert_eq!(
            serde_json::from_str::<Value>(registered["schema"].as_str().unwrap()).unwrap(),
            serde_json::from_str::<Value>(schema).unwrap(),
            "{module}"
        );
    }

    // Without a registry there is nowhere to register the schema: the pipeline stops at
    // the first batch, having produced nothing.
    let topic = unique_topic("own-no-registry");
    create_topic(&kafka_bootstrap(), &topic, 1);
    let files = pipeline(&table, "own-schema", &topic, "", "");
    let err = run_expecting_failure(&files.config);
    assert!(
        err.contains("the module framed records with its own schema (emit-framed), and the pipeline has no schema registry"),
        "{err}"
    );
    assert!(consume_all(&topic).is_empty());
}
