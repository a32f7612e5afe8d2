//! The pipeline's stored position, in a local file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sluice_source::Position;

/// Why the stored position could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PositionError {
    /// The file could not be read or written.
    #[error("Cannot access the pipeline's position file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not a position.
    #[error(
        "The pipeline's position file {path} is corrupt ({reason}). Delete it to start from the configured starting_version."
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why it does not parse.
        reason: String,
    },
    /// The stored position belongs to a different table.
    #[error(
        "The stored position in {path} belongs to table {stored}, not {configured}. Give this pipeline another name, or delete the file to start over."
    )]
    OtherTable {
        /// The file.
        path: PathBuf,
        /// The table it was stored for.
        stored: String,
        /// The configured table.
        configured: String,
    },
}

#[derive(Serialize, Deserialize)]
struct Stored {
    table: String,
    version: u64,
    row_offset: u64,
}

/// A pipeline's position in a JSON file, replaced atomically on every save.
pub struct PositionStore {
    path: PathBuf,
    table: String,
}

impl PositionStore {
    /// The store for pipeline `name` reading `table`, under `state_dir`.
    pub fn new(state_dir: &Path, name: &str, table: &str) -> PositionStore {
        PositionStore {
            path: state_dir.join(name).join("position.json"),
            table: table.to_string(),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored position, if any.
    pub fn load(&self) -> Result<Option<Position>, PositionError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(PositionError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let stored: Stored = serde_json::from_str(&text).map_err(|e| PositionError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        if stored.table != self.table {
            return Err(PositionError::OtherTable {
                path: self.path.clone(),
                stored: stored.table,
                configured: self.table.clone(),
            });
        }
        Ok(Some(Position {
            version: stored.version,
            row_offset: stored.row_offset,
        }))
    }

    /// Stores `position`, durably: write a temporary file, sync it, rename it over.
    pub fn save(&self, position: Position) -> Result<(), PositionError> {
        let io = |source| PositionError::Io {
            path: self.path.clone(),
            source,
        };
        let stored = Stored {
            table: self.table.clone(),
            version: position.version,
            row_offset: position.row_offset,
        };
        let text = serde_json::to_string(&stored).expect("a position serializes");
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let file = std::fs::File::create(&tmp).map_err(io)?;
        std::io::Write::write_all(&mut &file, text.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads_and_refuses_another_tables_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = PositionStore::new(dir.path(), "p", "/t1");
        assert_eq!(store.load().unwrap(), None);
        let position = Position {
            version: 4,
            row_offset: 17,
        };
        store.save(position).unwrap();
        assert_eq!(store.load().unwrap(), Some(position));
        let other = PositionStore::new(dir.path(), "p", "/t2");
        assert!(matches!(
            other.load(),
            Err(PositionError::OtherTable { .. })
        ));
    }

    #[test]
    fn a_corrupt_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = PositionStore::new(dir.path(), "p", "/t");
        std::fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        std::fs::write(store.path(), "{").unwrap();
        assert!(matches!(store.load(), Err(PositionError::Corrupt { .. })));
    }
}
