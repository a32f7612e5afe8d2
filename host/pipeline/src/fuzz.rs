//! Fuzzing of the pipeline config parser: configs from `fuzz/corpus/pipeline-config`
//! with their TOML structure changed (keys removed, added, values of other types) or
//! their bytes edited. Parsing never panics: a config is read or refused with a message.

use std::path::Path;

use sluice_fuzzing::strategies::mutated_toml;
use sluice_fuzzing::{corpus, fuzz};

use crate::config::PipelineConfig;

/// Keys a pipeline config knows, so mutations reach the checks behind them.
const KEYS: &[&str] = &[
    "pipeline",
    "name",
    "source",
    "table",
    "starting_version",
    "starting_timestamp",
    "snapshot",
    "poll_interval",
    "max_poll_interval",
    "batch_rows",
    "storage_options",
    "transform",
    "module",
    "memory_limit_mib",
    "batch_timeout",
    "fuel_per_batch",
    "max_output_mib",
    "recycle_memory_mib",
    "log_messages_per_second",
    "module_cache_dir",
    "on_error",
    "dead_letter_topic",
    "params",
    "sink",
    "topic",
    "delivery",
    "position_topic",
    "connect_timeout",
    "change_headers",
    "commit_rows",
    "commit_interval",
    "commit_per_version",
    "transaction_timeout",
    "kafka",
    "bootstrap.servers",
];

#[test]
fn fuzz_pipeline_config() {
    let seeds =
        corpus(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/pipeline-config"));
    let base = tempfile::tempdir().unwrap();
    let mut read = 0u64;
    fuzz(
        "pipeline-config",
        mutated_toml(&seeds, KEYS),
        |text| match PipelineConfig::parse(&text, base.path()) {
            Ok(config) => {
                read += 1;
                let _ = config.kafka_properties();
                let _ = config.position_topic();
                let _ = config.transform_params();
            }
            Err(message) => assert!(!message.is_empty(), "a refusal says why"),
        },
    );
    assert!(read > 0, "some mutated configs are still valid");
}
