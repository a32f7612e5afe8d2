//! The pipeline's TOML configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use std::sync::Arc;

use sluice_catalog::{Catalog, TableName, UnityCatalog};
use sluice_encoding::{
    Envelope, Format, KeyFormat, ProtobufSchema, SubjectStrategy, SuppliedSchema, ValueFormat,
    debezium_namespace, invalid_avro_name,
};
use sluice_engine::CompileBudget;
pub use sluice_lookup::Consistency;
use sluice_registry::{RegistryAuth, RegistrySettings};
use sluice_sink::DeliveryMode;
use sluice_source::SourceOptions;

/// A pipeline: one table's change feed, one transform, one Kafka topic.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Identity.
    pub pipeline: PipelineSection,
    /// The Delta table to read.
    pub source: SourceSection,
    /// The transform module.
    pub transform: TransformSection,
    /// The Kafka destination.
    pub sink: SinkSection,
    /// The pipeline's keyed state; only a pipeline with this section keeps state.
    #[serde(default)]
    pub state: Option<StateSection>,
    /// `[[lookup]]`: other Delta tables the module looks rows up in (contract 1.3).
    #[serde(default, rename = "lookup")]
    pub lookups: Vec<LookupSection>,
}

/// `[[lookup]]`: a Delta table the host keeps on the node by key, for the module to look
/// rows up in, as of the version each batch reads (docs/lookups.md).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupSection {
    /// The name the module looks the table up by.
    pub name: String,
    /// The table's path or URL (relative paths are taken from the config file's
    /// directory); read with `[source] storage_options`.
    pub table: String,
    /// The key columns: each row of the table has its own key.
    pub key: Vec<String>,
    /// The columns kept for each key.
    pub columns: Vec<String>,
    /// Which version a batch reads: `as-of` (default), the newest committed at or
    /// before the batch's own commit; or `latest`, the newest read.
    #[serde(default)]
    pub consistency: Consistency,
    /// Longest a batch waits for the table to be read up to its commit time (default
    /// `30s`); after it the batch is tried again later.
    #[serde(default = "default_lookup_max_wait", with = "humantime_serde")]
    pub max_wait: Duration,
    /// Most MiB the table's store may hold on disk, every version kept counted
    /// (default 1024).
    #[serde(default = "default_lookup_max_mib")]
    pub max_mib: u64,
    /// MiB of memory for the store's page cache (default 64).
    #[serde(default = "default_lookup_cache_mib")]
    pub cache_mib: usize,
}

fn default_lookup_max_wait() -> Duration {
    Duration::from_secs(30)
}
fn default_lookup_max_mib() -> u64 {
    PipelineConfig::DEFAULT_LOOKUP_MAX_MIB
}
fn default_lookup_cache_mib() -> usize {
    64
}

/// `[state]`: the keyed state the module keeps across batches (contract 1.2), committed
/// with the records to a changelog topic and kept on the node in a local store.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// Most keys the module may keep (default 1,000,000).
    #[serde(default = "default_state_max_keys")]
    pub max_keys: u64,
    /// Most MiB of keys plus values the module may keep (default 256). Changes not yet
    /// committed are held in memory, so this bounds the memory state takes too.
    #[serde(default = "default_state_max_mib")]
    pub max_mib: u64,
    /// Largest value in KiB (default 512); a value is one Kafka record of the changelog.
    #[serde(default = "default_state_max_value_kib")]
    pub max_value_kib: usize,
    /// The compacted topic the state's changes are committed to (default
    /// `sluice-state-<pipeline>`), created when missing.
    #[serde(default)]
    pub changelog_topic: Option<String>,
    /// Where this node keeps its copy of the state (default
    /// `$HOME/.cache/sluice/state/<pipeline>`; relative to the config file). It is a
    /// cache: deleting it costs a restore from the changelog.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

fn default_state_max_keys() -> u64 {
    PipelineConfig::DEFAULT_STATE_MAX_KEYS
}
fn default_state_max_mib() -> u64 {
    PipelineConfig::DEFAULT_STATE_MAX_MIB
}
fn default_state_max_value_kib() -> usize {
    512
}

/// `[pipeline]`: identity.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSection {
    /// The pipeline's name: the key of its stored position and the base of its Kafka
    /// transactional id, so one name must run in one place at a time.
    pub name: String,
}

/// `[source]`: the Delta table to read.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSection {
    /// Table location: a local path (relative to the config file) or a URL; with
    /// `[source.catalog]`, the table's name in the catalog, `catalog.schema.table`.
    pub table: String,
    /// The Unity Catalog that names the table and vends credentials to read it.
    #[serde(default)]
    pub catalog: Option<CatalogSection>,
    /// Where to start when the pipeline has no stored position: a version number,
    /// `"earliest"` (the default: version 0), or `"latest"` for only changes committed
    /// from now on.
    #[serde(default)]
    pub starting_version: Option<StartingVersion>,
    /// Start instead at the first version committed at or after this RFC 3339 time
    /// (for example `"2024-01-15T10:30:00Z"`), as Spark's `startingTimestamp`.
    #[serde(default, with = "humantime_serde")]
    pub starting_timestamp: Option<std::time::SystemTime>,
    /// The last version to deliver, as Spark's `endingVersion`: the pipeline stops,
    /// finished, once it has delivered it (waiting for it to be committed if the table
    /// is not there yet). Default: follow the table without end.
    #[serde(default)]
    pub ending_version: Option<u64>,
    /// First deliver the table as of the starting version (a number, or the latest
    /// version by default) with every row as an insert, then the changes after it: what
    /// Spark's streaming read does without a starting version. Default false.
    #[serde(default)]
    pub snapshot: bool,
    /// How often to look for new commits once caught up (default `1s`).
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Longest wait between polls while the table is idle (default: `poll_interval`, no
    /// back-off). Idle polls double the wait up to this; a new commit resets it.
    #[serde(default, with = "humantime_serde")]
    pub max_poll_interval: Option<Duration>,
    /// Most change rows per batch handed to the transform (default 10000).
    #[serde(default = "default_batch_rows")]
    pub batch_rows: usize,
    /// Object store options (for example `aws_endpoint`), passed as given.
    #[serde(default)]
    pub storage_options: BTreeMap<String, String>,
}

/// `[source.catalog]`: a Unity Catalog server.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogSection {
    /// The server's URL (Databricks: the workspace URL; the open-source server:
    /// `http://host:8080`).
    pub url: String,
    /// Bearer token (a personal access token or OAuth token of the principal that reads
    /// the table); `${env:}` and `${file:}` work. None: ask anonymously.
    #[serde(default)]
    pub token: Option<String>,
    /// The client, made when the config is loaded.
    #[serde(skip)]
    pub client: Option<Arc<dyn Catalog>>,
}

/// `[transform]`: the module and its parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformSection {
    /// Path of the component (relative to the config file).
    pub module: PathBuf,
    /// Parameters handed to the module's `init`.
    #[serde(default)]
    pub params: BTreeMap<String, ScalarValue>,
    /// Most memory one instance may use, in MiB (default 256).
    #[serde(default = "default_memory_limit_mib")]
    pub memory_limit_mib: usize,
    /// Longest one batch may take in the module (default `10s`).
    #[serde(default = "default_batch_timeout", with = "humantime_serde")]
    pub batch_timeout: Duration,
    /// Fuel (about one unit per Wasm instruction) one batch may use; unlimited when
    /// unset. Deterministic where `batch_timeout` is not, at ~10-15% of speed.
    #[serde(default)]
    pub fuel_per_batch: Option<u64>,
    /// Most MiB of keys, values and headers one batch may produce (default 256).
    #[serde(default = "default_max_output_mib")]
    pub max_output_mib: usize,
    /// An instance whose memory grew past this many MiB is replaced by a fresh one
    /// between batches (default: half of `memory_limit_mib`).
    #[serde(default)]
    pub recycle_memory_mib: Option<usize>,
    /// Log messages per second one instance may write; more are dropped and counted
    /// (default 20).
    #[serde(default = "default_log_messages_per_second")]
    pub log_messages_per_second: u32,
    /// Most CPU time compiling the module may take before it is stopped and refused
    /// (default `120s`). Modules compile in a separate process, so a runaway compile
    /// cannot take the host down.
    #[serde(default = "default_compile_timeout", with = "humantime_serde")]
    pub compile_timeout: Duration,
    /// Most memory compiling the module may use, in MiB (default 1024).
    #[serde(default = "default_compile_memory_mib")]
    pub compile_memory_mib: usize,
    /// Where compiled modules are cached by digest (default
    /// `$HOME/.cache/sluice/modules`; relative to the config file). Set to `""` to
    /// compile at every start.
    #[serde(default)]
    pub module_cache_dir: Option<PathBuf>,
    /// What happens to a row the module rejects or fails on, and to a batch it traps
    /// on twice: `fail` (default; stop, position before the row), `skip` (count and
    /// log), `dead-letter` (produce the row and the error to `dead_letter_topic`, in
    /// the same transaction as the good records).
    #[serde(default)]
    pub on_error: ErrorPolicy,
    /// The topic dead letters go to; required with `on_error = "dead-letter"`.
    #[serde(default)]
    pub dead_letter_topic: Option<String>,
    /// Instances of the module transforming batches at the same time, their records
    /// kept in table order (default 1, at most 64). Only for modules that keep no state
    /// from one batch to the next: each instance sees only some of the batches. Each
    /// instance may use `memory_limit_mib`.
    #[serde(default = "default_instances")]
    pub instances: usize,
}

/// What a pipeline does with rows its module fails on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorPolicy {
    /// Stop; the position stays before the failing row.
    #[default]
    Fail,
    /// Count and log the row, carry on without it.
    Skip,
    /// Produce the row and the error to the dead-letter topic, carry on.
    DeadLetter,
}

/// `[sink]`: the Kafka destination.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkSection {
    /// Topic for records that name none.
    pub topic: String,
    /// The topics a module's records may name besides `topic`: names, and name starts
    /// ending in `*` (`"orders.by-country.*"`). Unset: any topic. A record naming
    /// another topic fails its row under `on_error` and is never sent.
    #[serde(default)]
    pub allowed_topics: Option<Vec<String>>,
    /// The prefix every record's topic must start with: the tenant's `topic_prefix`,
    /// set by `sluice serve`, never read from the file.
    #[serde(skip)]
    pub topic_prefix: Option<String>,
    /// `exactly-once` (default): records and position in one Kafka transaction per
    /// batch; `at-least-once`: the position follows the acknowledged records.
    #[serde(default)]
    pub delivery: DeliveryMode,
    /// The compacted topic that stores the pipeline's position (default
    /// `sluice-position-<pipeline name>`; created if missing). One topic per pipeline, so
    /// that a crashed pipeline's open transaction never holds back another's position.
    #[serde(default)]
    pub position_topic: Option<String>,
    /// How long to wait for Kafka at start-up before giving up (default `30s`).
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Add the change metadata of each record's source row as headers:
    /// `sluice.change_type`, `sluice.commit_version`, `sluice.commit_timestamp`
    /// (microseconds since the epoch). Default false.
    #[serde(default)]
    pub change_headers: bool,
    /// Commit once this many change rows were sent since the last commit (default
    /// 100000). In exactly-once mode a commit ends a Kafka transaction, so this bounds a
    /// transaction's size; a large Delta version spans several transactions.
    #[serde(default = "default_commit_rows")]
    pub commit_rows: u64,
    /// Commit once the oldest uncommitted batch is this old (default `1s`): the longest a
    /// read_committed consumer waits for a record while the pipeline is busy. The
    /// pipeline also commits whenever it has caught up with the table, and at shutdown.
    #[serde(default = "default_commit_interval", with = "humantime_serde")]
    pub commit_interval: Duration,
    /// Also commit at the end of every Delta version, so a version's records become
    /// visible together (unless the version has more than `commit_rows` change rows).
    /// Default false.
    #[serde(default)]
    pub commit_per_version: bool,
    /// Longest a transaction commit or an acknowledgement wait may take (default `60s`).
    #[serde(default = "default_transaction_timeout", with = "humantime_serde")]
    pub transaction_timeout: Duration,
    /// Close the Kafka producer once the table has had no new version for this long
    /// (default `30s`), and connect again when one comes: an idle pipeline then holds no
    /// producer, its threads or its buffers. The first commit after the pause waits for
    /// the connection (in exactly-once mode, the transactions' initialisation too).
    #[serde(default = "default_release_producer_after", with = "humantime_serde")]
    pub release_producer_after: Duration,
    /// librdkafka properties, passed through as given (`bootstrap.servers`,
    /// `security.protocol`, `sasl.mechanism`, `sasl.username`, ...).
    #[serde(default)]
    pub kafka: BTreeMap<String, ScalarValue>,
    /// How the host helpers write records (`emit-encoded`): JSON by default.
    #[serde(default)]
    pub encoding: EncodingSection,
    /// The schema registry framed formats register their schemas with.
    #[serde(default)]
    pub schema_registry: Option<SchemaRegistrySection>,
}

/// `[sink.encoding]`: the format of the records the host helpers make. Records a module
/// makes byte by byte (`emit`, `emit-packed`) are produced as they are.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncodingSection {
    /// `json` (default), `avro`, `json-schema` or `protobuf`; all but `json` in
    /// Confluent's wire format, with a schema registered in the schema registry: derived
    /// from the table, or for `protobuf` the message of `protobuf_schema`.
    #[serde(default)]
    pub value: ValueFormat,
    /// With `value = "protobuf"`: the `.proto` file (relative to the config file).
    #[serde(default)]
    pub protobuf_schema: Option<PathBuf>,
    /// With `value = "protobuf"`: the message's full name (default: the file's first).
    #[serde(default)]
    pub protobuf_message: Option<String>,
    /// The compiled message, read when the config is.
    #[serde(skip)]
    pub protobuf: Option<Arc<ProtobufSchema>>,
    /// With `value = "avro"`: a record schema (`.avsc`, relative to the config file) to
    /// write values with instead of one derived from the table.
    #[serde(default)]
    pub avro_schema: Option<PathBuf>,
    /// With `value = "json-schema"`: the JSON Schema of an object (relative to the
    /// config file) to register instead of one derived from the table.
    #[serde(default)]
    pub json_schema: Option<PathBuf>,
    /// The supplied Avro or JSON Schema, read when the config is.
    #[serde(skip)]
    pub supplied: Option<Arc<SuppliedSchema>>,
    /// `string` (default: the key's value as text) or `avro` (a framed Avro primitive).
    #[serde(default)]
    pub key: KeyFormat,
    /// `none` (default) or `debezium`: each value is a Debezium change event.
    #[serde(default)]
    pub envelope: Envelope,
    /// With the Debezium envelope, follow each delete event with a tombstone (default
    /// true, as Debezium's `tombstones.on.delete`).
    #[serde(default = "default_true")]
    pub tombstones_after_delete: bool,
    /// `topic` (default: `<topic>-value`), `record` (the record's full name) or
    /// `topic-record` (`<topic>-<full name>`), as Confluent's subject name strategies.
    #[serde(default)]
    pub subject_name_strategy: SubjectStrategy,
    /// Name of the value's Avro record and JSON Schema title (default `Value`; the
    /// Debezium envelope's record is `Envelope`).
    #[serde(default)]
    pub record_name: Option<String>,
    /// Namespace of the Avro records (default `sluice`; with the Debezium envelope
    /// `<pipeline>.delta.<table>`, where Debezium's are `<prefix>.<db>.<table>`).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `[sink.schema_registry]`: a registry speaking Confluent's Schema Registry API.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistrySection {
    /// Base address of the API (`https://psrc-xxxxx.region.aws.confluent.cloud`;
    /// Apicurio: `http://host:8080/apis/ccompat/v7`).
    pub url: String,
    /// Basic-auth user (Confluent Cloud: the API key); `${env:}` and `${file:}` work.
    #[serde(default)]
    pub username: Option<String>,
    /// Basic-auth password (Confluent Cloud: the API secret).
    #[serde(default)]
    pub password: Option<String>,
    /// A bearer token instead of basic auth.
    #[serde(default)]
    pub token: Option<String>,
    /// PEM file of the certificate authorities trusted for https (default: the
    /// well-known ones).
    #[serde(default)]
    pub ca_location: Option<PathBuf>,
    /// Longest one registry request may take (default `10s`).
    #[serde(default = "default_registry_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Longest the pipeline waits for a registry that gives no ids (refused connections,
    /// timeouts, 5xx, 429) before it stops (default `10m`; `0s`: stop at the first
    /// failure).
    #[serde(default = "default_registry_max_outage", with = "humantime_serde")]
    pub max_outage: Duration,
    /// The certificates `ca_location` holds, read when the config is.
    #[serde(skip)]
    pub ca_pem: Option<Vec<u8>>,
}

fn default_true() -> bool {
    true
}

fn default_registry_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_registry_max_outage() -> Duration {
    Duration::from_secs(600)
}

/// A TOML scalar used as a string property (`linger.ms = 5` and `"5"` are the same).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ScalarValue {
    /// A string.
    Text(String),
    /// An integer.
    Integer(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Boolean(bool),
}

impl std::fmt::Display for ScalarValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScalarValue::Text(s) => f.write_str(s),
            ScalarValue::Integer(i) => write!(f, "{i}"),
            ScalarValue::Float(x) => write!(f, "{x}"),
            ScalarValue::Boolean(b) => write!(f, "{b}"),
        }
    }
}

/// Where a pipeline without a stored position starts (unset means `Earliest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "StartingVersionText")]
pub enum StartingVersion {
    /// From this version (inclusive).
    Version(u64),
    /// Only versions committed after the pipeline starts.
    Latest,
    /// From version 0.
    Earliest,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StartingVersionText {
    Number(u64),
    Text(String),
}

impl TryFrom<StartingVersionText> for StartingVersion {
    type Error = String;

    fn try_from(value: StartingVersionText) -> Result<StartingVersion, String> {
        match value {
            StartingVersionText::Number(v) => Ok(StartingVersion::Version(v)),
            StartingVersionText::Text(t) => match t.as_str() {
                "latest" => Ok(StartingVersion::Latest),
                "earliest" => Ok(StartingVersion::Earliest),
                _ => Err(format!(
                    "starting_version must be a version number, \"earliest\" or \"latest\", not \"{t}\""
                )),
            },
        }
    }
}

fn default_transaction_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_instances() -> usize {
    1
}
fn default_release_producer_after() -> Duration {
    Duration::from_secs(30)
}
fn default_commit_rows() -> u64 {
    100_000
}
fn default_commit_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_poll_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_batch_rows() -> usize {
    10_000
}
fn default_memory_limit_mib() -> usize {
    PipelineConfig::DEFAULT_MEMORY_LIMIT_MIB
}
fn default_batch_timeout() -> Duration {
    PipelineConfig::DEFAULT_BATCH_TIMEOUT
}
fn default_max_output_mib() -> usize {
    256
}
fn default_compile_timeout() -> Duration {
    CompileBudget::default().deadline
}

fn default_compile_memory_mib() -> usize {
    CompileBudget::default().memory_bytes / (1024 * 1024)
}

fn default_log_messages_per_second() -> u32 {
    20
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(30)
}

/// Resolves a `${env:NAME}` or `${file:PATH}` reference (a file relative to `base`,
/// its trailing newline dropped), so secrets stay out of config files. Other values are
/// kept as given.
pub fn resolve_reference(value: &str, base: &Path) -> Result<String, String> {
    let Some(reference) = value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) else {
        return Ok(value.to_string());
    };
    if let Some(variable) = reference.strip_prefix("env:") {
        return std::env::var(variable)
            .map_err(|_| format!("refers to environment variable {variable}, which is not set"));
    }
    if let Some(path) = reference.strip_prefix("file:") {
        let path = base.join(path);
        return std::fs::read_to_string(&path)
            .map(|text| text.trim_end_matches(['\n', '\r']).to_string())
            .map_err(|e| {
                format!(
                    "refers to file {}, which cannot be read: {e}",
                    path.display()
                )
            });
    }
    Err(format!(
        "has an unknown reference `{value}`; use ${{env:NAME}} or ${{file:PATH}}"
    ))
}

/// Why a config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("Cannot read the pipeline config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The TOML is malformed, has unknown keys or misses required ones.
    #[error("The pipeline config {path} is invalid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// toml's explanation, with the line.
        message: String,
    },
}

impl PipelineConfig {
    /// `[transform] memory_limit_mib` when the config names none.
    pub const DEFAULT_MEMORY_LIMIT_MIB: usize = 256;

    /// `[state] max_keys` when not set.
    pub const DEFAULT_STATE_MAX_KEYS: u64 = 1_000_000;

    /// `[state] max_mib` when not set.
    pub const DEFAULT_STATE_MAX_MIB: u64 = 256;
    /// `[[lookup]] max_mib` when not set.
    pub const DEFAULT_LOOKUP_MAX_MIB: u64 = 1024;

    /// Most `[transform] instances`.
    pub const MAX_INSTANCES: usize = 64;

    /// Guest memory the pipeline's instances may use together, in MiB.
    pub fn guest_memory_mib(&self) -> usize {
        self.transform
            .memory_limit_mib
            .saturating_mul(self.transform.instances)
    }

    /// `[transform] batch_timeout` when the config names none.
    pub const DEFAULT_BATCH_TIMEOUT: Duration = Duration::from_secs(10);

    /// How the source reads the table: batch size, storage options and catalog.
    pub fn source_options(&self) -> SourceOptions {
        SourceOptions {
            batch_rows: self.source.batch_rows,
            storage_options: self.source.storage_options.clone().into_iter().collect(),
            catalog: self.source.catalog.as_ref().and_then(|c| c.client.clone()),
            ..SourceOptions::default()
        }
    }

    /// Reads a config file; relative paths in it are taken from the file's directory.
    pub fn load(path: &Path) -> Result<PipelineConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        PipelineConfig::parse(&text, base).map_err(|message| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses config text; relative paths are taken from `base`.
    pub fn parse(text: &str, base: &Path) -> Result<PipelineConfig, String> {
        let mut config: PipelineConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let name = &config.pipeline.name;
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if name.is_empty() || name.len() > 200 || !name.chars().all(valid) {
            return Err(format!(
                "[pipeline] name `{name}` must be 1 to 200 letters, digits, '.', '_' or '-' (it names Kafka topics and ids)"
            ));
        }
        if config.source.batch_rows == 0 {
            return Err("[source] batch_rows must be at least 1".to_string());
        }
        if !(1..=PipelineConfig::MAX_INSTANCES).contains(&config.transform.instances) {
            return Err(format!(
                "[transform] instances must be 1 to {}, not {}",
                PipelineConfig::MAX_INSTANCES,
                config.transform.instances
            ));
        }
        let start = &config.source;
        if start.starting_timestamp.is_some()
            && (start.starting_version.is_some() || start.snapshot)
        {
            return Err(
                "[source] starting_timestamp cannot be combined with starting_version or snapshot; choose one start".to_string(),
            );
        }
        if let (Some(end), Some(StartingVersion::Version(from))) =
            (start.ending_version, start.starting_version)
            && end < from
        {
            return Err(format!(
                "[source] ending_version {end} is before starting_version {from}; the last version to deliver comes after the first"
            ));
        }
        if start.snapshot && start.starting_version == Some(StartingVersion::Earliest) {
            return Err(
                "[source] snapshot = true starts from the table as of one version: set starting_version to a number or \"latest\", not \"earliest\"".to_string(),
            );
        }
        if config
            .source
            .max_poll_interval
            .is_some_and(|max| max < config.source.poll_interval)
        {
            return Err(
                "[source] max_poll_interval must not be shorter than poll_interval".to_string(),
            );
        }
        if config.sink.commit_rows == 0 {
            return Err("[sink] commit_rows must be at least 1".to_string());
        }
        if config.sink.commit_interval >= config.sink.transaction_timeout {
            return Err(format!(
                "[sink] commit_interval ({:?}) must be shorter than transaction_timeout ({:?}): Kafka aborts a transaction that stays open longer than twice transaction_timeout",
                config.sink.commit_interval, config.sink.transaction_timeout
            ));
        }
        match (
            config.transform.on_error,
            &config.transform.dead_letter_topic,
        ) {
            (ErrorPolicy::DeadLetter, None) => {
                return Err(
                    "[transform] on_error = \"dead-letter\" needs dead_letter_topic: the topic failed rows go to".to_string(),
                );
            }
            (_, Some(topic)) if *topic == config.sink.topic => {
                return Err(format!(
                    "[transform] dead_letter_topic `{topic}` is the pipeline's own topic; give dead letters a topic of their own"
                ));
            }
            _ => {}
        }
        for entry in config.sink.allowed_topics.iter().flatten() {
            let start = entry.strip_suffix('*').unwrap_or(entry);
            if start.is_empty() || start.contains('*') {
                return Err(format!(
                    "[sink] allowed_topics entry `{entry}` must be a topic name, or the start of one followed by `*`"
                ));
            }
        }
        if config
            .transform
            .recycle_memory_mib
            .is_some_and(|mib| mib > config.transform.memory_limit_mib)
        {
            return Err(
                "[transform] recycle_memory_mib must not be above memory_limit_mib".to_string(),
            );
        }
        if config.transform.compile_timeout.is_zero() || config.transform.compile_memory_mib == 0 {
            return Err(
                "[transform] compile_timeout and compile_memory_mib must be above 0".to_string(),
            );
        }
        if let Some(state) = config.state.as_mut() {
            if config.sink.delivery != DeliveryMode::ExactlyOnce {
                return Err(
                    "[state] needs [sink] delivery = \"exactly-once\": state changes are committed with the records, and at-least-once would apply a redone batch's changes twice".to_string(),
                );
            }
            if config.transform.instances != 1 {
                return Err(
                    "[state] needs [transform] instances = 1: batches change the state one after another".to_string(),
                );
            }
            if state.max_keys == 0 || state.max_mib == 0 || state.max_value_kib == 0 {
                return Err(
                    "[state] max_keys, max_mib and max_value_kib must be above 0".to_string(),
                );
            }
            let pipeline = &config.pipeline.name;
            state.dir = match state.dir.take() {
                Some(dir) => Some(base.join(dir)),
                None => std::env::var_os("HOME").map(|home| {
                    PathBuf::from(home)
                        .join(".cache/sluice/state")
                        .join(file_name_of(pipeline))
                }),
            };
            if state.dir.is_none() {
                return Err(
                    "[state] dir is not set and there is no HOME to keep the state under; set dir"
                        .to_string(),
                );
            }
        }
        check_lookups(&mut config.lookups, base)?;
        config.transform.module = base.join(&config.transform.module);
        config.transform.module_cache_dir = match config.transform.module_cache_dir.take() {
            Some(dir) if dir.as_os_str().is_empty() => None,
            Some(dir) => Some(base.join(dir)),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/sluice/modules")),
        };
        for (name, value) in config.sink.kafka.iter_mut() {
            if let ScalarValue::Text(text) = value {
                *text = resolve_reference(text, base)
                    .map_err(|e| format!("[sink.kafka] `{name}` {e}"))?;
            }
        }
        match config.source.catalog.as_mut() {
            Some(catalog) => {
                TableName::parse(&config.source.table).map_err(|e| format!("[source] {e}"))?;
                let token = catalog
                    .token
                    .as_deref()
                    .map(|token| resolve_reference(token, base))
                    .transpose()
                    .map_err(|e| format!("[source.catalog] token {e}"))?;
                let client = UnityCatalog::new(&catalog.url, token).map_err(|e| e.to_string())?;
                catalog.client = Some(Arc::new(client));
            }
            None if !config.source.table.contains("://") => {
                config.source.table = base.join(&config.source.table).display().to_string();
            }
            None => {}
        }
        config.check_encoding(base)?;
        Ok(config)
    }

    /// The source's options for reading lookup table `table`.
    pub fn lookup_options(&self) -> SourceOptions {
        SourceOptions {
            catalog: None,
            ..self.source_options()
        }
    }

    /// Checks `[sink.encoding]` against `[sink.schema_registry]` and resolves the
    /// registry's secret references and paths.
    fn check_encoding(&mut self, base: &Path) -> Result<(), String> {
        let encoding = &mut self.sink.encoding;
        for (key, value, dotted) in [
            ("record_name", &encoding.record_name, false),
            ("namespace", &encoding.namespace, true),
        ] {
            if let Some(problem) = value.as_deref().and_then(|v| invalid_avro_name(v, dotted)) {
                return Err(format!("[sink.encoding] {key} {problem}"));
            }
        }
        match (encoding.value, &encoding.protobuf_schema) {
            (ValueFormat::Protobuf, None) => {
                return Err(
                    "[sink.encoding] value = \"protobuf\" needs protobuf_schema: the .proto file whose message values are written as".to_string(),
                );
            }
            (ValueFormat::Protobuf, Some(path)) => {
                if encoding.envelope == Envelope::Debezium {
                    return Err(
                        "[sink.encoding] envelope = \"debezium\" is written as avro, json-schema or json, not protobuf".to_string(),
                    );
                }
                let schema =
                    ProtobufSchema::compile(&base.join(path), encoding.protobuf_message.as_deref())
                        .map_err(|e| format!("[sink.encoding] protobuf_schema: {e}"))?;
                encoding.protobuf = Some(Arc::new(schema));
            }
            (_, Some(_)) => {
                return Err(
                    "[sink.encoding] protobuf_schema is only used with value = \"protobuf\""
                        .to_string(),
                );
            }
            (_, None) => {}
        }
        for (key, path, format, read) in [
            (
                "avro_schema",
                encoding.avro_schema.clone(),
                ValueFormat::Avro,
                SuppliedSchema::read_avro as fn(&Path) -> Result<SuppliedSchema, String>,
            ),
            (
                "json_schema",
                encoding.json_schema.clone(),
                ValueFormat::JsonSchema,
                SuppliedSchema::read_json_schema,
            ),
        ] {
            let Some(path) = path else { continue };
            if encoding.value != format {
                return Err(format!(
                    "[sink.encoding] {key} is only used with value = \"{}\"",
                    format.name()
                ));
            }
            let schema =
                read(&base.join(&path)).map_err(|e| format!("[sink.encoding] {key}: {e}"))?;
            encoding.supplied = Some(Arc::new(schema));
        }
        // A supplied schema's record name (an .avsc's, a titled JSON Schema's) or a
        // Protobuf message names the record; otherwise record_name must.
        // Without helpers' framing only a module's own schemas (named themselves) frame.
        let helpers_frame = encoding.value != ValueFormat::Json || encoding.key == KeyFormat::Avro;
        let named = !helpers_frame
            || encoding.value == ValueFormat::Protobuf
            || encoding.supplied.as_ref().is_some_and(|s| s.name.is_some());
        if encoding.subject_name_strategy != SubjectStrategy::Topic
            && encoding.record_name.is_none()
            && !named
        {
            return Err(
                "[sink.encoding] subject_name_strategy names subjects after the record: set record_name (and namespace) so this pipeline's subjects are its own".to_string(),
            );
        }
        let encoding = &self.sink.encoding;
        let framed = encoding.value != ValueFormat::Json || encoding.key == KeyFormat::Avro;
        match self.sink.schema_registry.as_mut() {
            None if framed => Err(format!(
                "[sink.encoding] {} needs a schema registry: add [sink.schema_registry] with its url",
                if encoding.value != ValueFormat::Json {
                    format!("value = \"{}\"", encoding.value.name())
                } else {
                    "key = \"avro\"".to_string()
                }
            )),
            None => Ok(()),
            Some(registry) => {
                for (name, value) in [
                    ("url", Some(&mut registry.url)),
                    ("username", registry.username.as_mut()),
                    ("password", registry.password.as_mut()),
                    ("token", registry.token.as_mut()),
                ] {
                    if let Some(value) = value {
                        *value = resolve_reference(value, base)
                            .map_err(|e| format!("[sink.schema_registry] `{name}` {e}"))?;
                    }
                }
                if !registry.url.starts_with("http://") && !registry.url.starts_with("https://") {
                    return Err(format!(
                        "[sink.schema_registry] url `{}` must start with http:// or https://",
                        registry.url
                    ));
                }
                match (&registry.username, &registry.password, &registry.token) {
                    (Some(_), None, _) | (None, Some(_), _) => Err(
                        "[sink.schema_registry] username and password go together (Confluent Cloud: API key and secret)".to_string(),
                    ),
                    (Some(_), Some(_), Some(_)) => Err(
                        "[sink.schema_registry] has both username/password and token; choose one".to_string(),
                    ),
                    _ => {
                        if let Some(path) = &registry.ca_location {
                            let path = base.join(path);
                            registry.ca_pem = Some(std::fs::read(&path).map_err(|e| {
                                format!(
                                    "[sink.schema_registry] ca_location {} cannot be read: {e}",
                                    path.display()
                                )
                            })?);
                            registry.ca_location = Some(path);
                        }
                        // The certificates are read now, so a bad file is a config error.
                        let settings = self.registry_settings().expect("a registry is configured");
                        sluice_registry::HttpRegistry::new(&settings)
                            .map(drop)
                            .map_err(|e| format!("[sink.schema_registry] {e}"))
                    }
                }
            }
        }
    }

    /// How the host helpers write this pipeline's records.
    pub fn format(&self) -> Format {
        let encoding = &self.sink.encoding;
        let defaults = Format::default();
        Format {
            value: encoding.value,
            key: encoding.key,
            envelope: encoding.envelope,
            tombstones_after_delete: encoding.tombstones_after_delete,
            record_name: encoding.record_name.clone().unwrap_or(defaults.record_name),
            namespace: match (&encoding.namespace, encoding.envelope) {
                (Some(namespace), _) => namespace.clone(),
                (None, Envelope::Debezium) => {
                    debezium_namespace(&self.pipeline.name, &self.source.table)
                }
                (None, Envelope::None) => defaults.namespace,
            },
            pipeline: self.pipeline.name.clone(),
            table: self.source.table.clone(),
            protobuf: encoding.protobuf.clone(),
            supplied: encoding.supplied.clone(),
        }
    }

    /// How to reach the schema registry, when there is one.
    pub fn registry_settings(&self) -> Option<RegistrySettings> {
        let registry = self.sink.schema_registry.as_ref()?;
        let auth = match (&registry.username, &registry.password, &registry.token) {
            (Some(username), Some(password), _) => RegistryAuth::Basic {
                username: username.clone(),
                password: password.clone(),
            },
            (_, _, Some(token)) => RegistryAuth::Bearer(token.clone()),
            _ => RegistryAuth::None,
        };
        Some(RegistrySettings {
            url: registry.url.clone(),
            auth,
            ca_pem: registry.ca_pem.clone(),
            timeout: registry.timeout,
        })
    }

    /// The Kafka properties as strings.
    pub fn kafka_properties(&self) -> BTreeMap<String, String> {
        self.sink
            .kafka
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }

    /// The topic holding the pipeline's state changes, if it keeps state.
    pub fn changelog_topic(&self) -> Option<String> {
        let state = self.state.as_ref()?;
        Some(
            state
                .changelog_topic
                .clone()
                .unwrap_or_else(|| format!("sluice-state-{}", file_name_of(&self.pipeline.name))),
        )
    }

    /// The topic holding the pipeline's position.
    pub fn position_topic(&self) -> String {
        self.sink
            .position_topic
            .clone()
            .unwrap_or_else(|| format!("sluice-position-{}", self.pipeline.name))
    }

    /// The transform parameters as strings.
    pub fn transform_params(&self) -> Vec<(String, String)> {
        self.transform
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }
}

/// A pipeline's name as a topic or file name: characters Kafka and file systems do not
/// take become `_`.
fn file_name_of(pipeline: &str) -> String {
    pipeline
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect()
}

/// Checks the `[[lookup]]` sections and resolves their tables' relative paths.
fn check_lookups(lookups: &mut [LookupSection], base: &Path) -> Result<(), String> {
    let mut names = std::collections::BTreeSet::new();
    for lookup in lookups.iter_mut() {
        let name = &lookup.name;
        if name.is_empty() || !names.insert(name.clone()) {
            return Err(format!(
                "[[lookup]] name `{name}` must be set and differ from every other lookup's"
            ));
        }
        if lookup.key.is_empty() || lookup.columns.is_empty() {
            return Err(format!(
                "[[lookup]] {name}: key and columns must each name at least one column"
            ));
        }
        if let Some(column) = lookup.columns.iter().find(|c| lookup.key.contains(c)) {
            return Err(format!(
                "[[lookup]] {name}: `{column}` is a key column; columns lists what is kept beside the key"
            ));
        }
        if lookup.max_mib == 0 || lookup.cache_mib == 0 {
            return Err(format!(
                "[[lookup]] {name}: max_mib and cache_mib must be above 0"
            ));
        }
        if !lookup.table.contains("://") {
            lookup.table = base.join(&lookup.table).display().to_string();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const MINIMAL: &str = r#"
        [pipeline]
        name = "deals"
        [source]
        table = "tables/deals"
        [transform]
        module = "gold-deals.wasm"
        [sink]
        topic = "deals-gold"
        [sink.kafka]
        "bootstrap.servers" = "127.0.0.1:9092"
        "linger.ms" = 5
    "#;

    #[test]
    fn defaults_and_relative_paths() {
        let config = PipelineConfig::parse(MINIMAL, Path::new("/etc/sluice")).unwrap();
        assert_eq!(config.source.table, "/etc/sluice/tables/deals");
        assert_eq!(
            config.transform.module,
            Path::new("/etc/sluice/gold-deals.wasm")
        );
        assert_eq!(config.sink.delivery, DeliveryMode::ExactlyOnce);
        assert_eq!(config.position_topic(), "sluice-position-deals");
        assert_eq!(config.source.poll_interval, Duration::from_secs(1));
        assert_eq!(config.source.starting_version, None);
        assert!(!config.source.snapshot);
        assert_eq!(config.kafka_properties()["linger.ms"], "5");
    }

    #[test]
    fn a_catalog_names_the_table_and_its_token_comes_from_a_reference() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("uc.token"), "dapi-secret\n").unwrap();
        let with = |table: &str, catalog: &str| {
            let text = MINIMAL.replace("table = \"tables/deals\"", &format!("table = \"{table}\""));
            PipelineConfig::parse(
                &format!("{text}\n[source.catalog]\n{catalog}\n"),
                dir.path(),
            )
        };
        let config = with(
            "main.sales.deals",
            "url = \"https://workspace.example\"\ntoken = \"${file:uc.token}\"",
        )
        .unwrap();
        assert_eq!(config.source.table, "main.sales.deals");
        let catalog = config.source_options().catalog.unwrap();
        assert_eq!(
            catalog.describe(),
            "Unity Catalog at https://workspace.example"
        );
        // The secret is in the client only, which shows its URL.
        assert!(!format!("{config:?}").contains("dapi-secret"));
        let error = with("tables/deals", "url = \"http://127.0.0.1:8080\"").unwrap_err();
        assert!(
            error.starts_with("[source] `tables/deals` is not a catalog table name"),
            "{error}"
        );
        let error = with("main.sales.deals", "url = \"127.0.0.1:8080\"").unwrap_err();
        assert!(
            error.contains("[source.catalog] url `127.0.0.1:8080`"),
            "{error}"
        );
        let error = with(
            "main.sales.deals",
            "url = \"http://c\"\ntoken = \"${env:SLUICE_SURELY_UNSET_VARIABLE}\"",
        )
        .unwrap_err();
        assert!(
            error.starts_with("[source.catalog] token refers to environment variable"),
            "{error}"
        );
        let error = with("main.sales.deals", "url = \"http://c\"\nbearer = \"x\"").unwrap_err();
        assert!(error.contains("unknown field `bearer`"), "{error}");
    }

    #[test]
    fn a_registry_outage_is_waited_out_for_ten_minutes_unless_configured() {
        let with = |lines: &str| {
            let text = format!(
                "{MINIMAL}\n[sink.encoding]\nvalue = \"avro\"\n[sink.schema_registry]\nurl = \"http://127.0.0.1:1\"\n{lines}\n"
            );
            let config = PipelineConfig::parse(&text, Path::new("/")).unwrap();
            config.sink.schema_registry.unwrap().max_outage
        };
        assert_eq!(with(""), Duration::from_secs(600));
        assert_eq!(with("max_outage = \"90s\""), Duration::from_secs(90));
        assert_eq!(with("max_outage = \"0s\""), Duration::ZERO);
    }

    #[test]
    fn supplied_schemas_are_read_with_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("deal.avsc"),
            r#"{"type": "record", "name": "Deal", "namespace": "crm", "fields": []}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("list.avsc"), r#"{"type": "array"}"#).unwrap();
        let with = |encoding: &str| {
            let text = format!(
                "{MINIMAL}\n[sink.encoding]\n{encoding}\n[sink.schema_registry]\nurl = \"http://127.0.0.1:1\"\n"
            );
            PipelineConfig::parse(&text, dir.path())
        };
        let config = with(
            "value = \"avro\"\navro_schema = \"deal.avsc\"\nsubject_name_strategy = \"record\"",
        )
        .unwrap();
        assert_eq!(config.format().value_name(), "crm.Deal");
        let error = with("value = \"avro\"\navro_schema = \"list.avsc\"").unwrap_err();
        assert!(error.contains("must be a record"), "{error}");
        let error = with("value = \"avro\"\navro_schema = \"none.avsc\"").unwrap_err();
        assert!(
            error.starts_with("[sink.encoding] avro_schema: the Avro schema")
                && error.contains("cannot be read"),
            "{error}"
        );
        let error = with("value = \"json-schema\"\navro_schema = \"deal.avsc\"").unwrap_err();
        assert_eq!(
            error,
            "[sink.encoding] avro_schema is only used with value = \"avro\""
        );
        // A JSON Schema must describe the objects values are.
        let config = with("value = \"json-schema\"\njson_schema = \"deal.json\"");
        assert!(config.unwrap_err().contains("cannot be read"));
        std::fs::write(
            dir.path().join("deal.json"),
            r#"{"type": "object", "title": "crm.Deal"}"#,
        )
        .unwrap();
        let config = with(
            "value = \"json-schema\"\njson_schema = \"deal.json\"\nsubject_name_strategy = \"record\"",
        )
        .unwrap();
        assert_eq!(config.format().value_name(), "crm.Deal");
        let error = with("value = \"json-schema\"\njson_schema = \"list.avsc\"").unwrap_err();
        assert!(error.contains("must describe an object"), "{error}");
        let error = with("value = \"avro\"\njson_schema = \"deal.json\"").unwrap_err();
        assert_eq!(
            error,
            "[sink.encoding] json_schema is only used with value = \"json-schema\""
        );
    }

    #[test]
    fn debezium_records_are_named_after_the_pipeline_and_table_unless_a_namespace_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let with = |encoding: &str| {
            let text = format!("{MINIMAL}\n[sink.encoding]\n{encoding}\n");
            PipelineConfig::parse(&text, dir.path()).unwrap().format()
        };
        let debezium = with("envelope = \"debezium\"");
        assert_eq!(debezium.value_name(), "deals.delta.deals.Envelope");
        let named = with("envelope = \"debezium\"\nnamespace = \"crm.gold\"");
        assert_eq!(named.value_name(), "crm.gold.Envelope");
        assert_eq!(with("").namespace, "sluice");
    }

    #[test]
    fn starting_version_takes_numbers_and_keywords() {
        let with = |v: &str| {
            PipelineConfig::parse(
                &MINIMAL.replace(
                    "[transform]",
                    &format!("starting_version = {v}\n[transform]"),
                ),
                Path::new("."),
            )
        };
        assert_eq!(
            with("7").unwrap().source.starting_version,
            Some(StartingVersion::Version(7))
        );
        assert_eq!(
            with("\"latest\"").unwrap().source.starting_version,
            Some(StartingVersion::Latest)
        );
        assert!(with("\"yesterday\"").is_err());
        let ending = with("3\nending_version = 2").unwrap_err().to_string();
        assert!(
            ending.contains("ending_version 2 is before starting_version 3"),
            "{ending}"
        );
        assert_eq!(
            with("3\nending_version = 3").unwrap().source.ending_version,
            Some(3)
        );
    }

    #[test]
    fn starts_are_a_version_a_timestamp_or_a_snapshot() {
        let with = |lines: &str| {
            PipelineConfig::parse(
                &MINIMAL.replace("[transform]", &format!("{lines}\n[transform]")),
                Path::new("."),
            )
        };
        let at = with("starting_timestamp = \"2024-01-15T10:30:00Z\"").unwrap();
        assert_eq!(
            at.source.starting_timestamp,
            Some(std::time::UNIX_EPOCH + Duration::from_secs(1_705_314_600))
        );
        assert!(with("snapshot = true").unwrap().source.snapshot);
        let both = with("starting_timestamp = \"2024-01-15T10:30:00Z\"\nstarting_version = 3");
        assert!(both.unwrap_err().contains("choose one start"));
        let earliest = with("snapshot = true\nstarting_version = \"earliest\"");
        assert!(earliest.unwrap_err().contains("not \"earliest\""));
        assert!(with("starting_timestamp = \"last tuesday\"").is_err());
    }

    #[test]
    fn pipeline_names_must_fit_kafka_names() {
        let err = PipelineConfig::parse(
            &MINIMAL.replace("name = \"deals\"", "name = \"deals gold\""),
            Path::new("."),
        )
        .unwrap_err();
        assert!(err.contains("deals gold"), "{err}");
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let err = PipelineConfig::parse(
            &MINIMAL.replace("[sink]", "[sink]\ntopik = \"x\""),
            Path::new("."),
        )
        .unwrap_err();
        assert!(err.contains("topik"), "{err}");
    }

    #[test]
    fn delivery_modes_are_named_in_kebab_case() {
        let with = |mode: &str| {
            PipelineConfig::parse(
                &MINIMAL.replace(
                    "[sink.kafka]",
                    &format!("delivery = \"{mode}\"\n[sink.kafka]"),
                ),
                Path::new("."),
            )
        };
        assert_eq!(
            with("at-least-once").unwrap().sink.delivery,
            DeliveryMode::AtLeastOnce
        );
        assert!(with("maybe-once").is_err());
    }

    #[test]
    fn commits_must_come_before_kafka_aborts_the_transaction() {
        let with = |sink: &str| {
            PipelineConfig::parse(
                &MINIMAL.replace("[sink.kafka]", &format!("{sink}\n[sink.kafka]")),
                Path::new("."),
            )
        };
        let config = with("").unwrap();
        assert_eq!(config.sink.commit_rows, 100_000);
        assert_eq!(config.sink.commit_interval, Duration::from_secs(1));
        let err = with("commit_interval = \"2m\"").unwrap_err();
        assert!(err.contains("commit_interval (120s)"), "{err}");
        assert!(err.contains("transaction_timeout (60s)"), "{err}");
        assert!(with("commit_rows = 0").unwrap_err().contains("commit_rows"));
    }

    #[test]
    fn secrets_come_from_the_environment_or_files() {
        let dir = std::env::temp_dir().join(format!("sluice-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("password"), "from-file\n").unwrap();
        let with = |value: &str| {
            PipelineConfig::parse(
                &MINIMAL.replace(
                    "\"linger.ms\" = 5",
                    &format!("\"sasl.password\" = \"{value}\""),
                ),
                &dir,
            )
        };
        let from_file = with("${file:password}").unwrap();
        assert_eq!(from_file.kafka_properties()["sasl.password"], "from-file");
        let home = with("${env:HOME}").unwrap();
        assert_eq!(
            home.kafka_properties()["sasl.password"],
            std::env::var("HOME").unwrap()
        );
        let err = with("${env:SLUICE_SURELY_UNSET_VARIABLE}").unwrap_err();
        assert!(
            err.contains("SLUICE_SURELY_UNSET_VARIABLE") && err.contains("sasl.password"),
            "{err}"
        );
        assert!(with("${vault:x}").is_err());
    }

    #[test]
    fn urls_are_kept_as_given() {
        let config = PipelineConfig::parse(
            &MINIMAL.replace("tables/deals", "s3://bucket/deals"),
            Path::new("/x"),
        )
        .unwrap();
        assert_eq!(config.source.table, "s3://bucket/deals");
    }

    #[test]
    fn allowed_topics_are_names_or_starts_and_the_prefix_is_not_the_file_s() {
        let with = |sink: &str| {
            PipelineConfig::parse(
                &MINIMAL.replace(
                    "topic = \"deals-gold\"",
                    &format!("topic = \"deals-gold\"\n{sink}"),
                ),
                Path::new("/x"),
            )
        };
        let config = with("allowed_topics = [\"audit\", \"by-country.*\"]").unwrap();
        assert_eq!(
            config.sink.allowed_topics.as_deref(),
            Some(&["audit".to_string(), "by-country.*".to_string()][..])
        );
        assert_eq!(with("").unwrap().sink.allowed_topics, None);
        for bad in ["\"\"", "\"*\"", "\"a*b\"", "\"a**\""] {
            let err = with(&format!("allowed_topics = [{bad}]")).unwrap_err();
            assert!(err.contains("allowed_topics"), "{bad}: {err}");
        }
        let err = with("topic_prefix = \"any.\"").unwrap_err();
        assert!(err.contains("topic_prefix"), "{err}");
    }

    #[test]
    fn lookups_resolve_their_tables_and_refuse_clashing_names_and_key_columns_kept() {
        let lookup = |name: &str, columns: &str| {
            format!(
                "\n[[lookup]]\nname = \"{name}\"\ntable = \"tables/owners\"\nkey = [\"owner_id\"]\ncolumns = {columns}\n"
            )
        };
        let text = format!("{MINIMAL}{}", lookup("owners", r#"["name"]"#));
        let config = PipelineConfig::parse(&text, Path::new("/etc/sluice")).unwrap();
        let owners = &config.lookups[0];
        assert_eq!(owners.table, "/etc/sluice/tables/owners");
        assert_eq!(owners.consistency, Consistency::AsOf);
        assert_eq!(owners.max_wait, Duration::from_secs(30));
        assert_eq!(owners.max_mib, PipelineConfig::DEFAULT_LOOKUP_MAX_MIB);
        let twice = format!(
            "{MINIMAL}{}{}",
            lookup("owners", r#"["name"]"#),
            lookup("owners", r#"["region"]"#)
        );
        let err = PipelineConfig::parse(&twice, Path::new("/")).unwrap_err();
        assert!(err.contains("differ from every other lookup's"), "{err}");
        let kept_key = format!("{MINIMAL}{}", lookup("owners", r#"["owner_id"]"#));
        let err = PipelineConfig::parse(&kept_key, Path::new("/")).unwrap_err();
        assert!(err.contains("`owner_id` is a key column"), "{err}");
        let latest = text.replace(
            "columns = [\"name\"]",
            "columns = [\"name\"]\nconsistency = \"latest\"",
        );
        let config = PipelineConfig::parse(&latest, Path::new("/")).unwrap();
        assert_eq!(config.lookups[0].consistency, Consistency::Latest);
    }

    /// The options docs/configuration.md lists in the table under `heading`, the names
    /// in backticks in each row's first cell.
    fn documented(docs: &str, heading: &str) -> BTreeSet<String> {
        let table = docs
            .split_once(&format!("# `{heading}`\n"))
            .unwrap_or_else(|| panic!("docs/configuration.md has no section {heading}"))
            .1;
        table
            .lines()
            .take_while(|line| !line.starts_with('#'))
            .filter(|line| line.starts_with("| `"))
            .flat_map(|line| {
                let first_cell = line.split('|').nth(1).unwrap_or_default();
                first_cell
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The options the config accepts in `section`, as serde lists them when it refuses
    /// an unknown one.
    fn accepted(section: &str) -> BTreeSet<String> {
        let mut sections = vec![
            ("pipeline", vec!["name = \"deals\""]),
            ("source", vec!["table = \"t\""]),
            ("source.catalog", vec!["url = \"http://127.0.0.1:8080\""]),
            ("transform", vec!["module = \"m.wasm\""]),
            ("sink", vec!["topic = \"t\""]),
            ("sink.encoding", vec![]),
            (
                "sink.schema_registry",
                vec!["url = \"http://127.0.0.1:8081\""],
            ),
            (
                "sink.kafka",
                vec!["\"bootstrap.servers\" = \"127.0.0.1:9092\""],
            ),
        ];
        let mut text = String::new();
        for (name, lines) in &mut sections {
            if *name == section {
                lines.push("zz_not_an_option = 1");
            }
            text.push_str(&format!("[{name}]\n{}\n", lines.join("\n")));
        }
        let error = PipelineConfig::parse(&text, Path::new("/")).unwrap_err();
        let expected = error
            .split_once("expected")
            .unwrap_or_else(|| panic!("{section}: {error}"))
            .1;
        // Tables inside the section have sections of their own in the docs.
        let tables = [
            "source.catalog",
            "transform.params",
            "sink.kafka",
            "sink.encoding",
            "sink.schema_registry",
        ];
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|name| !tables.contains(&format!("{section}.{name}").as_str()))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_docs_list_every_option_of_every_section_and_no_other() {
        let docs = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
        )
        .unwrap();
        for section in [
            "pipeline",
            "source",
            "source.catalog",
            "transform",
            "sink",
            "sink.encoding",
            "sink.schema_registry",
        ] {
            assert_eq!(
                documented(&docs, &format!("[{section}]")),
                accepted(section),
                "[{section}]: docs/configuration.md (left) and the config (right) differ"
            );
        }
    }
}
