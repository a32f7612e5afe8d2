//! Tables in object stores, on local emulators: S3 (moto), Azure Blob (Azurite) and
//! Google Cloud Storage (fake-gcs-server). The same tables stream the same records as
//! from local disk; `sluice check` lists each store's log with the credentials it names;
//! and a pipeline following a table through a fault proxy (toxiproxy resetting, stalling
//! and slowing its connections) delivers every record exactly once. A table named through
//! a Unity Catalog server streams like the same table named by path.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice_tests::stores::{
    CatalogServer, Emulator, Fault, FaultProxy, S3_SECRET, Store, free_port,
};
use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, repo_root,
    run_to_latest, sluice_binary, transform_component, unique_topic,
};

fn lines(topic: &str) -> Vec<String> {
    consume_all(topic).iter().map(Consumed::line).collect()
}

/// The records without their commit timestamps: a table without in-commit timestamps
/// takes each commit's time from its log file's modification time, which an upload
/// changes (Spark reads it the same way).
fn without_commit_times(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| match line.find("\"_commit_timestamp\":\"") {
            Some(at) => {
                let rest = &line[at + 21..];
                let end = rest.find('"').map_or(line.len(), |e| at + 21 + e + 1);
                format!("{}{}", &line[..at], &line[end..])
            }
            None => line.clone(),
        })
        .collect()
}

/// A pipeline config for `table` through gold-deals (or passthrough for tables of
/// other shapes) into a new topic.
fn pipeline(table: &str, module: &str, source: &str, prefix: &str) -> (PipelineFiles, String) {
    let topic = unique_topic(prefix);
    let files = PipelineFiles::new(
        Path::new(table),
        &transform_component(module),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source,
            ..Extra::default()
        },
    );
    (files, topic)
}

fn sluice(emulator: &Emulator, args: &[&str], config: &Path) -> Command {
    let mut command = Command::new(sluice_binary());
    command.args(args).arg("--config").arg(config);
    for (name, value) in emulator.credentials() {
        command.env(name, value);
    }
    command
}

#[test]
fn the_same_tables_stream_the_same_records_from_disk_s3_azure_and_gcs() {
    let work = tempfile::tempdir().unwrap();
    let deals = work.path().join("deals");
    deals_table(&deals, &["scenario"]);
    let spark = repo_root().join("tests/data/delta-tables/spark/cdf-table-with-cdc-and-dvs");
    let tables = [(&deals, "gold-deals"), (&spark, "passthrough")];
    let references: Vec<Vec<String>> = tables
        .iter()
        .map(|(table, module)| {
            let (files, topic) = pipeline(&table.display().to_string(), module, "", "disk");
            run_to_latest(&files.config);
            lines(&topic)
        })
        .collect();
    assert_eq!(references[0].len(), 36, "the deals scenario's records");
    assert!(!references[1].is_empty());

    for store in Store::ALL {
        let emulator = Emulator::start(store);
        for ((table, module), reference) in tables.iter().zip(&references) {
            let name = table.file_name().unwrap().to_str().unwrap();
            emulator.upload("lake", name, table);
            let url = emulator.table_url("lake", name);
            let options = emulator.storage_options(&emulator.endpoint(), "");
            let (files, topic) = pipeline(&url, module, &options, store.name());
            let run = sluice(&emulator, &["run", "--stop-at-latest"], &files.config)
                .output()
                .unwrap();
            let log = String::from_utf8_lossy(&run.stderr);
            assert!(run.status.success(), "{url}: {log}");
            assert!(!log.contains(S3_SECRET), "the secret was logged: {log}");
            assert_eq!(
                without_commit_times(&lines(&topic)),
                without_commit_times(reference),
                "{url} streams like the local table"
            );

            if *module == "gold-deals" {
                let check = sluice(&emulator, &["check"], &files.config)
                    .output()
                    .unwrap();
                let said = String::from_utf8_lossy(&check.stdout);
                assert!(check.status.success(), "{url}: {said}");
                let storage = said
                    .lines()
                    .find(|line| line.contains("storage"))
                    .unwrap_or_else(|| panic!("no storage finding: {said}"));
                let (kind, credentials) = match store {
                    Store::S3 => (
                        "S3",
                        "an access key from the environment (AWS_ACCESS_KEY_ID)",
                    ),
                    Store::Azure => (
                        "Azure Blob Storage",
                        "an account key from the environment (AZURE_STORAGE_ACCOUNT_KEY)",
                    ),
                    Store::Gcs => (
                        "Google Cloud Storage",
                        "a service account key from storage_options (google_service_account_key)",
                    ),
                };
                assert!(storage.contains(kind), "{storage}");
                assert!(storage.contains(credentials), "{storage}");
                assert!(storage.contains("00000000000000000004.json"), "{storage}");
            }
        }
    }
}

#[test]
fn wrong_storage_settings_are_named_before_anything_is_read() {
    let emulator = Emulator::start(Store::S3);
    let work = tempfile::tempdir().unwrap();
    let deals = work.path().join("deals");
    deals_table(&deals, &["create"]);
    emulator.upload("lake", "deals", &deals);

    // A misspelt option would otherwise be ignored, and the default endpoint used.
    let typo = emulator.storage_options(&emulator.endpoint(), "aws_endpont = \"x\"");
    let (files, _) = pipeline("s3://lake/deals", "gold-deals", &typo, "typo");
    let run = sluice(&emulator, &["run", "--stop-at-latest"], &files.config)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        log.contains("`aws_endpont` in [source.storage_options] is not an option of S3"),
        "{log}"
    );

    // A bucket that is not there is named, as the table that cannot be read.
    let options = emulator.storage_options(&emulator.endpoint(), "");
    let (files, _) = pipeline(
        "s3://no-such-bucket/deals",
        "gold-deals",
        &options,
        "nobucket",
    );
    let check = sluice(&emulator, &["check"], &files.config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{said}");
    assert!(said.contains("s3://no-such-bucket/deals"), "{said}");
}

/// Follows a table in `store` through a fault proxy while new versions land and the
/// proxy resets, stalls and slows the connections; returns the pipeline's log.
fn follow_through_faults(store: Store, reference_topic: &str, work: &Path) -> String {
    let listen = free_port();
    let emulator = Emulator::start_behind(store, listen);
    let proxy = FaultProxy::start();
    let endpoint = proxy.proxy(store.name(), listen, emulator.port);
    let table = work.join(store.name());
    deals_table(&table, &["create"]);
    emulator.upload("lake", "deals", &table);

    // Short request timeouts, so a stalled request fails and is retried within the test.
    let options = emulator.storage_options(&endpoint, "timeout = \"3s\"\nconnect_timeout = \"2s\"");
    let (files, topic) = pipeline(
        &emulator.table_url("lake", "deals"),
        "gold-deals",
        &options,
        &format!("faults-{}", store.name()),
    );
    let log = work.join(format!("{}.log", store.name()));
    let mut child: Child = sluice(&emulator, &["run"], &files.config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    files.wait_for_position_logging(&mut child, 1, Duration::from_secs(300), Some(&log));

    let faults = [
        Fault::Reset,
        Fault::Stall,
        Fault::Latency(400),
        Fault::Bandwidth(16),
    ];
    for (round, fault) in faults.into_iter().enumerate() {
        proxy.inject(store.name(), fault);
        let start = (20 + round * 5).to_string();
        deals_table(&table, &["append", "--start", &start, "--rows", "5"]);
        emulator.upload("lake", "deals", &table);
        std::thread::sleep(Duration::from_secs(4));
        proxy.heal(store.name());
    }
    deals_table(&table, &["update"]);
    deals_table(&table, &["delete"]);
    emulator.upload("lake", "deals", &table);
    files.wait_for_position_logging(&mut child, 7, Duration::from_secs(300), Some(&log));
    sluice_tests::stop_sluice(&mut child);

    assert_eq!(
        lines(&topic),
        lines(reference_topic),
        "{}: every record exactly once, in order",
        store.name()
    );
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn following_tables_through_storage_faults_delivers_every_record_once() {
    let work = tempfile::tempdir().unwrap();
    // The same versions on local disk, read without faults.
    let reference = work.path().join("reference");
    deals_table(&reference, &["create"]);
    for round in 0..4 {
        let start = (20 + round * 5).to_string();
        deals_table(&reference, &["append", "--start", &start, "--rows", "5"]);
    }
    deals_table(&reference, &["update"]);
    deals_table(&reference, &["delete"]);
    let (files, reference_topic) = pipeline(
        &reference.display().to_string(),
        "gold-deals",
        "",
        "faults-disk",
    );
    run_to_latest(&files.config);
    assert_eq!(lines(&reference_topic).len(), 20 + 20 + 2 + 2);

    for store in Store::ALL {
        let log = follow_through_faults(store, &reference_topic, work.path());
        assert!(
            log.contains("A storage request failed"),
            "{}: the faults are logged: {log}",
            store.name()
        );
        let stopped = log
            .lines()
            .find(|line| line.contains("Pipeline stopped."))
            .unwrap_or_else(|| panic!("{}: no stop line: {log}", store.name()));
        assert!(
            !stopped.contains("storage_failures=0"),
            "{}: the failures are counted: {stopped}",
            store.name()
        );
    }
}

#[test]
fn a_table_named_through_unity_catalog_streams_like_the_table_named_by_path() {
    let work = tempfile::tempdir().unwrap();
    let deals = work.path().join("deals");
    deals_table(&deals, &["scenario"]);
    let (by_path, path_topic) = pipeline(&deals.display().to_string(), "gold-deals", "", "path");
    run_to_latest(&by_path.config);

    let catalog = CatalogServer::start(work.path(), false);
    catalog.add_table("deals", &deals);
    let named = |name: &str, url: &str| {
        pipeline(
            name,
            "gold-deals",
            &format!(
                "[source.catalog]\nurl = \"{url}\"\ntoken = \"${{env:SLUICE_TEST_UC_TOKEN}}\""
            ),
            "catalog",
        )
    };
    let sluice = |args: &[&str], config: &Path| {
        let output = Command::new(sluice_binary())
            .args(args)
            .arg("--config")
            .arg(config)
            .env("SLUICE_TEST_UC_TOKEN", "dapi-test-token")
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !said.contains("dapi-test-token"),
            "the token was shown: {said}"
        );
        (output.status.success(), said)
    };

    let (files, topic) = named("main.sales.deals", &catalog.url);
    let (ran, log) = sluice(&["run", "--stop-at-latest"], &files.config);
    assert!(ran, "{log}");
    let records = lines(&topic);
    assert_eq!(records.len(), 36, "the deals scenario's records");
    assert_eq!(records, lines(&path_topic), "named as by path");
    let (checked, said) = sluice(&["check"], &files.config);
    assert!(checked, "{said}");
    let storage = said
        .lines()
        .find(|line| line.contains("storage"))
        .unwrap_or_else(|| panic!("no storage finding: {said}"));
    assert!(
        storage.contains(&format!(
            "no credentials vended by Unity Catalog at {} for main.sales.deals",
            catalog.url
        )),
        "{storage}"
    );

    let (files, _) = named("main.sales.nothing", &catalog.url);
    for command in [&["run", "--stop-at-latest"][..], &["check"][..]] {
        let (ok, said) = sluice(command, &files.config);
        assert!(!ok, "{said}");
        assert!(
            said.contains(&format!(
                "Unity Catalog at {} has no table main.sales.nothing: RESOURCE_NOT_FOUND",
                catalog.url
            )),
            "{command:?}: {said}"
        );
    }

    // A server that takes identities from an authenticating proxy refuses a caller
    // without one, as a catalog refuses a token it does not accept.
    let guarded = CatalogServer::start(work.path(), true);
    let (files, _) = named("main.sales.deals", &guarded.url);
    let (ok, said) = sluice(&["run", "--stop-at-latest"], &files.config);
    assert!(!ok, "{said}");
    assert!(
        said.contains(&format!(
            "Unity Catalog at {} did not accept the token while looking up main.sales.deals",
            guarded.url
        )) && said.contains("[source.catalog] token"),
        "{said}"
    );
}
