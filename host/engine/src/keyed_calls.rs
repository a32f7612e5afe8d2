//! The host side of the contract's `state` interface (1.2): each call checks the batch
//! deadline, and results are bounded by the module's memory cap like any host call's.

use crate::budget::{check_count, check_result};
use crate::contract::v1::sluice::transform::state as wit;
use crate::keyed::{KeyedSession, StateError};
use crate::state::{HostState, Keyed};

const GET: &str = "state.get";
const GET_MANY: &str = "state.get-many";
const PUT: &str = "state.put";
const DELETE: &str = "state.delete";
const SCAN: &str = "state.scan";

/// Most keys one `get-many` may ask for: a batch's worth of rows many times over.
const MAX_KEYS_PER_CALL: usize = 1 << 20;

impl HostState {
    /// The batch's state session, or why there is none.
    fn session(&mut self, call: &'static str) -> wasmtime::Result<&mut KeyedSession> {
        self.deadline.check(call)?;
        match &mut self.keyed {
            Keyed::Batch(session) => Ok(session),
            Keyed::NotKept => Err(StateError::NotKept.into()),
            Keyed::Init => Err(StateError::OutsideBatch.into()),
        }
    }
}

impl wit::Host for HostState {
    fn get(&mut self, key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        let cap = self.limiter.memory_limit();
        let session = self.session(GET)?;
        session.access.keys_read += 1;
        let value = session.get(&key)?;
        check_result(GET, value.as_ref().map_or(0, Vec::len), cap)?;
        Ok(value)
    }

    fn get_many(&mut self, keys: Vec<Vec<u8>>) -> wasmtime::Result<Vec<Option<Vec<u8>>>> {
        check_count(GET_MANY, "keys", keys.len(), MAX_KEYS_PER_CALL, || {
            "ask in parts".to_string()
        })?;
        let cap = self.limiter.memory_limit();
        let session = self.session(GET_MANY)?;
        session.access.keys_read += keys.len() as u64;
        let mut values = Vec::with_capacity(keys.len());
        let mut bytes = 0;
        for key in &keys {
            let value = session.get(key)?;
            bytes += value.as_ref().map_or(0, Vec::len) + std::mem::size_of::<Option<Vec<u8>>>();
            check_result(GET_MANY, bytes, cap)?;
            values.push(value);
        }
        Ok(values)
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        let session = self.session(PUT)?;
        session.access.keys_written += 1;
        session.change(key, Some(value))?;
        Ok(())
    }

    fn delete(&mut self, key: Vec<u8>) -> wasmtime::Result<()> {
        let session = self.session(DELETE)?;
        session.access.keys_written += 1;
        session.change(key, None)?;
        Ok(())
    }

    fn scan(
        &mut self,
        prefix: Vec<u8>,
        start_after: Option<Vec<u8>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<wit::Entry>> {
        let cap = self.limiter.memory_limit();
        let session = self.session(SCAN)?;
        let entries = session.scan(&prefix, start_after.as_deref(), limit as usize)?;
        session.access.keys_read += entries.len() as u64;
        let bytes = entries
            .iter()
            .map(|(key, value)| key.len() + value.len() + std::mem::size_of::<wit::Entry>())
            .sum();
        check_result(SCAN, bytes, cap)?;
        Ok(entries
            .into_iter()
            .map(|(key, value)| wit::Entry { key, value })
            .collect())
    }
}
