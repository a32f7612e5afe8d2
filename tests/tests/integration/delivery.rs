//! Delivery guarantees against a real broker: a host killed with SIGKILL at random
//! moments, restarted each time, delivers every record exactly once (exactly-once mode)
//! or at least once (at-least-once mode); a second host on the same pipeline fences the
//! first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_to_latest,
    spawn_sluice_logged, stop_sluice, transform_component, unique_topic, wait_until_started,
};

const KILLS: usize = 20;

/// A multi-version table of 200k deals with updates, deletes and a merge.
fn big_table(dir: &Path) -> PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "150000"]);
    deals_table(&table, &["append", "--start", "150000", "--rows", "50000"]);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }
    table
}

/// The records a clean exactly-once run delivers, in order, and how long it took.
fn reference(table: &Path, module: &Path, batch_rows: &str) -> (Vec<String>, Duration) {
    let topic = unique_topic("reference");
    let files = PipelineFiles::new(
        table,
        module,
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: batch_rows,
            ..Extra::default()
        },
    );
    let started = Instant::now();
    run_to_latest(&files.config);
    let records: Vec<String> = consume_all(&topic).iter().map(Consumed::line).collect();
    // 200000 inserts, 2 updated deals, 2 tombstones, 2 deals changed by the merge.
    assert_eq!(records.len(), 200_000 + 2 + 2 + 2);
    (records, started.elapsed())
}

/// A small xorshift generator: the test prints its seed, so a failing run can be replayed.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

/// Runs the pipeline and kills it with SIGKILL `KILLS` times, each at a random moment
/// after it has started (within a fortieth of a clean run's duration), then
/// lets it finish; returns what a read_committed consumer sees.
fn crash_repeatedly(
    table: &Path,
    module: &Path,
    delivery: &str,
    run_time: Duration,
) -> Vec<String> {
    let topic = unique_topic(&format!("crash-{delivery}"));
    let sink = format!("delivery = \"{delivery}\"");
    let files = PipelineFiles::new(
        table,
        module,
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: "batch_rows = 2000",
            sink: &sink,
            ..Extra::default()
        },
    );
    let seed = std::env::var("SLUICE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!(
        "crash test ({delivery}): seed {seed} (replay with SLUICE_CRASH_SEED={seed}), clean run {run_time:?}"
    );
    let mut random = Random(seed);
    // Each run streams for a random part of a fortieth of a clean run, so the kills
    // land across the stream rather than after it.
    let window = run_time.as_millis() as u64 / (2 * KILLS as u64);
    let log = files.dir.path().join("sluice.log");
    let mut positions = Vec::new();
    for _ in 0..KILLS {
        let mut sluice = spawn_sluice_logged(&files.config, &log);
        wait_until_started(&mut sluice, &log);
        std::thread::sleep(Duration::from_millis(random.below(window)));
        sluice.kill().unwrap();
        sluice.wait().unwrap();
        positions.push(files.position());
    }
    eprintln!("crash test ({delivery}): positions after each kill: {positions:?}");
    let mid_stream = positions
        .iter()
        .filter(|p| p.is_none_or(|p| p < (5, 0)))
        .count();
    assert_eq!(
        mid_stream, KILLS,
        "every kill should land mid-stream; positions were {positions:?}"
    );
    run_to_latest(&files.config);
    assert_eq!(files.position(), Some((5, 0)));
    consume_all(&topic).iter().map(Consumed::line).collect()
}

#[test]
fn exactly_once_survives_random_kills_and_at_least_once_loses_nothing() {
    let work = tempfile::tempdir().unwrap();
    let table = big_table(work.path());
    let module = transform_component("gold-deals");
    let (expected, run_time) = reference(&table, &module, "batch_rows = 2000");

    let got = crash_repeatedly(&table, &module, "exactly-once", run_time);
    assert!(
        got == expected,
        "exactly-once: {} records after {KILLS} kills, {} expected; first difference at {:?}",
        got.len(),
        expected.len(),
        first_difference(&got, &expected)
    );

    let got = crash_repeatedly(&table, &module, "at-least-once", run_time);
    let mut distinct = got.clone();
    distinct.sort();
    distinct.dedup();
    // A clean run can itself hold equal records (the merge rewrites deal 100 unchanged).
    let mut want = expected.clone();
    want.sort();
    want.dedup();
    let missing = want
        .iter()
        .filter(|l| distinct.binary_search(l).is_err())
        .count();
    assert_eq!(
        missing, 0,
        "at-least-once lost {missing} records after {KILLS} kills"
    );
    assert_eq!(
        distinct.len(),
        want.len(),
        "at-least-once produced records a clean run does not"
    );
}

fn first_difference(got: &[String], want: &[String]) -> Option<usize> {
    (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i))
}

#[test]
fn a_second_host_fences_the_first_and_output_stays_exactly_once() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "1000"]);
    let module = transform_component("gold-deals");
    let topic = unique_topic("zombie");
    let files = PipelineFiles::new(
        &table,
        &module,
        &topic,
        &kafka_bootstrap(),
        Extra::default(),
    );

    let first_log = work.path().join("first.log");
    let mut first = spawn_sluice_logged(&files.config, &first_log);
    files.wait_for_position(&mut first, 1, Duration::from_secs(60));

    let second_log = work.path().join("second.log");
    let mut second = spawn_sluice_logged(&files.config, &second_log);
    wait_until_started(&mut second, &second_log);

    deals_table(&table, &["append", "--start", "1000", "--rows", "1000"]);
    files.wait_for_position(&mut second, 2, Duration::from_secs(60));
    let first_status = first.wait().unwrap();
    let first_log = std::fs::read_to_string(&first_log).unwrap();
    assert!(!first_status.success(), "the fenced host kept running");
    assert!(first_log.contains("fenced this one"), "{first_log}");
    // The fence is said once, as a takeover, and not as a problem the client retries.
    assert_eq!(
        first_log.matches("The Kafka producer was fenced").count(),
        1,
        "{first_log}"
    );
    assert!(!first_log.contains("keeps retrying"), "{first_log}");
    assert!(stop_sluice(&mut second).success());

    let got: Vec<String> = consume_all(&topic).iter().map(Consumed::line).collect();
    let mut keys: Vec<&str> = got.iter().map(|l| l.split('\t').next().unwrap()).collect();
    keys.sort();
    let before = keys.len();
    keys.dedup();
    assert_eq!(
        (before, keys.len()),
        (2000, 2000),
        "every deal exactly once"
    );
}
