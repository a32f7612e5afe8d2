//! Comparing what two modules made of one batch, record by record: records are paired
//! by the change row they were made from and their order among that row's records, so
//! a record moved, changed, added or dropped is named by its row.

use std::collections::BTreeMap;

use sluice_engine::OutputRecord;

use super::report::{
    Difference, DifferenceKind, RecordCounts, RecordView, RejectionCounts, ShadowReport,
};

/// One side's work on a batch, as the comparison needs it.
pub(crate) struct Side<'a> {
    /// The records the module made.
    pub records: &'a [OutputRecord],
    /// The rows it failed or rejected, with why.
    pub failed: &'a [(u32, String)],
}

/// Where a batch sits in the table.
#[derive(Clone, Copy)]
pub(crate) struct BatchPlace<'a> {
    /// Its Delta version.
    pub version: u64,
    /// The index, among the version's change rows, of its first row.
    pub first_row: u64,
    /// The pipeline's topic, for records that name none.
    pub default_topic: &'a str,
}

/// Adds the comparison of `live` and `candidate` on one batch to `report`, keeping
/// differences while the report has room for them.
pub(crate) fn compare_batch(
    place: BatchPlace<'_>,
    live: Side<'_>,
    candidate: Side<'_>,
    report: &mut ShadowReport,
) {
    let room = report.limits.differences;
    let mut by_row: BTreeMap<u32, (Vec<&OutputRecord>, Vec<&OutputRecord>)> = BTreeMap::new();
    for record in live.records {
        by_row.entry(record.source_row).or_default().0.push(record);
    }
    for record in candidate.records {
        by_row.entry(record.source_row).or_default().1.push(record);
    }
    let topic_of = |record: &OutputRecord| {
        record
            .topic
            .clone()
            .unwrap_or_else(|| place.default_topic.to_string())
    };
    for (row, (ours, theirs)) in by_row {
        for index in 0..ours.len().max(theirs.len()) {
            let (kind, topic) = match (ours.get(index), theirs.get(index)) {
                (Some(a), Some(b)) if same_record(a, b) => {
                    report.topics.entry(topic_of(a)).or_default().equal += 1;
                    continue;
                }
                (Some(a), Some(_)) => (DifferenceKind::Changed, topic_of(a)),
                (Some(a), None) => (DifferenceKind::Missing, topic_of(a)),
                (None, Some(b)) => (DifferenceKind::Added, topic_of(b)),
                (None, None) => unreachable!("an index below the longer side's length"),
            };
            let counts = report.topics.entry(topic).or_default();
            *match kind {
                DifferenceKind::Changed => &mut counts.changed,
                DifferenceKind::Missing => &mut counts.missing,
                _ => &mut counts.added,
            } += 1;
            if report.differences.len() < room {
                let view = |record: Option<&&OutputRecord>| {
                    record.map(|r| RecordView::of(r, place.default_topic))
                };
                report.differences.push(Difference {
                    version: place.version,
                    row: place.first_row + u64::from(row),
                    kind,
                    live: view(ours.get(index)),
                    candidate: view(theirs.get(index)),
                    error: None,
                });
            }
        }
    }
    compare_rejections(place, live.failed, candidate.failed, report);
}

fn same_record(a: &OutputRecord, b: &OutputRecord) -> bool {
    a.topic == b.topic
        && a.partition == b.partition
        && a.key == b.key
        && a.value == b.value
        && a.headers == b.headers
}

/// Counts the rows one side failed and the other did not (and those both failed).
fn compare_rejections(
    place: BatchPlace<'_>,
    live: &[(u32, String)],
    candidate: &[(u32, String)],
    report: &mut ShadowReport,
) {
    let live: BTreeMap<u32, &str> = live.iter().map(|(r, e)| (*r, e.as_str())).collect();
    let candidate: BTreeMap<u32, &str> = candidate.iter().map(|(r, e)| (*r, e.as_str())).collect();
    let mut rows: Vec<u32> = live.keys().chain(candidate.keys()).copied().collect();
    rows.sort_unstable();
    rows.dedup();
    let counts: &mut RejectionCounts = &mut report.rejections;
    for row in rows {
        let error = match (live.get(&row), candidate.get(&row)) {
            (Some(_), Some(_)) => {
                counts.both += 1;
                continue;
            }
            (Some(error), None) => {
                counts.live_only += 1;
                format!("only the live module failed the row: {error}")
            }
            (None, Some(error)) => {
                counts.candidate_only += 1;
                format!("only the candidate failed the row: {error}")
            }
            (None, None) => unreachable!("a row one side failed"),
        };
        if report.differences.len() < report.limits.differences {
            report.differences.push(Difference {
                version: place.version,
                row: place.first_row + u64::from(row),
                kind: DifferenceKind::Rejection,
                live: None,
                candidate: None,
                error: Some(error),
            });
        }
    }
}

/// Counts every record of a batch the candidate failed as a whole as missing.
pub(crate) fn count_missing(
    place: BatchPlace<'_>,
    live: &[OutputRecord],
    report: &mut ShadowReport,
) {
    for record in live {
        let topic = record
            .topic
            .clone()
            .unwrap_or_else(|| place.default_topic.to_string());
        report.topics.entry(topic).or_default().add(RecordCounts {
            missing: 1,
            ..RecordCounts::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shadow::report::ShadowLimits;

    fn report() -> ShadowReport {
        let limits = ShadowLimits {
            differences: 3,
            ..ShadowLimits::default()
        };
        ShadowReport::new("c", "candidate", "l", limits, 0)
    }

    fn record(row: u32, key: &str, value: Option<&str>) -> OutputRecord {
        OutputRecord {
            source_row: row,
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            ..OutputRecord::default()
        }
    }

    const PLACE: BatchPlace<'static> = BatchPlace {
        version: 7,
        first_row: 100,
        default_topic: "gold",
    };

    #[test]
    fn the_same_records_are_all_equal() {
        let records = [record(0, "a", Some("1")), record(1, "b", None)];
        let mut report = report();
        let side = Side {
            records: &records,
            failed: &[],
        };
        compare_batch(
            PLACE,
            side,
            Side {
                records: &records,
                failed: &[],
            },
            &mut report,
        );
        assert_eq!(
            report.topics["gold"],
            RecordCounts {
                equal: 2,
                ..RecordCounts::default()
            }
        );
        assert!(report.differences.is_empty());
    }

    #[test]
    fn changed_added_and_missing_records_are_named_by_their_row() {
        let live = [
            record(0, "a", Some("1")),
            record(1, "b", None),
            record(2, "c", Some("3")),
        ];
        let mut moved = record(2, "c", Some("3"));
        moved.topic = Some("other".into());
        let candidate = [
            record(0, "a", Some("one")),
            moved,
            record(2, "d", Some("4")),
        ];
        let mut report = report();
        compare_batch(
            PLACE,
            Side {
                records: &live,
                failed: &[],
            },
            Side {
                records: &candidate,
                failed: &[],
            },
            &mut report,
        );
        // Row 1's tombstone is missing; row 2's record moved topic (changed, counted
        // under the live record's topic) and the candidate made a second one there.
        assert_eq!(
            report.topics["gold"],
            RecordCounts {
                equal: 0,
                changed: 2,
                added: 1,
                missing: 1,
            }
        );
        // Three kept, the fourth only counted.
        assert_eq!(report.differences.len(), 3);
        let first = &report.differences[0];
        assert_eq!((first.version, first.row), (7, 100));
        assert_eq!(first.kind, DifferenceKind::Changed);
        assert_eq!(first.live.as_ref().unwrap().value.as_deref(), Some("1"));
        assert_eq!(
            first.candidate.as_ref().unwrap().value.as_deref(),
            Some("one")
        );
        assert_eq!(report.differences[1].kind, DifferenceKind::Missing);
        assert_eq!(report.differences[1].row, 101);
        assert_eq!(
            report.differences[2].candidate.as_ref().unwrap().topic,
            "other"
        );
    }

    #[test]
    fn rows_failed_on_one_side_only_are_rejections() {
        let mut report = report();
        compare_batch(
            PLACE,
            Side {
                records: &[],
                failed: &[(1, "bad".into()), (2, "bad".into())],
            },
            Side {
                records: &[],
                failed: &[(2, "worse".into()), (3, "new".into())],
            },
            &mut report,
        );
        assert_eq!(
            report.rejections,
            RejectionCounts {
                both: 1,
                live_only: 1,
                candidate_only: 1
            }
        );
        assert_eq!(report.differences[0].row, 101);
        assert!(
            report.differences[1]
                .error
                .as_deref()
                .unwrap()
                .contains("only the candidate failed the row: new")
        );
    }

    #[test]
    fn binary_bytes_show_as_hex() {
        let view = RecordView::of(
            &OutputRecord {
                key: Some(vec![0xff, 0x01]),
                ..OutputRecord::default()
            },
            "gold",
        );
        assert_eq!(view.key.as_deref(), Some("hex:ff01"));
        assert_eq!(view.topic, "gold");
    }
}
