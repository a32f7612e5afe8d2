//! What a shadow deploy found: the types the comparison fills and the API shows. A
//! leaf, so the comparison and the shadow's task need not import each other.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_engine::OutputRecord;
use sluice_source::Position;

/// Where a shadow is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShadowPhase {
    /// Comparing the candidate on every batch the live module runs.
    Running,
    /// Reached one of its limits (`reason` says which); promote or discard it.
    Finished,
    /// Stopped early: discarded, replaced, or the candidate failed batch after batch.
    Stopped,
}

/// Records of one topic, compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecordCounts {
    /// Both modules made the same record for the same change row.
    pub equal: u64,
    /// Both made a record there, and they differ.
    pub changed: u64,
    /// Only the candidate made it.
    pub added: u64,
    /// Only the live module made it.
    pub missing: u64,
}

impl RecordCounts {
    /// Whether any record differed.
    pub fn differs(&self) -> bool {
        self.changed + self.added + self.missing > 0
    }

    pub(crate) fn add(&mut self, other: RecordCounts) {
        self.equal += other.equal;
        self.changed += other.changed;
        self.added += other.added;
        self.missing += other.missing;
    }
}

/// Change rows one module failed or rejected and the other did not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RejectionCounts {
    /// Rows both modules failed.
    pub both: u64,
    /// Rows only the live module failed.
    pub live_only: u64,
    /// Rows only the candidate failed.
    pub candidate_only: u64,
}

/// A record as a difference shows it: text where the bytes are UTF-8, else `hex:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordView {
    /// The topic (the pipeline's own when the module named none).
    pub topic: String,
    /// The partition the module chose, if it chose one.
    pub partition: Option<i32>,
    /// The key.
    pub key: Option<String>,
    /// The value; `None` is a tombstone.
    pub value: Option<String>,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
}

impl RecordView {
    pub(crate) fn of(record: &OutputRecord, default_topic: &str) -> RecordView {
        RecordView {
            topic: record
                .topic
                .clone()
                .unwrap_or_else(|| default_topic.to_string()),
            partition: record.partition,
            key: record.key.as_deref().map(shown),
            value: record.value.as_deref().map(shown),
            headers: record
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), shown(value)))
                .collect(),
        }
    }
}

/// Bytes as text if they are UTF-8, else as `hex:` and their hex digits.
fn shown(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => {
            let mut hex = String::with_capacity(4 + bytes.len() * 2);
            hex.push_str("hex:");
            for byte in bytes {
                hex.push_str(&format!("{byte:02x}"));
            }
            hex
        }
    }
}

/// How a record differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DifferenceKind {
    /// Both made a record, and they differ.
    Changed,
    /// Only the candidate made one.
    Added,
    /// Only the live module made one.
    Missing,
    /// One module failed or rejected the row and the other did not.
    Rejection,
}

/// One difference, with where in the table it came from and both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// The Delta version of the change row.
    pub version: u64,
    /// The row's index among the version's change rows.
    pub row: u64,
    /// What differs.
    pub kind: DifferenceKind,
    /// The live module's record (its error, for a rejection), if it made one.
    pub live: Option<RecordView>,
    /// The candidate's record, if it made one.
    pub candidate: Option<RecordView>,
    /// Why a module failed the row, for a rejection.
    pub error: Option<String>,
}

/// What one module cost over the compared batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ModuleCost {
    /// Time in the transform, in milliseconds.
    pub transform_ms: f64,
    /// Records it made.
    pub records: u64,
    /// Bytes of their keys and values.
    pub output_bytes: u64,
    /// The largest linear memory its instance reached, in bytes.
    pub memory_peak_bytes: u64,
}

/// A stateful candidate's copy of the live state, and its state changes against the
/// live module's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShadowState {
    /// Keys in the copy when it was made.
    pub copied_keys: u64,
    /// Bytes of those keys and values.
    pub copied_bytes: u64,
    /// How long copying took, in milliseconds.
    pub copy_ms: u64,
    /// The position after the batch the copy was made for: the copy is the state that
    /// batch read, and the shadow compares from that batch on.
    pub copied_for: Option<Position>,
    /// Keys and bytes the candidate's copy holds now.
    pub keys: u64,
    /// Bytes of them.
    pub bytes: u64,
    /// Keys both modules changed the same way in a batch.
    pub changes_equal: u64,
    /// Keys both changed, differently.
    pub changes_differ: u64,
    /// Keys only the live module changed.
    pub live_only: u64,
    /// Keys only the candidate changed.
    pub candidate_only: u64,
    /// Batches the shadow skipped whose live changes it applied to the copy, so that
    /// the candidate reads on from where the live module was.
    pub caught_up_batches: u64,
}

/// A candidate's error, with the batch it came on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CandidateError {
    /// The position after the batch.
    pub position: Position,
    /// The error, in a sentence.
    pub error: String,
}

/// A shadow deploy's findings so far.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShadowReport {
    /// Digest of the candidate module.
    pub candidate: String,
    /// Name of the candidate module.
    pub candidate_name: String,
    /// Digest of the live module when the shadow started.
    pub live: String,
    /// Where the shadow is.
    pub phase: ShadowPhase,
    /// Why it finished or stopped.
    pub reason: Option<String>,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// The limits it runs under.
    pub limits: ShadowLimits,
    /// Batches compared.
    pub batches: u64,
    /// Change rows compared.
    pub rows: u64,
    /// Batches the live module ran that the shadow skipped because the candidate fell
    /// behind (they are not compared; the live pipeline never waits for it).
    pub skipped_batches: u64,
    /// The position after the last compared batch.
    pub through: Option<Position>,
    /// The position after the last batch the live module handed over: the shadow has
    /// caught up when `through` is there too.
    pub live_through: Option<Position>,
    /// Records compared, by topic.
    pub topics: BTreeMap<String, RecordCounts>,
    /// Rows one side failed or rejected.
    pub rejections: RejectionCounts,
    /// Batches the candidate failed as a whole (a trap, a deadline, a batch error, or a
    /// row under the `fail` policy); their live records count as missing.
    pub failed_batches: u64,
    /// The candidate's last errors, newest last.
    pub errors: Vec<CandidateError>,
    /// The first differences, up to `limits.differences`.
    pub differences: Vec<Difference>,
    /// The live module's cost over the compared batches.
    pub live_cost: ModuleCost,
    /// The candidate's.
    pub candidate_cost: ModuleCost,
    /// For a pipeline that keeps state: the candidate's copy of it, once made.
    pub state: Option<ShadowState>,
}

impl ShadowReport {
    /// The report of a shadow of `candidate` (named `name`) beside `live` that has
    /// compared nothing yet.
    pub(crate) fn new(
        candidate: &str,
        name: &str,
        live: &str,
        limits: ShadowLimits,
        started_ms: u64,
    ) -> ShadowReport {
        ShadowReport {
            candidate: candidate.to_string(),
            candidate_name: name.to_string(),
            live: live.to_string(),
            phase: ShadowPhase::Running,
            reason: None,
            started_ms,
            limits,
            batches: 0,
            rows: 0,
            skipped_batches: 0,
            through: None,
            live_through: None,
            topics: BTreeMap::new(),
            rejections: RejectionCounts::default(),
            failed_batches: 0,
            errors: Vec::new(),
            differences: Vec::new(),
            live_cost: ModuleCost::default(),
            candidate_cost: ModuleCost::default(),
            state: None,
        }
    }

    /// Records that differed, over every topic.
    pub fn total(&self) -> RecordCounts {
        let mut total = RecordCounts::default();
        for counts in self.topics.values() {
            total.add(*counts);
        }
        total
    }
}

/// How long a shadow runs, and how much it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ShadowLimits {
    /// Stop after this many compared batches.
    pub batches: Option<u64>,
    /// Stop after this many compared change rows.
    pub rows: Option<u64>,
    /// Stop after this long, in seconds.
    pub seconds: u64,
    /// Differences kept as a sample.
    pub differences: usize,
}

impl Default for ShadowLimits {
    fn default() -> ShadowLimits {
        ShadowLimits {
            batches: None,
            rows: None,
            seconds: 3600,
            differences: 20,
        }
    }
}
