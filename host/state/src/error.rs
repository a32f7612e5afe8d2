//! What can go wrong with a pipeline's state.

use std::path::PathBuf;

/// Why the local store or the changelog failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The local store could not be opened.
    #[error(
        "the state store at {path} could not be opened: {detail}; if another sluice process runs this pipeline here, stop it, otherwise delete the directory and it is restored from the changelog"
    )]
    Open {
        /// The store's file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// Reading or writing the local store failed.
    #[error("the state store at {path} failed: {detail}")]
    Io {
        /// The store's file (empty for the in-memory store).
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// The changelog topic could not be read.
    #[error("the state changelog topic {topic} could not be read: {detail}")]
    Changelog {
        /// The changelog topic.
        topic: String,
        /// What failed.
        detail: String,
    },
}
