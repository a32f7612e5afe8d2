//! A shadow deploy's report as a terminal shows it: what was compared, the counts by
//! topic, the candidate's errors and cost beside the live module's, and the sample of
//! differences as a diff (`-` the live record, `+` the candidate's).

use std::fmt::Write as _;

use serde_json::Value;

/// The report (as the API gives it) as text.
pub fn render(report: &Value) -> String {
    let mut out = String::new();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let short = |v: &Value| text(v).chars().take(12).collect::<String>();
    let number = |v: &Value| v.as_u64().unwrap_or_default();
    let _ = writeln!(
        out,
        "Shadow of {} ({}) beside live {}: {}{}",
        text(&report["candidate_name"]),
        short(&report["candidate"]),
        short(&report["live"]),
        text(&report["phase"]),
        report["reason"]
            .as_str()
            .map(|r| format!(", as {r}"))
            .unwrap_or_default()
    );
    let through = &report["through"];
    let _ = writeln!(
        out,
        "Compared {} batches ({} change rows){}; skipped {} the candidate was too far behind for.",
        number(&report["batches"]),
        number(&report["rows"]),
        if through.is_null() {
            String::new()
        } else {
            format!(
                " through version {} row {}",
                number(&through["version"]),
                number(&through["row_offset"])
            )
        },
        number(&report["skipped_batches"])
    );
    let _ = writeln!(
        out,
        "{:<32} {:>10} {:>10} {:>10} {:>10}",
        "topic", "equal", "changed", "added", "missing"
    );
    if let Some(topics) = report["topics"].as_object() {
        for (topic, counts) in topics {
            let _ = writeln!(
                out,
                "{:<32} {:>10} {:>10} {:>10} {:>10}",
                topic,
                number(&counts["equal"]),
                number(&counts["changed"]),
                number(&counts["added"]),
                number(&counts["missing"])
            );
        }
    }
    let rejections = &report["rejections"];
    let _ = writeln!(
        out,
        "Rows failed: {} by both, {} by the live module only, {} by the candidate only; {} batches the candidate failed.",
        number(&rejections["both"]),
        number(&rejections["live_only"]),
        number(&rejections["candidate_only"]),
        number(&report["failed_batches"])
    );
    for side in ["live_cost", "candidate_cost"] {
        let cost = &report[side];
        let _ = writeln!(
            out,
            "{:<10} {:>10.1} ms transforming, {} records, {} bytes out, {} KiB peak memory",
            if side == "live_cost" {
                "live"
            } else {
                "candidate"
            },
            cost["transform_ms"].as_f64().unwrap_or_default(),
            number(&cost["records"]),
            number(&cost["output_bytes"]),
            number(&cost["memory_peak_bytes"]) / 1024
        );
    }
    let state = &report["state"];
    if !state.is_null() {
        let _ = writeln!(
            out,
            "State: the candidate works on a copy of {} keys ({} bytes, made in {} ms), {} keys now; keys changed alike {}, differently {}, by the live module only {}, by the candidate only {}; {} skipped batches' live changes applied to the copy.",
            number(&state["copied_keys"]),
            number(&state["copied_bytes"]),
            number(&state["copy_ms"]),
            number(&state["keys"]),
            number(&state["changes_equal"]),
            number(&state["changes_differ"]),
            number(&state["live_only"]),
            number(&state["candidate_only"]),
            number(&state["caught_up_batches"])
        );
    }
    for error in report["errors"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "error at version {}: {}",
            number(&error["position"]["version"]),
            text(&error["error"])
        );
    }
    for difference in report["differences"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "@@ version {} row {}: {}",
            number(&difference["version"]),
            number(&difference["row"]),
            text(&difference["kind"])
        );
        if let Some(error) = difference["error"].as_str() {
            let _ = writeln!(out, "  {error}");
        }
        diff_records(&mut out, &difference["live"], &difference["candidate"]);
    }
    out
}

/// The fields of two records that differ, `-` for the live one and `+` for the
/// candidate's; a side without a record shows every field of the other.
fn diff_records(out: &mut String, live: &Value, candidate: &Value) {
    for field in ["topic", "partition", "key", "value", "headers"] {
        let (a, b) = (&live[field], &candidate[field]);
        let both = !live.is_null() && !candidate.is_null();
        if both && a == b {
            continue;
        }
        if !live.is_null() {
            let _ = writeln!(out, "- {field}: {}", shown(a));
        }
        if !candidate.is_null() {
            let _ = writeln!(out, "+ {field}: {}", shown(b));
        }
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::Null => "(none)".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_record_shows_only_the_fields_that_differ() {
        let report = serde_json::json!({
            "candidate_name": "gold-v2", "candidate": "abcdef0123456789", "live": "0123456789ab",
            "phase": "running", "reason": null, "batches": 3, "rows": 30, "skipped_batches": 0,
            "through": {"version": 4, "row_offset": 10, "snapshot": false},
            "topics": {"gold": {"equal": 28, "changed": 1, "added": 0, "missing": 1}},
            "rejections": {"both": 0, "live_only": 0, "candidate_only": 0},
            "failed_batches": 0, "errors": [],
            "live_cost": {"transform_ms": 1.5, "records": 30, "output_bytes": 900, "memory_peak_bytes": 2097152},
            "candidate_cost": {"transform_ms": 1.7, "records": 29, "output_bytes": 880, "memory_peak_bytes": 2097152},
            "differences": [
                {"version": 4, "row": 2, "kind": "changed", "error": null,
                 "live": {"topic": "gold", "partition": null, "key": "d1", "value": "{\"title\":\"x\"}", "headers": []},
                 "candidate": {"topic": "gold", "partition": null, "key": "d1", "value": "{\"name\":\"x\"}", "headers": []}},
                {"version": 4, "row": 3, "kind": "missing", "error": null,
                 "live": {"topic": "gold", "partition": null, "key": "d2", "value": null, "headers": []},
                 "candidate": null}
            ]
        });
        let text = render(&report);
        assert!(
            text.contains("Shadow of gold-v2 (abcdef012345) beside live 0123456789ab: running"),
            "{text}"
        );
        assert!(text.contains("through version 4 row 10"), "{text}");
        assert!(text.contains("@@ version 4 row 2: changed\n- value: {\"title\":\"x\"}\n+ value: {\"name\":\"x\"}\n@@"), "{text}");
        assert!(text.contains("@@ version 4 row 3: missing\n- topic: gold\n- partition: (none)\n- key: d2\n- value: (none)"), "{text}");
        assert!(
            text.contains(
                "candidate         1.7 ms transforming, 29 records, 880 bytes out, 2048 KiB"
            ),
            "{text}"
        );
    }
}
