//! What can go wrong in a cluster's Kafka plumbing.

/// A cluster error, naming the topic or group and the brokers.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A cluster topic could not be made, read or written.
    #[error("The cluster's {what} topic {topic} at {bootstrap}: {detail}")]
    Topic {
        /// `state`, `status` or `slots`.
        what: &'static str,
        /// The topic.
        topic: String,
        /// The brokers.
        bootstrap: String,
        /// What happened and what to do.
        detail: String,
    },
    /// Joining or leaving the cluster's consumer group failed.
    #[error("The cluster's group {group} at {bootstrap}: {detail}")]
    Membership {
        /// The group.
        group: String,
        /// The brokers.
        bootstrap: String,
        /// What happened and what to do.
        detail: String,
    },
    /// A module's bytes in the shared state do not match their digest.
    #[error("Module {digest} in the cluster's state is damaged: {detail}")]
    Blob {
        /// The module's digest.
        digest: String,
        /// What does not match.
        detail: String,
    },
}
