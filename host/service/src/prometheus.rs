//! The Prometheus text exposition of every pipeline's counters. Labels are the
//! tenant, the pipeline and, for errors and states, a fixed set of kinds, so their
//! number is bounded by the host's pipeline limit.

use std::fmt::Write as _;

use sluice_pipeline::{BATCH_SECONDS_BUCKETS, WaitingFor};

use crate::service::PipelineStatus;
use crate::store::PipelineState;

/// Renders the metrics of `statuses`.
pub fn render(statuses: &[PipelineStatus]) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &mut dyn FnMut(&mut String)| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        samples(&mut out);
    };
    let labels = |s: &PipelineStatus| format!("tenant=\"{}\",pipeline=\"{}\"", s.tenant, s.name);
    let counter = |name: &'static str, value: fn(&PipelineStatus) -> f64| {
        move |out: &mut String| {
            for s in statuses {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(s), value(s));
            }
        }
    };
    family(
        "sluice_pipeline_rows_in_total",
        "counter",
        "Change rows read and committed.",
        &mut counter("sluice_pipeline_rows_in_total", |s| {
            s.counters.rows_in as f64
        }),
    );
    family(
        "sluice_pipeline_records_out_total",
        "counter",
        "Records committed to Kafka, dead letters included.",
        &mut counter("sluice_pipeline_records_out_total", |s| {
            s.counters.records_out as f64
        }),
    );
    family(
        "sluice_pipeline_bytes_out_total",
        "counter",
        "Bytes of record keys and values committed to Kafka.",
        &mut counter("sluice_pipeline_bytes_out_total", |s| {
            s.counters.bytes_out as f64
        }),
    );
    family(
        "sluice_pipeline_errors_total",
        "counter",
        "Failures by kind: row (a row the module failed on), batch (rows of a batch that failed as a whole), trap (module traps, retries included), host_limit (the traps where the module made the host spend past its budgets), sink_retry (work redone after Kafka aborted a transaction), registry_retry (work redone after the schema registry did not answer), source_retry (the table read again after its storage failed past the object store's retries), storage_request (storage requests that failed and were retried by the object store).",
        &mut |out: &mut String| {
            for s in statuses {
                let c = &s.counters;
                for (kind, value) in [
                    ("row", c.failed_rows),
                    ("batch", c.failed_batches),
                    ("trap", c.traps),
                    ("host_limit", c.host_limits),
                    ("sink_retry", c.sink_retries),
                    ("registry_retry", c.registry_retries),
                    ("source_retry", c.source_retries),
                    ("storage_request", c.storage_failures),
                ] {
                    let _ = writeln!(
                        out,
                        "sluice_pipeline_errors_total{{{},kind=\"{kind}\"}} {value}",
                        labels(s)
                    );
                }
            }
        },
    );
    family(
        "sluice_pipeline_storage_requests_total",
        "counter",
        "HTTP requests sent to the table's object store (none for a local table).",
        &mut counter("sluice_pipeline_storage_requests_total", |s| {
            s.counters.storage_requests as f64
        }),
    );
    family(
        "sluice_pipeline_lag_versions",
        "gauge",
        "Table versions committed and not yet delivered.",
        &mut counter("sluice_pipeline_lag_versions", |s| s.lag_versions as f64),
    );
    family(
        "sluice_pipeline_position_version",
        "gauge",
        "Version of the next change row to deliver.",
        &mut counter("sluice_pipeline_position_version", |s| {
            s.position.version as f64
        }),
    );
    family(
        "sluice_pipeline_rows_per_second",
        "gauge",
        "Change rows committed per second in the range being delivered (catching up or streaming a snapshot).",
        &mut counter("sluice_pipeline_rows_per_second", |s| {
            s.counters.progress.rows_per_second
        }),
    );
    family(
        "sluice_pipeline_range_versions_left",
        "gauge",
        "Versions of the range being delivered not yet committed.",
        &mut counter("sluice_pipeline_range_versions_left", |s| {
            let progress = &s.counters.progress;
            (progress.versions_total - progress.versions_done) as f64
        }),
    );
    family(
        "sluice_pipeline_guest_seconds_total",
        "counter",
        "Seconds spent in the pipeline's module.",
        &mut counter("sluice_pipeline_guest_seconds_total", |s| {
            s.counters.guest_seconds
        }),
    );
    family(
        "sluice_pipeline_swaps_total",
        "counter",
        "Module swaps done.",
        &mut counter("sluice_pipeline_swaps_total", |s| s.counters.swaps as f64),
    );
    family(
        "sluice_pipeline_last_swap_pause_seconds",
        "gauge",
        "How long the last swap held the pipeline at its batch boundary.",
        &mut counter("sluice_pipeline_last_swap_pause_seconds", |s| {
            s.counters.last_swap_pause_seconds
        }),
    );
    // Keyed state, for the pipelines that keep it.
    let keyed = |name: &'static str, value: fn(&sluice_pipeline::StateSnapshot) -> f64| {
        move |out: &mut String| {
            for s in statuses.iter().filter(|s| s.changelog_topic.is_some()) {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(s), value(&s.counters.state));
            }
        }
    };
    for (name, kind, help, value) in [
        (
            "sluice_pipeline_keyed_state_keys",
            "gauge",
            "Keys in the pipeline's committed keyed state on the node that runs it.",
            (|s| s.keys as f64) as fn(&sluice_pipeline::StateSnapshot) -> f64,
        ),
        (
            "sluice_pipeline_keyed_state_bytes",
            "gauge",
            "Bytes of the keys and values of its committed keyed state.",
            |s| s.bytes as f64,
        ),
        (
            "sluice_pipeline_keyed_state_restore_seconds",
            "gauge",
            "How long its last restore of the state from the changelog took.",
            |s| s.restore_seconds,
        ),
        (
            "sluice_pipeline_keyed_state_restore_offsets_left",
            "gauge",
            "Changelog offsets the restore in progress has yet to read (0 when none runs).",
            |s| s.restore_total.saturating_sub(s.restore_read) as f64,
        ),
        (
            "sluice_pipeline_keyed_state_keys_read_total",
            "counter",
            "Keys its module read from the state (each key of a get-many, each entry of a scan), work redone included.",
            |s| s.keys_read as f64,
        ),
        (
            "sluice_pipeline_keyed_state_keys_written_total",
            "counter",
            "Keys its module put or deleted, work redone included.",
            |s| s.keys_written as f64,
        ),
    ] {
        family(name, kind, help, &mut keyed(name, value));
    }
    family(
        "sluice_pipeline_state",
        "gauge",
        "1 for the state the pipeline is in (running, paused, failed, finished).",
        &mut |out: &mut String| {
            for s in statuses {
                for (state, name) in [
                    (PipelineState::Running, "running"),
                    (PipelineState::Paused, "paused"),
                    (PipelineState::Failed, "failed"),
                    (PipelineState::Finished, "finished"),
                ] {
                    let value = u8::from(s.state == state);
                    let _ = writeln!(
                        out,
                        "sluice_pipeline_state{{{},state=\"{name}\"}} {value}",
                        labels(s)
                    );
                }
            }
        },
    );
    family(
        "sluice_pipeline_waiting",
        "gauge",
        "1 while the pipeline waits out an outage of what the label names (registry: the schema registry gives no schema ids); its status says since when and why.",
        &mut |out: &mut String| {
            for s in statuses {
                for waited in WaitingFor::ALL {
                    let value = u8::from(
                        s.waiting
                            .as_ref()
                            .is_some_and(|w| w.waiting.waiting_for == waited),
                    );
                    let _ = writeln!(
                        out,
                        "sluice_pipeline_waiting{{{},for=\"{}\"}} {value}",
                        labels(s),
                        waited.label()
                    );
                }
            }
        },
    );
    family(
        "sluice_pipeline_batch_seconds",
        "histogram",
        "Time the module took per batch.",
        &mut |out: &mut String| {
            for s in statuses {
                let c = &s.counters;
                let mut cumulative = 0;
                for (bound, count) in BATCH_SECONDS_BUCKETS.iter().zip(c.batch_seconds_buckets) {
                    cumulative += count;
                    let _ = writeln!(
                        out,
                        "sluice_pipeline_batch_seconds_bucket{{{},le=\"{bound}\"}} {cumulative}",
                        labels(s)
                    );
                }
                let _ = writeln!(
                    out,
                    "sluice_pipeline_batch_seconds_bucket{{{},le=\"+Inf\"}} {}",
                    labels(s),
                    c.batches
                );
                let _ = writeln!(
                    out,
                    "sluice_pipeline_batch_seconds_sum{{{}}} {}",
                    labels(s),
                    c.guest_seconds
                );
                let _ = writeln!(
                    out,
                    "sluice_pipeline_batch_seconds_count{{{}}} {}",
                    labels(s),
                    c.batches
                );
            }
        },
    );
    out
}
