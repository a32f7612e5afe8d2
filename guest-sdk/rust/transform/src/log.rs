//! Log messages to the pipeline's log, attributed to the module.
//!
//! The host rate-limits them and reports how many it dropped. Natively (unit tests)
//! they go to stderr.

/// How loud a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Fine detail, off by default.
    Trace,
    /// Detail for debugging a transform.
    Debug,
    /// Normal operation.
    Info,
    /// Something looks wrong; the transform carries on.
    Warn,
    /// Something failed.
    Error,
}

/// Writes `message` at `level`.
pub fn log(level: Level, message: &str) {
    crate::guest::log(level, message);
}

/// Writes `message` at debug level.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Writes `message` at info level.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Writes `message` at warn level.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Writes `message` at error level.
pub fn error(message: &str) {
    log(Level::Error, message);
}
