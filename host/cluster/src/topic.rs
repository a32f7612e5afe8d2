//! The cluster's shared topics by what they hold: the config names them and a
//! [`StateLog`](crate::StateLog) reads one, so neither owns the list.

/// Which of the cluster's shared topics a [`StateLog`](crate::StateLog) reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedTopic {
    /// What the operator and tenants asked for: tenants, modules, pipeline definitions.
    State,
    /// What the nodes report: which node runs each pipeline, where it is, how fast.
    Status,
}

impl SharedTopic {
    /// The topic's part in its name, and its name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SharedTopic::State => "state",
            SharedTopic::Status => "status",
        }
    }
}
