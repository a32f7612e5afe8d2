//! Helpers for Sluice's integration tests: the broker the test command started, guest
//! components built from `transforms/`, Delta tables written by `scripts/deals_table.py`,
//! the `sluice` binary, and a read_committed consumer.

pub mod hostile;
pub mod service;
pub mod stores;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Creates `topic` with one partition and `replication` replicas (Kafka's `-1` for the
/// broker's default), over PLAINTEXT at `bootstrap`.
pub fn create_topic(bootstrap: &str, topic: &str, replication: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("an admin client");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let results = runtime
        .block_on(admin.create_topics(
            &[NewTopic::new(
                topic,
                1,
                TopicReplication::Fixed(replication),
            )],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .expect("the broker answers");
    for result in results {
        match result {
            // Topic names are unique per test: an existing one is this request's own,
            // retried by the client after a broker of a busy cluster answered late.
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => panic!("creating {topic} failed: {code}"),
        }
    }
}

/// `bootstrap.servers` of the broker `scripts/test.sh` started.
pub fn kafka_bootstrap() -> String {
    std::env::var("SLUICE_TEST_KAFKA").expect(
        "SLUICE_TEST_KAFKA is not set: run the suite with scripts/test.sh, which starts a Kafka broker (or start one with scripts/kafka.sh start and export SLUICE_TEST_KAFKA=127.0.0.1:19092)",
    )
}

/// The address of one of the single broker's secured listeners (`SASL_SSL`, `MTLS`,
/// `OAUTH`, `ELSEWHERE`; see scripts/kafka.sh), from `SLUICE_TEST_KAFKA_<NAME>`.
pub fn kafka_listener(name: &str) -> String {
    let variable = format!("SLUICE_TEST_KAFKA_{name}");
    std::env::var(&variable)
        .unwrap_or_else(|_| panic!("{variable} is not set: run the suite with scripts/test.sh"))
}

/// A file the broker's start made in its run directory (`tls/ca.crt`, `tls/client.key`,
/// `scram-password`, `oidc.log`), from `SLUICE_TEST_KAFKA_DIR`.
pub fn kafka_run_file(path: &str) -> String {
    let dir = std::env::var("SLUICE_TEST_KAFKA_DIR")
        .expect("SLUICE_TEST_KAFKA_DIR is not set: run the suite with scripts/test.sh");
    Path::new(&dir).join(path).to_string_lossy().into_owned()
}

/// The base URL of the OIDC token server the broker's OAUTHBEARER listener trusts, from
/// `SLUICE_TEST_OIDC`; issuers `kafka`, `expired` and `stranger` (see scripts/kafka.sh).
pub fn oidc_url() -> String {
    std::env::var("SLUICE_TEST_OIDC")
        .expect("SLUICE_TEST_OIDC is not set: run the suite with scripts/test.sh")
}

/// The Confluent API address of the schema registry `scripts/test.sh` started, from
/// `SLUICE_TEST_REGISTRY`.
pub fn registry_url() -> String {
    std::env::var("SLUICE_TEST_REGISTRY").expect(
        "SLUICE_TEST_REGISTRY is not set: run the suite with scripts/test.sh, which starts a schema registry (or start one with scripts/registry.sh start and export SLUICE_TEST_REGISTRY=$(scripts/registry.sh url))",
    )
}

/// The committed records of `topic` as (key, value) text, `<none>` for a missing key
/// or a tombstone's value.
pub fn consumed_key_values(topic: &str) -> Vec<(String, String)> {
    consume_all(topic)
        .into_iter()
        .map(|c| {
            (
                c.key.unwrap_or_else(|| "<none>".into()),
                c.value.unwrap_or_else(|| "<none>".into()),
            )
        })
        .collect()
}

/// Every committed record of `topic` as `key<TAB>value` lines, decoded by Confluent's
/// own deserializers against the test registry (`tests/support/registry_consumer.py`):
/// `format` is `avro` or `json-schema`; `flags` as the script takes them.
pub fn registry_decoded(topic: &str, format: &str, flags: &[&str]) -> Vec<String> {
    registry_decoded_at(&registry_url(), topic, format, flags)
}

/// The https address of the second test registry, which wants credentials (see
/// `scripts/registry.sh secured-start`), from `SLUICE_TEST_REGISTRY_SECURED`.
pub fn secured_registry_url() -> String {
    std::env::var("SLUICE_TEST_REGISTRY_SECURED").expect(
        "SLUICE_TEST_REGISTRY_SECURED is not set: run the suite with scripts/test.sh, which starts the secured schema registry",
    )
}

/// [`registry_decoded`] against the registry at `registry`.
pub fn registry_decoded_at(
    registry: &str,
    topic: &str,
    format: &str,
    flags: &[&str],
) -> Vec<String> {
    let output = Command::new("python3")
        .arg(repo_root().join("tests/support/registry_consumer.py"))
        .args([&kafka_bootstrap(), topic, registry, format])
        .args(flags)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "decoding {topic} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// What Flink SQL's `'format' = 'debezium-json'` makes of each record value (`None` a
/// tombstone) for a table of `columns` (`name:TYPE`), through Flink's own deserializer
/// (`tests/support/flink-debezium/FlinkDebeziumRead.java`): one array of emitted rows
/// per value, each `{"kind", "row", metadata columns by key}`.
pub fn flink_debezium_read(columns: &[&str], values: &[Option<String>]) -> Vec<serde_json::Value> {
    let mut input = String::new();
    for value in values {
        assert!(
            !value.as_deref().unwrap_or_default().contains('\n'),
            "one value a line"
        );
        input.push_str(value.as_deref().unwrap_or_default());
        input.push('\n');
    }
    let mut child = java_reader("flink-debezium", "FlinkDebeziumRead.java")
        .args(columns)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java runs");
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the reader's output could fill its pipe meanwhile.
    let writer = std::thread::spawn(move || {
        use std::io::Write as _;
        stdin.write_all(input.as_bytes())
    });
    let output = child.wait_with_output().expect("java exits");
    writer.join().unwrap().expect("the values are written");
    assert!(
        output.status.success(),
        "Flink's debezium-json refused the events: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// What a Kafka Connect sink makes of `topic`'s Avro Debezium events: each record read
/// with a registry-backed AvroConverter, unwrapped by Debezium's `ExtractNewRecordState`
/// (deletes rewritten with `__deleted`, tombstones dropped, the fields `add_fields` names
/// added as `__<field>`) and written by Kafka Connect's JsonConverter
/// (`tests/support/connect-debezium/ConnectDebeziumRead.java`): one `{"schema", "value"}`
/// per record, `null` where the transform dropped it.
pub fn connect_debezium_read(topic: &str, add_fields: &str) -> Vec<serde_json::Value> {
    let output = java_reader("connect-debezium", "ConnectDebeziumRead.java")
        .args([&kafka_bootstrap(), topic, &registry_url(), add_fields])
        .output()
        .expect("java runs");
    assert!(
        output.status.success(),
        "Kafka Connect's path refused the events: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// A `java` command that runs the Java reader `file` of `tests/support/<folder>` on the
/// jars `tests/support/install_jars.sh` installs (here if setup has not).
fn java_reader(folder: &str, file: &str) -> Command {
    let support = repo_root().join("tests/support");
    let install = Command::new(support.join("install_jars.sh"))
        .arg(folder)
        .stderr(Stdio::inherit())
        .output()
        .expect("install_jars.sh runs");
    assert!(
        install.status.success(),
        "installing the jars of {folder} failed"
    );
    let libs = String::from_utf8_lossy(&install.stdout).trim().to_string();
    let mut java = Command::new("java");
    java.arg("-cp")
        .arg(format!("{libs}/*"))
        .arg(support.join(folder).join(file));
    java
}

/// A topic name no other test uses.
pub fn unique_topic(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from)
}

/// The component built from `transforms/<name>` (any language `sluice build`
/// knows), built once per test process.
pub fn transform_component(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let options = sluice_build::BuildOptions::new(
        target_dir().join("guests"),
        target_dir().join("guests").join("components"),
    );
    let path = sluice_build::build_transform(&repo_root().join("transforms").join(name), &options)
        .unwrap_or_else(|e| panic!("building transform {name} failed: {e}"))
        .component;
    built.insert(name.to_string(), path.clone());
    path
}

/// The component cargo builds from `transforms/<name>` for `wasm32-wasip2` (WASI
/// imports included), for fixtures that must not pass `sluice build`'s checks.
pub fn wasip2_component(name: &str) -> PathBuf {
    let dir = repo_root().join("transforms").join(name);
    let target_dir = target_dir().join("guests");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "build",
            "--release",
            "--quiet",
            "--lib",
            "--target",
            "wasm32-wasip2",
        ])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building {name} for wasm32-wasip2 failed");
    let package = dir
        .file_name()
        .expect("a crate directory")
        .to_string_lossy()
        .replace('-', "_");
    target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{package}.wasm"))
}

/// A finished process's stdout as JSON objects, one per line; panics with its stderr
/// if it failed.
pub fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// Runs a step of `scripts/deals_table.py` on `table`.
pub fn deals_table(table: &Path, args: &[&str]) {
    let status = Command::new("python3")
        .arg(repo_root().join("scripts/deals_table.py"))
        .arg(table)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("python3 runs");
    assert!(status.success(), "deals_table.py {args:?} failed");
}

/// What `sluice preview` of `module` on `table` (with more `args`) printed and how it
/// exited.
pub fn preview_output(table: &Path, module: &Path, args: &[&str]) -> std::process::Output {
    Command::new(sluice_binary())
        .args(["preview", "--table"])
        .arg(table)
        .arg("--module")
        .arg(module)
        .args(args)
        .output()
        .expect("sluice runs")
}

/// The records `sluice preview` shows of `module` on `table` (one JSON object each);
/// the preview must succeed.
pub fn preview_records(table: &Path, module: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let output = preview_output(table, module, args);
    assert!(
        output.status.success(),
        "preview failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The `sluice` binary, built by the test command before the tests run (or beside a
/// benchmark's binary).
pub fn sluice_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let exe_dir = exe.parent().expect("the test binary is in a directory");
    // Tests run from target/<profile>/deps, benchmarks from target/<profile>.
    let binary = [exe_dir, exe_dir.parent().unwrap_or(exe_dir)]
        .iter()
        .map(|dir| dir.join("sluice"))
        .find(|binary| binary.exists())
        .unwrap_or_else(|| exe_dir.join("sluice"));
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p sluice` (scripts/test.sh does)",
        binary.display()
    );
    binary
}

/// What a test pipeline's config says beyond its table, module and topic.
#[derive(Default)]
pub struct Extra<'a> {
    /// TOML lines for `[source]`.
    pub source: &'a str,
    /// TOML lines for `[transform]`, after `module`.
    pub transform: &'a str,
    /// TOML lines for `[transform.params]`.
    pub params: &'a str,
    /// TOML lines for `[sink]`.
    pub sink: &'a str,
    /// TOML lines for `[sink.kafka]`, after `bootstrap.servers`.
    pub kafka: &'a str,
    /// TOML lines for `[state]`; the pipeline keeps no state when `None`.
    pub state: Option<&'a str>,
}

/// A pipeline config file in a temporary directory; the pipeline is named after its
/// topic, so its position and transactional id are its own.
pub struct PipelineFiles {
    /// The temporary directory.
    pub dir: tempfile::TempDir,
    /// The config file.
    pub config: PathBuf,
}

impl PipelineFiles {
    /// `sluice run --stop-at-latest` of this pipeline, to run as the test needs.
    pub fn run_to_latest_command(&self) -> Command {
        let mut run = Command::new(sluice_binary());
        run.args(["run", "--stop-at-latest", "--config"])
            .arg(&self.config);
        run
    }

    /// Writes a config for `table` through `module` into `topic` at `bootstrap`.
    pub fn new(
        table: &Path,
        module: &Path,
        topic: &str,
        bootstrap: &str,
        extra: Extra<'_>,
    ) -> PipelineFiles {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("pipeline.toml");
        let text = format!(
            r#"[pipeline]
name = "{topic}"

[source]
table = "{table}"
poll_interval = "100ms"
{source}

[transform]
module = "{module}"
{transform}

[transform.params]
{params}

[sink]
topic = "{topic}"
connect_timeout = "10s"
{sink}

[sink.kafka]
"bootstrap.servers" = "{bootstrap}"
{kafka}
{state}
"#,
            table = table.display(),
            module = module.display(),
            source = extra.source,
            transform = extra.transform,
            params = extra.params,
            sink = extra.sink,
            kafka = extra.kafka,
            state = extra
                .state
                .map_or_else(String::new, |lines| format!("[state]\n{lines}")),
        );
        std::fs::write(&config, text).expect("the config is written");
        PipelineFiles { dir, config }
    }

    /// The stored position as (version, row offset), read with `sluice position show`.
    pub fn position(&self) -> Option<(u64, u64)> {
        let json = self.stored_position()?;
        Some((
            json.get("version")?.as_u64()?,
            json.get("row_offset")?.as_u64()?,
        ))
    }

    /// The stored position as `sluice position show --json` prints it.
    pub fn stored_position(&self) -> Option<serde_json::Value> {
        let output = Command::new(sluice_binary())
            .args(["position", "show", "--json", "--config"])
            .arg(&self.config)
            .output()
            .expect("sluice runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let json: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("position show prints JSON");
        json.is_object().then_some(json)
    }

    /// Waits until the stored position reaches `version` (row offset 0).
    pub fn wait_for_position(&self, child: &mut Child, version: u64, timeout: Duration) {
        self.wait_for_position_logging(child, version, timeout, None);
    }

    /// Waits as `wait_for_position` does; a failure shows the child's log from `log`.
    pub fn wait_for_position_logging(
        &self,
        child: &mut Child,
        version: u64,
        timeout: Duration,
        log: Option<&Path>,
    ) {
        let shown = || {
            log.map(|log| format!(":\n{}", std::fs::read_to_string(log).unwrap_or_default()))
                .unwrap_or_default()
        };
        let deadline = Instant::now() + timeout;
        while self.position() < Some((version, 0)) {
            if let Some(status) = child.try_wait().expect("the child can be polled") {
                panic!(
                    "sluice exited with {status} before reaching version {version}{}",
                    shown()
                );
            }
            assert!(
                Instant::now() < deadline,
                "sluice did not reach version {version} in {timeout:?}; position {:?}{}",
                self.position(),
                shown()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Runs `sluice run --config <config> <args>` to completion.
pub fn run_sluice(config: &Path, args: &[&str]) -> Output {
    Command::new(sluice_binary())
        .args(["run", "--config"])
        .arg(config)
        .args(args)
        .output()
        .expect("sluice runs")
}

/// Runs the pipeline to the table's latest version and returns its log; panics with the
/// log if it fails.
pub fn run_to_latest(config: &Path) -> String {
    let run = run_sluice(config, &["--stop-at-latest"]);
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "sluice failed: {stderr}");
    stderr
}

/// Runs `sluice check --config <config>`: whether it passed, and what it printed.
pub fn sluice_check(config: &Path) -> (bool, String) {
    let output = Command::new(sluice_binary())
        .args(["check", "--config"])
        .arg(config)
        .output()
        .expect("sluice runs");
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// Waits until a `sluice run` whose log is `log` says it has started.
pub fn wait_until_started(sluice: &mut Child, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("Pipeline started.")
    {
        assert!(
            sluice.try_wait().unwrap().is_none(),
            "sluice exited: {}",
            std::fs::read_to_string(log).unwrap()
        );
        assert!(Instant::now() < deadline, "sluice did not start in 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the pipeline, expects it to fail, and returns its log.
pub fn run_expecting_failure(config: &Path) -> String {
    let run = run_sluice(config, &["--stop-at-latest"]);
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(!run.status.success(), "sluice succeeded: {stderr}");
    stderr
}

/// How a process ended and the most memory it held.
#[derive(Debug)]
pub struct Measured {
    /// Its exit code, `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// What it wrote to stderr.
    pub stderr: String,
    /// Its peak memory, in bytes: the peak of its memory cgroup where there is one,
    /// else the largest `VmHWM` sampled while it ran. (`wait4`'s `ru_maxrss` would count
    /// the test process too: a child is forked from it before it runs `sluice`.)
    pub peak_rss: u64,
    /// How long it ran.
    pub elapsed: Duration,
}

impl Measured {
    /// Asserts the process stopped with exit status 1 and no signal, said each of
    /// `expected`, and held less than `peak_bound` bytes at its peak; `how` names it in
    /// messages.
    pub fn assert_stopped_cleanly(&self, how: &str, expected: &[&str], peak_bound: u64) {
        assert_eq!(self.signal, None, "{how} was killed: {}", self.stderr);
        assert_eq!(self.code, Some(1), "{how}: {}", self.stderr);
        for part in expected {
            assert!(
                self.stderr.contains(part),
                "{how} should say `{part}`: {}",
                self.stderr
            );
        }
        assert!(
            self.peak_rss < peak_bound,
            "{how}: the host held {} MiB at its peak",
            self.peak_rss / (1024 * 1024)
        );
    }
}

/// A memory cgroup (v1) that caps what the processes put into it may hold, removed when
/// dropped: a runaway child is killed there instead of taking the machine down.
struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    /// A new cgroup capped at `limit` bytes, or `None` where the machine has no
    /// writable memory controller.
    fn new(limit: u64) -> Option<MemoryCgroup> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new("/sys/fs/cgroup/memory")
            .join(format!("sluice-test-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let cgroup = MemoryCgroup { dir };
        std::fs::write(cgroup.dir.join("memory.limit_in_bytes"), limit.to_string()).ok()?;
        Some(cgroup)
    }

    fn add(&self, pid: u32) {
        let _ = std::fs::write(self.dir.join("cgroup.procs"), pid.to_string());
    }

    /// The most memory the cgroup's processes held at once.
    fn peak(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join("memory.max_usage_in_bytes"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// A process's peak resident set size so far (`VmHWM`), in bytes.
pub(crate) fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Runs `command` to its end, stdout discarded, and measures its peak memory. Where
/// the machine allows it, the process runs in a memory cgroup capped at `guard` bytes,
/// so a regression is killed (and reported as a signal) rather than exhausting memory.
pub fn run_measured(mut command: Command, guard: u64) -> Measured {
    let log = tempfile::NamedTempFile::new().expect("a temporary file");
    let cgroup = MemoryCgroup::new(guard);
    let started = std::time::Instant::now();
    let mut child = command
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("the log reopens"))
        .spawn()
        .expect("the command starts");
    if let Some(cgroup) = &cgroup {
        cgroup.add(child.id());
    }
    let pid = child.id();
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let running = running.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while running.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(vm_hwm(pid).unwrap_or(0));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let status = child.wait().expect("the command ends");
    let elapsed = started.elapsed();
    running.store(false, std::sync::atomic::Ordering::Relaxed);
    let sampled = sampler.join().expect("the sampler ends");
    Measured {
        code: status.code(),
        signal: std::os::unix::process::ExitStatusExt::signal(&status),
        stderr: std::fs::read_to_string(log.path()).unwrap_or_default(),
        peak_rss: cgroup
            .as_ref()
            .and_then(MemoryCgroup::peak)
            .unwrap_or(sampled),
        elapsed,
    }
}

/// Starts `sluice run --config <config>` in the background.
pub fn spawn_sluice(config: &Path) -> Child {
    Command::new(sluice_binary())
        .args(["run", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("sluice starts")
}

/// Starts `sluice run --config <config>` in the background, its log going to `log`.
pub fn spawn_sluice_logged(config: &Path, log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("the log file can be created");
    Command::new(sluice_binary())
        .args(["run", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("sluice starts")
}

/// Asks a running `sluice` to stop (SIGTERM) and waits for it.
pub fn stop_sluice(child: &mut Child) -> std::process::ExitStatus {
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success());
    child.wait().expect("sluice exits")
}

/// One consumed record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Consumed {
    /// Key as text.
    pub key: Option<String>,
    /// Value as text; `None` is a tombstone.
    pub value: Option<String>,
    /// Headers as text.
    pub headers: Vec<(String, String)>,
}

impl Consumed {
    /// `key<TAB>value`, or `key<TAB><tombstone>`.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}",
            self.key.as_deref().unwrap_or("<no key>"),
            self.value.as_deref().unwrap_or("<tombstone>")
        )
    }
}

/// Reads every committed record of partition 0 of `topic`, as a read_committed consumer.
pub fn consume_all(topic: &str) -> Vec<Consumed> {
    consume_all_from(&kafka_bootstrap(), topic)
}

/// [`consume_all`] from the cluster at `bootstrap`.
pub fn consume_all_from(bootstrap: &str, topic: &str) -> Vec<Consumed> {
    consume_timed(bootstrap, topic)
        .into_iter()
        .map(|(_, record)| record)
        .collect()
}

/// [`consume_all_from`] with each record's timestamp (milliseconds since the epoch, as
/// the producer stamped it).
pub fn consume_timed(bootstrap: &str, topic: &str) -> Vec<(i64, Consumed)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_topic("test-reader"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("a consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "{topic} was not read to its end in time"
        );
        let message = match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Err(KafkaError::PartitionEOF(_))) => return records,
            Some(Err(e)) => panic!("consuming {topic} failed: {e}"),
            Some(Ok(message)) => message,
        };
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let headers = message
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(text).unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        let timestamp = message.timestamp().to_millis().unwrap_or_default();
        records.push((
            timestamp,
            Consumed {
                key: message.key().map(text),
                value: message.payload().map(text),
                headers,
            },
        ));
    }
}

/// Lines ordered by key, each key's records kept in arrival order: Kafka orders records
/// per key (per partition), which is what consumers may rely on.
pub fn by_key(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut lines: Vec<String> = lines.into_iter().collect();
    lines.sort_by(|a, b| a.split('\t').next().cmp(&b.split('\t').next()));
    lines
}
