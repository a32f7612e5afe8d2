//! A single 2M-row commit streams through in bounded batches: peak memory follows the
//! batch size, not the commit, and a position inside the version resumes mid-way.
//! This file holds one test so that the process's peak RSS is the reader's.

use std::time::Instant;

use sluice_source::{ChangeFeed, Position, Preceded, SourceOptions};
use sluice_tests::deals_table;

const ROWS: u64 = 2_000_000;
const BATCH_ROWS: usize = 65_536;
/// The bound the test holds the reader to; the measured peak is printed.
const PEAK_RSS_BOUND_MIB: u64 = 512;

/// The process's peak resident set size, from /proc.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024
}

fn read_from(feed: &ChangeFeed, from: Position) -> (u64, usize) {
    let (mut rows, mut largest) = (0, 0);
    for batch in feed.read(from, 0, Preceded::Nothing).unwrap() {
        let batch = batch.unwrap();
        largest = largest.max(batch.batch.num_rows());
        rows += batch.batch.num_rows() as u64;
        assert_eq!(batch.end.version, 0);
        assert_eq!(batch.end.row_offset, from.row_offset + rows);
    }
    (rows, largest)
}

#[test]
fn a_two_million_row_commit_streams_in_bounded_memory_and_resumes_mid_version() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["bulk", "--rows", &ROWS.to_string()]);
    let before = peak_rss_mib();
    let feed = ChangeFeed::open(
        table.to_str().unwrap(),
        SourceOptions {
            batch_rows: BATCH_ROWS,
            ..SourceOptions::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    let (rows, largest) = read_from(&feed, Position::at_version(0));
    let elapsed = started.elapsed();
    let peak = peak_rss_mib();
    eprintln!(
        "read {rows} rows of one commit in {elapsed:?} with batches of at most {largest} rows; peak RSS {peak} MiB (before reading {before} MiB, bound {PEAK_RSS_BOUND_MIB} MiB)"
    );
    assert_eq!(rows, ROWS);
    assert!(largest <= BATCH_ROWS);
    assert!(
        peak < PEAK_RSS_BOUND_MIB,
        "peak RSS {peak} MiB is over {PEAK_RSS_BOUND_MIB} MiB"
    );

    let halfway = Position {
        row_offset: ROWS / 2,
        ..Position::at_version(0)
    };
    let (rest, _) = read_from(&feed, halfway);
    assert_eq!(rest, ROWS / 2, "resuming mid-version reads the other half");
}
