//! Telling a producer fenced by a newer instance of its pipeline from other client
//! problems. In a cluster this is how a pipeline that moved to another node ends on the
//! node it left, so it is reported as a move, not as a failure.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// librdkafka's codes for a transactional producer fenced by a newer one with the same
/// transactional id, with how its messages describe them: its own code, and the brokers'
/// two (librdkafka turns both into its own). The broker also bumps the epoch of a
/// producer whose transaction ran past its timeout, which the producer cannot tell from
/// being fenced.
const FENCING: [(RDKafkaErrorCode, &str); 3] = [
    (
        RDKafkaErrorCode::Fenced,
        "This instance has been fenced by a newer instance",
    ),
    (
        RDKafkaErrorCode::ProducerFenced,
        "There is a newer producer with the same transactionalId which fences the current one",
    ),
    (
        RDKafkaErrorCode::InvalidProducerEpoch,
        "Producer attempted an operation with an old epoch",
    ),
];

/// Whether `code` says the producer was fenced.
pub(crate) fn is_fencing(code: RDKafkaErrorCode) -> bool {
    FENCING.iter().any(|(fencing, _)| *fencing == code)
}

/// Whether an error callback's error says the producer was fenced: librdkafka reports
/// the fence with its code, and may report it again as its fatal error, whose reason
/// quotes the code's description (`Fatal error: Local: This instance has been fenced by
/// a newer instance: ...`).
pub(crate) fn is_fenced(error: &KafkaError, reason: &str) -> bool {
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::Fatal) => quotes_fencing(reason),
        Some(code) => is_fencing(code),
        None => false,
    }
}

/// Whether a librdkafka log line is about a fence (the `ADDPARTS`, `TXNERR` and `FATAL`
/// lines that quote a fencing code's description): the error callback reports the
/// fence once, as a move.
pub(crate) fn is_fence_log(message: &str) -> bool {
    quotes_fencing(message)
}

fn quotes_fencing(text: &str) -> bool {
    FENCING
        .iter()
        .any(|(_, description)| text.contains(description))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What librdkafka 2.12 reported when a second `sluice run` of the same pipeline
    /// fenced the first (the delivery integration test's zombie).
    const ADD_PARTITIONS: &str = "Failed to add partitions to transaction: Local: This instance has been fenced by a newer instance";

    #[test]
    fn the_descriptions_are_librdkafkas() {
        for (code, description) in FENCING {
            // A code's Display is `Name (librdkafka's description)`.
            assert!(code.to_string().contains(description), "{code}");
        }
    }

    #[test]
    fn a_fence_is_told_by_its_code_or_its_fatal_reason() {
        let fenced = KafkaError::Global(RDKafkaErrorCode::Fenced);
        assert!(is_fenced(&fenced, ADD_PARTITIONS));
        for code in [
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
        ] {
            assert!(is_fenced(&KafkaError::Global(code), "from the broker"));
        }
        let fatal = KafkaError::Global(RDKafkaErrorCode::Fatal);
        assert!(is_fenced(
            &fatal,
            &format!(
                "Fatal error: Local: This instance has been fenced by a newer instance: {ADD_PARTITIONS}"
            )
        ));
    }

    #[test]
    fn other_problems_and_other_fatal_errors_are_no_fence() {
        let fatal = KafkaError::Global(RDKafkaErrorCode::Fatal);
        assert!(!is_fenced(
            &fatal,
            "Fatal error: Broker: Cluster authorization failed: InitProducerId failed"
        ));
        assert!(!is_fenced(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down"
        ));
        assert!(!is_fenced(
            &KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure),
            "127.0.0.1:19092/1: Disconnected (after 60000ms in state UP)"
        ));
        // A fenced consumer-group member (static membership) is no producer fence.
        assert!(!is_fenced(
            &KafkaError::Global(RDKafkaErrorCode::FencedInstanceId),
            "Broker: Static consumer fenced by other consumer with same group.instance.id"
        ));
    }

    #[test]
    fn librdkafka_lines_about_the_fence_are_told_apart() {
        for line in [
            "[thrd:main]: TxnCoordinator/1: Failed to add partition \"sluice-position-p\" [0] to transaction: Broker: Producer attempted an operation with an old epoch",
            "[thrd:main]: Fatal transaction error: Failed to add partitions to transaction: Local: This instance has been fenced by a newer instance (_FENCED)",
            "[thrd:main]: Fatal error: Local: This instance has been fenced by a newer instance: Failed to add partitions to transaction",
        ] {
            assert!(is_fence_log(line), "{line}");
        }
        assert!(!is_fence_log(
            "[thrd:main]: 127.0.0.1:19092/1: Connect to ipv4#127.0.0.1:19092 failed: Connection refused"
        ));
    }
}
