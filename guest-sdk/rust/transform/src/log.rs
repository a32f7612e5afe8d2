//! Log messages to the pipeline's log, attributed to the module.
//!
//! The host rate-limits them and reports how many it dropped. Natively (unit tests)
//! they go to stderr.

use sluice_transform_sys::sluice::transform::types as wit;

use crate::abi;

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
    if cfg!(target_arch = "wasm32") {
        let level = match level {
            Level::Trace => wit::LogLevel::Trace,
            Level::Debug => wit::LogLevel::Debug,
            Level::Info => wit::LogLevel::Info,
            Level::Warn => wit::LogLevel::Warn,
            Level::Error => wit::LogLevel::Error,
        };
        abi::log(level, message);
    } else {
        eprintln!("[{level:?}] {message}");
    }
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
