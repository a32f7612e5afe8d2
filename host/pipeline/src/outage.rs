//! Waiting out a schema registry that gives no ids (refused connections, timeouts, 5xx,
//! 429): the work is redone after pauses that double up to [`MAX_PAUSE`], until the
//! registry answers or `[sink.schema_registry] max_outage` has passed since the first
//! failure. While it waits, the pipeline's status says so ([`Waiting`]).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The pause after the first failure.
const FIRST_PAUSE: Duration = Duration::from_secs(1);

/// Longest pause between tries, so that a registry back is noticed soon after.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// An outage, from its first failure to the registry's next answer.
#[derive(Debug)]
pub(crate) struct Outage {
    began: Instant,
    since: SystemTime,
    limit: Duration,
    retries: u32,
}

/// What to do after a failure in an outage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Try again after `pause`: retry number `retry` of the outage.
    Retry { retry: u32, pause: Duration },
    /// Stop: the outage has lasted `waited`, the limit or more.
    GiveUp { waited: Duration },
}

impl Outage {
    /// An outage whose first failure is at `now` (`since` on the wall clock), waited out
    /// for at most `limit`.
    pub(crate) fn begin(now: Instant, since: SystemTime, limit: Duration) -> Outage {
        Outage {
            began: now,
            since,
            limit,
            retries: 0,
        }
    }

    /// What to do after the failure at `now`: the pause doubles from [`FIRST_PAUSE`] up to
    /// [`MAX_PAUSE`], and the last one ends at the limit, so the last try is made there.
    pub(crate) fn after_failure(&mut self, now: Instant) -> Next {
        let waited = now.saturating_duration_since(self.began);
        if waited >= self.limit {
            return Next::GiveUp { waited };
        }
        self.retries += 1;
        let doubled = FIRST_PAUSE.saturating_mul(1 << (self.retries - 1).min(16));
        Next::Retry {
            retry: self.retries,
            pause: doubled.min(MAX_PAUSE).min(self.limit - waited),
        }
    }

    /// When the first failure was, on the wall clock.
    pub(crate) fn since(&self) -> SystemTime {
        self.since
    }

    /// When the pipeline stops unless the registry answered, on the wall clock.
    pub(crate) fn gives_up_at(&self) -> SystemTime {
        self.since + self.limit
    }

    /// How long the outage has lasted at `now`.
    pub(crate) fn lasted(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.began)
    }
}

/// What a pipeline waits for, while it waits out an outage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    /// The schema registry.
    Registry,
}

impl WaitingFor {
    /// Every value, for metrics that show each.
    pub const ALL: [WaitingFor; 1] = [WaitingFor::Registry];

    /// The name a metric label or the API gives it.
    pub fn label(self) -> &'static str {
        match self {
            WaitingFor::Registry => "registry",
        }
    }
}

/// A pipeline waiting out an outage, as its status shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// What it waits for.
    #[serde(rename = "for")]
    pub waiting_for: WaitingFor,
    /// Its address.
    pub url: String,
    /// When the outage began (the first failure), in milliseconds since the epoch.
    pub since_ms: u64,
    /// Tries made again since.
    pub retries: u32,
    /// When the next try is, in milliseconds since the epoch.
    pub next_retry_ms: u64,
    /// When the pipeline stops unless the outage ended (the first failure plus
    /// `[sink.schema_registry] max_outage`), in milliseconds since the epoch.
    pub gives_up_ms: u64,
    /// The last failure, in a few words.
    pub reason: String,
}

impl Waiting {
    /// The sentence a status shows at `now_ms` (milliseconds since the epoch).
    pub fn sentence(&self, now_ms: u64) -> String {
        let next = match self.next_retry_ms.saturating_sub(now_ms) {
            0 => "retrying now".to_string(),
            ms => format!("next in {} s", ms.div_ceil(1000)),
        };
        let what = match self.waiting_for {
            WaitingFor::Registry => "the schema registry",
        };
        format!(
            "Waiting for {what} at {url} since {since} (retry {retries}, {next}; the pipeline stops at {gives_up} unless it answers, [sink.schema_registry] max_outage): {reason}.",
            url = self.url,
            since = wall(self.since_ms),
            retries = self.retries,
            gives_up = wall(self.gives_up_ms),
            reason = self.reason,
        )
    }
}

/// Milliseconds since the epoch of `time`.
pub(crate) fn epoch_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `ms` since the epoch as an RFC 3339 time to the second, in UTC.
fn wall(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pauses of an outage failing every `every` after each pause (the time a try
    /// takes), until it gives up; and how long it waited then.
    fn pauses(limit: Duration, every: Duration) -> (Vec<u64>, Duration) {
        let start = Instant::now();
        let mut outage = Outage::begin(start, UNIX_EPOCH, limit);
        let mut now = start;
        let mut pauses = Vec::new();
        loop {
            match outage.after_failure(now) {
                Next::Retry { retry, pause } => {
                    assert_eq!(retry as usize, pauses.len() + 1);
                    pauses.push(pause.as_millis() as u64);
                    now += pause + every;
                }
                Next::GiveUp { waited } => return (pauses, waited),
            }
        }
    }

    #[test]
    fn pauses_double_to_a_cap_and_the_last_try_is_at_the_limit() {
        let (pauses, waited) = pauses(Duration::from_secs(120), Duration::ZERO);
        assert_eq!(
            pauses,
            [1000, 2000, 4000, 8000, 16000, 30000, 30000, 29000],
            "the last pause ends at the limit"
        );
        assert_eq!(waited, Duration::from_secs(120));
    }

    #[test]
    fn slow_tries_count_toward_the_limit() {
        // Each try takes 10 s (a registry that times out): fewer tries fit.
        let (pauses, waited) = pauses(Duration::from_secs(60), Duration::from_secs(10));
        assert_eq!(pauses, [1000, 2000, 4000, 8000, 5000]);
        assert_eq!(waited, Duration::from_secs(70));
    }

    #[test]
    fn a_zero_limit_gives_up_at_the_first_failure() {
        let (pauses, waited) = pauses(Duration::ZERO, Duration::ZERO);
        assert!(pauses.is_empty());
        assert_eq!(waited, Duration::ZERO);
    }

    #[test]
    fn the_sentence_says_since_when_what_failed_and_when_it_stops() {
        let since = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let outage = Outage::begin(Instant::now(), since, Duration::from_secs(600));
        let waiting = Waiting {
            waiting_for: WaitingFor::Registry,
            url: "http://127.0.0.1:8081".into(),
            since_ms: epoch_ms(outage.since()),
            retries: 3,
            next_retry_ms: epoch_ms(since) + 7_500,
            gives_up_ms: epoch_ms(outage.gives_up_at()),
            reason: "the connection was refused".into(),
        };
        assert_eq!(
            waiting.sentence(epoch_ms(since) + 3_000),
            "Waiting for the schema registry at http://127.0.0.1:8081 since 2027-01-15T08:00:00Z (retry 3, next in 5 s; the pipeline stops at 2027-01-15T08:10:00Z unless it answers, [sink.schema_registry] max_outage): the connection was refused."
        );
        assert!(
            waiting
                .sentence(epoch_ms(since) + 9_000)
                .contains("(retry 3, retrying now;")
        );
    }
}
