//! What a module may make the host spend on its behalf inside host calls: the batch
//! deadline (host loops check it as they go), the memory cap (no call builds a result
//! larger than the module could receive) and the output cap (records and rejections the
//! host holds for a batch, charged as they are made).
//!
//! Crossing one of these traps the module with [`HostLimitExceeded`]; the error policy
//! treats it like any other trap.

use std::time::{Duration, Instant};

use sluice_model::Record;

/// Longest message from a module the host keeps (a rejection's reason, a row or batch
/// error, an `init` refusal); longer ones are cut at a character boundary, since the
/// error policy copies a message to every row it fails.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024;

/// Most JSON fields one `emit-encoded` call may name.
pub(crate) const MAX_ENCODED_FIELDS: usize = 4096;

/// Most headers one `emit-encoded` call may name.
pub(crate) const MAX_ENCODED_HEADERS: usize = 1024;

/// Why a host call stopped on the module's behalf.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostLimitExceeded {
    /// The call ran past the batch deadline.
    #[error(
        "host call {call} ran past the batch deadline ({timeout:?}, the [transform] batch_timeout)"
    )]
    Deadline {
        /// The host function.
        call: &'static str,
        /// The deadline of the batch.
        timeout: Duration,
    },
    /// The module's call returned after the deadline (a wait ended at it, or the epoch
    /// interrupt, which lags the clock, had not fired yet).
    #[error(
        "the module's {call} call returned after the batch deadline ({timeout:?}, the [transform] batch_timeout)"
    )]
    Overran {
        /// `init` or `transform`.
        call: &'static str,
        /// The deadline of the batch.
        timeout: Duration,
    },
    /// One record could be larger than the output cap of a whole batch.
    #[error(
        "host call {call} could make a record of {bytes} bytes, more than the {cap_mib} MiB the module may emit for a whole batch (the [transform] max_output_mib limit)"
    )]
    Record {
        /// The host function.
        call: &'static str,
        /// The record's size, at most.
        bytes: usize,
        /// The output cap.
        cap_mib: usize,
    },
    /// The call's result would be larger than the module's memory cap.
    #[error(
        "host call {call} would return {bytes} bytes, more than the module's {cap_mib} MiB memory cap (the [transform] memory_limit_mib)"
    )]
    Result {
        /// The host function.
        call: &'static str,
        /// The result's size, at least.
        bytes: usize,
        /// The memory cap.
        cap_mib: usize,
    },
    /// The records and rejections held for the batch passed the output cap.
    #[error(
        "host call {call}: the module emitted more than {cap_mib} MiB of records for one batch (the [transform] max_output_mib limit)"
    )]
    Output {
        /// The host function.
        call: &'static str,
        /// The output cap.
        cap_mib: usize,
    },
    /// An argument lists more items than the call can need.
    #[error("host call {call} was given {count} {what}; at most {bound} are allowed ({why})")]
    Arguments {
        /// The host function.
        call: &'static str,
        /// What the list holds.
        what: &'static str,
        /// How many it holds.
        count: usize,
        /// The most it may hold.
        bound: usize,
        /// Where the bound comes from.
        why: String,
    },
}

impl HostLimitExceeded {
    /// Whether this is the batch deadline, which is reported as the deadline the module
    /// itself would have run past.
    pub(crate) fn is_deadline(&self) -> bool {
        matches!(
            self,
            HostLimitExceeded::Deadline { .. } | HostLimitExceeded::Overran { .. }
        )
    }
}

/// Refuses an argument list longer than `bound`.
pub(crate) fn check_count(
    call: &'static str,
    what: &'static str,
    count: usize,
    bound: usize,
    why: impl FnOnce() -> String,
) -> Result<(), HostLimitExceeded> {
    if count > bound {
        return Err(HostLimitExceeded::Arguments {
            call,
            what,
            count,
            bound,
            why: why(),
        });
    }
    Ok(())
}

/// When the current call (`init` or `transform`) must end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallDeadline {
    at: Instant,
    timeout: Duration,
}

impl CallDeadline {
    /// A deadline `timeout` from now.
    pub(crate) fn starting_now(timeout: Duration) -> CallDeadline {
        let now = Instant::now();
        CallDeadline {
            // A timeout too large to represent never ends (a year is as good).
            at: now
                .checked_add(timeout)
                .unwrap_or(now + Duration::from_secs(365 * 24 * 3600)),
            timeout,
        }
    }

    /// When the call must end.
    pub(crate) fn at(&self) -> Instant {
        self.at
    }

    fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Fails if the module's `call` returned after the deadline.
    pub(crate) fn check_returned(&self, call: &'static str) -> Result<(), HostLimitExceeded> {
        match self.passed() {
            true => Err(HostLimitExceeded::Overran {
                call,
                timeout: self.timeout,
            }),
            false => Ok(()),
        }
    }

    /// Fails once the deadline has passed.
    pub(crate) fn check(&self, call: &'static str) -> Result<(), HostLimitExceeded> {
        match self.passed() {
            true => Err(HostLimitExceeded::Deadline {
                call,
                timeout: self.timeout,
            }),
            false => Ok(()),
        }
    }
}

/// The bytes the host holds for what a module produced in one batch.
#[derive(Debug)]
pub(crate) struct OutputBudget {
    used: usize,
    cap: usize,
}

impl OutputBudget {
    pub(crate) fn new(cap: usize) -> OutputBudget {
        OutputBudget { used: 0, cap }
    }

    /// Fails if one record of `bytes` would pass the cap on its own.
    pub(crate) fn check_record(
        &self,
        call: &'static str,
        bytes: usize,
    ) -> Result<(), HostLimitExceeded> {
        if bytes > self.cap {
            return Err(HostLimitExceeded::Record {
                call,
                bytes,
                cap_mib: self.cap / (1024 * 1024),
            });
        }
        Ok(())
    }

    /// Charges `bytes`, failing once the total passes the cap.
    pub(crate) fn charge(
        &mut self,
        call: &'static str,
        bytes: usize,
    ) -> Result<(), HostLimitExceeded> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.cap {
            return Err(HostLimitExceeded::Output {
                call,
                cap_mib: self.cap / (1024 * 1024),
            });
        }
        Ok(())
    }
}

/// Refuses a result of `bytes` that a host call would build for the module when it is
/// larger than the module's memory cap: the module could not receive it.
pub(crate) fn check_result(
    call: &'static str,
    bytes: usize,
    cap: usize,
) -> Result<(), HostLimitExceeded> {
    if bytes > cap {
        return Err(HostLimitExceeded::Result {
            call,
            bytes,
            cap_mib: cap / (1024 * 1024),
        });
    }
    Ok(())
}

/// What the host holds for one record: the record itself, its topic, key, value and
/// headers (given as name and value lengths).
pub(crate) fn held_record_bytes(
    topic: Option<&String>,
    key: Option<&Vec<u8>>,
    value: Option<&Vec<u8>>,
    headers: impl Iterator<Item = (usize, usize)>,
) -> usize {
    std::mem::size_of::<Record>()
        + topic.map_or(0, String::len)
        + key.map_or(0, Vec::len)
        + value.map_or(0, Vec::len)
        + headers
            .map(|(name, value)| std::mem::size_of::<(String, Vec<u8>)>() + name + value)
            .sum::<usize>()
}

/// What the host holds for `record`.
pub(crate) fn record_bytes(record: &Record) -> usize {
    held_record_bytes(
        record.topic.as_ref(),
        record.key.as_ref(),
        record.value.as_ref(),
        record
            .headers
            .iter()
            .map(|(name, value)| (name.len(), value.len())),
    )
}

/// What the host holds for one rejection with a message of `message_len` bytes.
pub(crate) fn rejection_bytes(message_len: usize) -> usize {
    std::mem::size_of::<(u32, String)>() + message_len
}

/// `message` cut to at most `max` bytes, at a character boundary.
pub(crate) fn truncated(mut message: String, max: usize) -> String {
    if message.len() > max {
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_refused_once_the_total_passes_the_cap() {
        let mut budget = OutputBudget::new(2 * 1024 * 1024);
        budget.charge("emit", 1024 * 1024).unwrap();
        budget.charge("emit", 1024 * 1024).unwrap();
        let error = budget.charge("emit", 1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "host call emit: the module emitted more than 2 MiB of records for one batch (the [transform] max_output_mib limit)"
        );
        assert!(!error.is_deadline());
    }

    #[test]
    fn results_are_refused_past_the_memory_cap() {
        check_result("columns", 1024 * 1024, 1024 * 1024).unwrap();
        let error = check_result("columns", 1024 * 1024 + 10, 1024 * 1024).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("would return 1048586 bytes, more than the module's 1 MiB memory cap"),
            "{error}"
        );
    }

    #[test]
    fn a_passed_deadline_fails_and_names_the_call() {
        let deadline = CallDeadline::starting_now(Duration::ZERO);
        let error = deadline.check("emit-encoded").unwrap_err();
        assert!(error.is_deadline());
        assert!(
            error
                .to_string()
                .contains("emit-encoded ran past the batch deadline")
        );
        CallDeadline::starting_now(Duration::from_secs(60))
            .check("emit-encoded")
            .unwrap();
    }

    #[test]
    fn counts_past_their_bound_are_refused() {
        let why = || "the batch has 3 columns".to_string();
        check_count("columns", "column names", 3, 3, why).unwrap();
        let error = check_count("columns", "column names", 4, 3, why).unwrap_err();
        assert_eq!(
            error.to_string(),
            "host call columns was given 4 column names; at most 3 are allowed (the batch has 3 columns)"
        );
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(truncated("héllo".to_string(), 2), "h");
        assert_eq!(truncated("hello".to_string(), 10), "hello");
    }

    #[test]
    fn a_record_costs_its_parts_and_its_frame() {
        let record = Record {
            key: Some(vec![0; 10]),
            value: Some(vec![0; 100]),
            headers: vec![("op".to_string(), vec![0; 6])],
            ..Record::default()
        };
        let frame = std::mem::size_of::<Record>() + std::mem::size_of::<(String, Vec<u8>)>();
        assert_eq!(record_bytes(&record), frame + 118);
    }
}
