//! Why a service request or start-up failed.

use std::path::PathBuf;

/// Errors of the service; each maps to one HTTP status in the API.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The service's config file is unusable.
    #[error("The service config {path} is invalid: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The state directory could not be read or written.
    #[error("The state directory could not be used at {path}: {message}")]
    State {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// No or a wrong token.
    #[error("A valid token is required: send `Authorization: Bearer <token>`.")]
    Unauthenticated,
    /// The token does not allow this.
    #[error("This token may not act for tenant {tenant}.")]
    Forbidden {
        /// The tenant asked for.
        tenant: String,
    },
    /// Only the operator may do this.
    #[error("Only the operator's token may {0}.")]
    OperatorOnly(&'static str),
    /// Something named does not exist (or belongs to another tenant).
    #[error("{what} was not found.")]
    NotFound {
        /// What was looked for, in words.
        what: String,
    },
    /// It exists already or is in a state that does not allow this.
    #[error("{0}")]
    Conflict(String),
    /// The request is malformed: a bad config, an unknown module, a bad name.
    #[error("{0}")]
    BadRequest(String),
    /// A tenant or host limit refuses it.
    #[error("{0}")]
    LimitExceeded(String),
    /// The module failed its checks; nothing changed.
    #[error("The module was refused and nothing changed: {0}")]
    InvalidModule(String),
    /// Kafka did not answer a read the request needs; retry later.
    #[error("{0}")]
    KafkaUnavailable(String),
    /// The host cannot do the request now (it began stopping, or is too busy to
    /// compile a module); retry it later or on another node.
    #[error("{0}")]
    Unavailable(String),
    /// The cluster's shared state or group could not be used.
    #[error("{0}")]
    Cluster(String),
}
