//! The pipeline's keyed state (contract 1.2): values by key, kept across batches and
//! committed exactly once with the batch's records.
//!
//! What a `transform` call changes belongs to its batch: later calls read it, and it
//! is committed with the batch's records or forgotten with them. Keys and values are
//! bytes; [`get_i64`], [`add_i64`], [`get_str`] and their kin store numbers and text as
//! UTF-8 text, as every SDK does, so `sluice state` shows them and a module in another
//! language reads them. With the feature `json`, `get_json` and `put_json` store any
//! serde value as compact JSON text.
//!
//! A pipeline keeps state only with a `[state]` section; its limits (keys, bytes, the
//! largest value) fail the batch when crossed.
//!
//! Natively (unit tests) the state is an in-memory map per thread: [`clear`] empties
//! it and [`entries`] shows it.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::abi;

thread_local! {
    /// The state natively, for unit tests.
    static NATIVE: RefCell<BTreeMap<Vec<u8>, Vec<u8>>> = const { RefCell::new(BTreeMap::new()) };
}

fn on_host() -> bool {
    cfg!(target_arch = "wasm32")
}

/// The value under `key`.
pub fn get(key: &[u8]) -> Option<Vec<u8>> {
    if on_host() {
        return abi::state_get(key);
    }
    NATIVE.with(|state| state.borrow().get(key).cloned())
}

/// The values under `keys`, in order, in one host call.
pub fn get_many(keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    if on_host() {
        return abi::state_get_many(keys);
    }
    keys.iter().map(|key| get(key)).collect()
}

/// Sets the value under `key`.
pub fn put(key: &[u8], value: &[u8]) {
    if on_host() {
        return abi::state_put(key, value);
    }
    NATIVE.with(|state| state.borrow_mut().insert(key.to_vec(), value.to_vec()));
}

/// Removes `key`; removing an absent key does nothing.
pub fn delete(key: &[u8]) {
    if on_host() {
        return abi::state_delete(key);
    }
    NATIVE.with(|state| state.borrow_mut().remove(key));
}

/// Up to `limit` entries whose keys start with `prefix`, in byte order of their keys,
/// after `start_after` when given. Fewer than `limit` means there are no more.
pub fn scan(prefix: &[u8], start_after: Option<&[u8]>, limit: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    if on_host() {
        return abi::state_scan(prefix, start_after, limit);
    }
    NATIVE.with(|state| {
        state
            .borrow()
            .range(prefix.to_vec()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .filter(|(key, _)| start_after.is_none_or(|after| key.as_slice() > after))
            .take(limit as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    })
}

/// The text under `key`; `None` when absent or not UTF-8.
pub fn get_str(key: &str) -> Option<String> {
    get(key.as_bytes()).and_then(|value| String::from_utf8(value).ok())
}

/// Sets `key` to `value`.
pub fn put_str(key: &str, value: &str) {
    put(key.as_bytes(), value.as_bytes());
}

/// The integer under `key` (stored as decimal text); `None` when absent or not one.
pub fn get_i64(key: &str) -> Option<i64> {
    get_str(key).and_then(|text| text.parse().ok())
}

/// Sets `key` to `value`, as decimal text.
pub fn put_i64(key: &str, value: i64) {
    put_str(key, &value.to_string());
}

/// Adds `delta` to the counter under `key` (absent counts as 0) and returns the new
/// value; a counter that reaches 0 is removed.
pub fn add_i64(key: &str, delta: i64) -> i64 {
    let value = get_i64(key).unwrap_or(0).saturating_add(delta);
    match value {
        0 => delete(key.as_bytes()),
        _ => put_i64(key, value),
    }
    value
}

/// The number under `key` (stored as text); `None` when absent or not one.
pub fn get_f64(key: &str) -> Option<f64> {
    get_str(key).and_then(|text| text.parse().ok())
}

/// Sets `key` to `value`, as text that reads back to the same number.
pub fn put_f64(key: &str, value: f64) {
    put_str(key, &value.to_string());
}

/// The JSON value under `key`, deserialised; `None` when absent, an error when it is
/// not a `T` (feature `json`).
#[cfg(feature = "json")]
pub fn get_json<T: serde::de::DeserializeOwned>(key: &str) -> Option<Result<T, serde_json::Error>> {
    get(key.as_bytes()).map(|value| serde_json::from_slice(&value))
}

/// Sets `key` to `value` as compact JSON, as the other SDKs store it (feature `json`).
#[cfg(feature = "json")]
pub fn put_json<T: serde::Serialize + ?Sized>(key: &str, value: &T) {
    let value = serde_json::to_vec(value).expect("a value serialises to JSON");
    put(key.as_bytes(), &value);
}

/// Empties the native state, between unit tests.
pub fn clear() {
    NATIVE.with(|state| state.borrow_mut().clear());
}

/// Every entry of the native state, in key order.
pub fn entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    NATIVE.with(|state| {
        state
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "json")]
    #[test]
    fn json_values_are_compact_text_the_other_sdks_read() {
        clear();
        put_json("acme", &serde_json::json!({"open": 3, "stages": ["won"]}));
        assert_eq!(
            get_str("acme").as_deref(),
            Some(r#"{"open":3,"stages":["won"]}"#)
        );
        let read: serde_json::Value = get_json("acme").unwrap().unwrap();
        assert_eq!(read["open"], 3);
        assert!(get_json::<u32>("acme").unwrap().is_err());
        assert!(get_json::<u32>("absent").is_none());
    }

    #[test]
    fn counters_and_text_round_trip_and_scans_page() {
        clear();
        assert_eq!(add_i64("count/a", 2), 2);
        assert_eq!(add_i64("count/a", 3), 5);
        assert_eq!(add_i64("count/b", 1), 1);
        put_f64("sum", 12.5);
        assert_eq!(get_f64("sum"), Some(12.5));
        assert_eq!(get_str("count/a").as_deref(), Some("5"));
        let first = scan(b"count/", None, 1);
        assert_eq!(first, vec![(b"count/a".to_vec(), b"5".to_vec())]);
        let rest = scan(b"count/", Some(&first[0].0), 10);
        assert_eq!(rest, vec![(b"count/b".to_vec(), b"1".to_vec())]);
        assert_eq!(add_i64("count/b", -1), 0);
        assert_eq!(get(b"count/b"), None);
        assert_eq!(
            get_many(&[b"count/a".to_vec(), b"missing".to_vec()]),
            vec![Some(b"5".to_vec()), None]
        );
        assert_eq!(entries().len(), 2);
    }

    /// The conformance suite every SDK's state helpers pass (`guest-sdk/conformance/`).
    const SUITE: &str = include_str!("../../../conformance/state.json");

    fn bytes(value: &serde_json::Value) -> Vec<u8> {
        match value {
            serde_json::Value::String(text) => text.as_bytes().to_vec(),
            value => {
                let hex = value["hex"].as_str().expect("bytes are text or {hex}");
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect()
            }
        }
    }

    fn text(value: &serde_json::Value) -> String {
        String::from_utf8(bytes(value)).expect("a typed helper's key is text")
    }

    fn optional(value: &serde_json::Value) -> Option<Vec<u8>> {
        (!value.is_null()).then(|| bytes(value))
    }

    /// What a step gives, as JSON comparable with the suite's `returns` once both are
    /// read as bytes.
    fn run_step(op: &str, args: &[serde_json::Value]) -> Option<serde_json::Value> {
        use serde_json::json;
        let hex = |bytes: &[u8]| json!({ "hex": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>() });
        let key = &args[0];
        match op {
            "put" => put(&bytes(key), &bytes(&args[1])),
            "put_str" => put_str(&text(key), args[1].as_str().unwrap()),
            "put_number" => put_i64(&text(key), args[1].as_i64().unwrap()),
            "add" => return Some(json!(add_i64(&text(key), args[1].as_i64().unwrap()))),
            "delete" => delete(&bytes(key)),
            "get" => return Some(get(&bytes(key)).map_or(json!(null), |v| hex(&v))),
            "get_str" => return Some(json!(get_str(&text(key)))),
            "get_number" => return Some(json!(get_i64(&text(key)))),
            "get_many" => {
                let keys: Vec<Vec<u8>> = key.as_array().unwrap().iter().map(bytes).collect();
                let values = get_many(&keys);
                return Some(
                    values
                        .iter()
                        .map(|v| v.as_deref().map_or(json!(null), hex))
                        .collect(),
                );
            }
            "scan" => {
                let after = optional(&args[1]);
                let limit = args[2].as_u64().unwrap() as u32;
                let found = scan(&bytes(key), after.as_deref(), limit);
                return Some(found.iter().map(|(k, v)| json!([hex(k), hex(v)])).collect());
            }
            other => panic!("unknown step {other}"),
        }
        None
    }

    /// `value` with every bytes (text or {hex}) as {hex}, so the suite's and a step's
    /// answers compare.
    fn as_hex(value: &serde_json::Value, holds_bytes: bool) -> serde_json::Value {
        use serde_json::{Value, json};
        match value {
            Value::Array(items) => items.iter().map(|v| as_hex(v, holds_bytes)).collect(),
            Value::String(_) | Value::Object(_) if holds_bytes => {
                json!({ "hex": bytes(value).iter().map(|b| format!("{b:02x}")).collect::<String>() })
            }
            other => other.clone(),
        }
    }

    #[test]
    fn the_helpers_pass_every_case_of_the_conformance_suite() {
        let suite: serde_json::Value = serde_json::from_str(SUITE).unwrap();
        let cases = suite["cases"].as_array().unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            clear();
            let name = case["name"].as_str().unwrap();
            for step in case["steps"].as_array().unwrap() {
                let step = step.as_object().unwrap();
                let (op, args) = step.iter().find(|(k, _)| *k != "returns").unwrap();
                let given = run_step(op, args.as_array().unwrap());
                if let Some(returns) = step.get("returns") {
                    let holds_bytes = matches!(op.as_str(), "get" | "get_many" | "scan");
                    assert_eq!(
                        given.map(|g| as_hex(&g, holds_bytes)),
                        Some(as_hex(returns, holds_bytes)),
                        "{name}: {op} {args}"
                    );
                }
            }
            let stored: Vec<(Vec<u8>, Vec<u8>)> = case["state"]
                .as_array()
                .unwrap()
                .iter()
                .map(|entry| (bytes(&entry[0]), bytes(&entry[1])))
                .collect();
            assert_eq!(entries(), stored, "{name}: the stored entries");
        }
    }
}
