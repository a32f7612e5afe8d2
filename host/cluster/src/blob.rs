//! Module bytes as records. Kafka's default record limit is 1 MB and modules reach
//! ~20 MB, so a module goes into the state topic as chunks under the keys
//! `blob/<digest>/<index>/<count>`, before any record that names it. Chunks have keys of
//! their own, so compaction keeps every one; a node assembles a module when it has all
//! its chunks and checks the digest.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

use crate::error::ClusterError;

/// Bytes per chunk: half of Kafka's default record limit, room for the key and headers.
pub const CHUNK_BYTES: usize = 512 * 1024;

/// The prefix of chunk keys.
const PREFIX: &str = "blob/";

/// Where a chunk belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkKey {
    /// SHA-256 of the whole module, in hex.
    pub digest: String,
    /// The chunk's place, from 0.
    pub index: usize,
    /// How many chunks the module has.
    pub count: usize,
}

impl ChunkKey {
    /// The record key.
    pub fn key(&self) -> String {
        format!("{PREFIX}{}/{}/{}", self.digest, self.index, self.count)
    }

    /// The chunk a record key names, if it names one.
    pub fn parse(key: &str) -> Option<ChunkKey> {
        let mut parts = key.strip_prefix(PREFIX)?.split('/');
        let (digest, index, count) = (parts.next()?, parts.next()?, parts.next()?);
        let (index, count) = (index.parse().ok()?, count.parse().ok()?);
        (parts.next().is_none() && index < count).then(|| ChunkKey {
            digest: digest.to_string(),
            index,
            count,
        })
    }
}

/// The module's bytes as keyed chunks, in order (one empty chunk for empty bytes).
pub fn chunks<'a>(digest: &str, bytes: &'a [u8]) -> Vec<(ChunkKey, &'a [u8])> {
    let pieces: Vec<&[u8]> = if bytes.is_empty() {
        vec![bytes]
    } else {
        bytes.chunks(CHUNK_BYTES).collect()
    };
    let count = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(index, piece)| {
            let key = ChunkKey {
                digest: digest.to_string(),
                index,
                count,
            };
            (key, piece)
        })
        .collect()
}

/// SHA-256 of `bytes` in hex: a module's digest.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Collects chunks until a module is whole.
#[derive(Debug, Default)]
pub struct Assembler {
    partial: BTreeMap<String, Vec<Option<Vec<u8>>>>,
}

impl Assembler {
    /// Adds a chunk; returns the module's bytes when this chunk completes it, checked
    /// against its digest. A chunk seen again (a rewrite, a replay) replaces the first.
    pub fn add(&mut self, key: &ChunkKey, chunk: Vec<u8>) -> Option<Result<Vec<u8>, ClusterError>> {
        let slots = self
            .partial
            .entry(key.digest.clone())
            .or_insert_with(|| vec![None; key.count]);
        if slots.len() != key.count {
            // Written again with another chunk count: start over with this one.
            *slots = vec![None; key.count];
        }
        slots[key.index] = Some(chunk);
        if slots.iter().any(Option::is_none) {
            return None;
        }
        let pieces = self.partial.remove(&key.digest).unwrap_or_default();
        let bytes: Vec<u8> = pieces.into_iter().flatten().flatten().collect();
        let found = digest(&bytes);
        Some(if found == key.digest {
            Ok(bytes)
        } else {
            Err(ClusterError::Blob {
                digest: key.digest.clone(),
                detail: format!(
                    "its {} chunks add up to {} bytes with digest {found}",
                    key.count,
                    bytes.len()
                ),
            })
        })
    }

    /// Modules waiting for chunks.
    pub fn waiting(&self) -> usize {
        self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_goes_out_in_chunks_and_comes_back_whole() {
        let bytes: Vec<u8> = (0..CHUNK_BYTES * 2 + 10).map(|i| (i % 251) as u8).collect();
        let digest = digest(&bytes);
        let pieces = chunks(&digest, &bytes);
        assert_eq!(pieces.len(), 3);
        let mut assembler = Assembler::default();
        // Out of order, one chunk twice: whole only when the last one arrives.
        assert!(assembler.add(&pieces[2].0, pieces[2].1.to_vec()).is_none());
        assert!(assembler.add(&pieces[0].0, pieces[0].1.to_vec()).is_none());
        assert!(assembler.add(&pieces[0].0, pieces[0].1.to_vec()).is_none());
        assert_eq!(assembler.waiting(), 1);
        let whole = assembler.add(&pieces[1].0, pieces[1].1.to_vec()).unwrap();
        assert_eq!(whole.unwrap(), bytes);
        assert_eq!(assembler.waiting(), 0);
    }

    #[test]
    fn keys_round_trip_and_strangers_are_not_chunks() {
        let key = ChunkKey {
            digest: "ab12".into(),
            index: 1,
            count: 3,
        };
        assert_eq!(key.key(), "blob/ab12/1/3");
        assert_eq!(ChunkKey::parse(&key.key()), Some(key));
        for other in [
            "pipeline/t/p",
            "blob/ab/3/3",
            "blob/ab/1",
            "blob/ab/x/3",
            "blob/ab/0/1/9",
        ] {
            assert_eq!(ChunkKey::parse(other), None, "{other}");
        }
    }

    #[test]
    fn damaged_bytes_are_refused_and_empty_modules_have_one_chunk() {
        let pieces = chunks("00ff", b"not these bytes");
        let mut assembler = Assembler::default();
        let refused = assembler.add(&pieces[0].0, pieces[0].1.to_vec()).unwrap();
        assert!(refused.unwrap_err().to_string().contains("damaged"));
        let empty = digest(b"");
        let pieces = chunks(&empty, b"");
        assert_eq!(pieces.len(), 1);
        let whole = assembler.add(&pieces[0].0, Vec::new()).unwrap();
        assert_eq!(whole.unwrap(), Vec::<u8>::new());
    }
}
