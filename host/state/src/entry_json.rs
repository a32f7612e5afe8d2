//! Entries as JSON, the form `sluice state export` prints, preview's state files hold
//! and the admin API answers with: `key` and `value` as text, or `key_hex` and
//! `value_hex` for bytes that are not UTF-8.

use serde_json::{Map, Value};

/// An entry as a JSON object.
pub fn entry_to_json(key: &[u8], value: &[u8]) -> Value {
    Value::Object(Map::from_iter([
        named_bytes("key", key),
        named_bytes("value", value),
    ]))
}

/// The key and value of a JSON entry, or what is wrong with it.
pub fn entry_from_json(entry: &Value) -> Result<(Vec<u8>, Vec<u8>), String> {
    Ok((get_bytes(entry, "key")?, get_bytes(entry, "value")?))
}

/// Bytes named as text or as hex (exactly one of them), as the API's queries name keys.
pub fn bytes_from_text_or_hex(
    name: &str,
    text: Option<&str>,
    hex: Option<&str>,
) -> Result<Vec<u8>, String> {
    match (text, hex) {
        (Some(text), None) => Ok(text.as_bytes().to_vec()),
        (None, Some(hex)) => from_hex(name, hex),
        (Some(_), Some(_)) => Err(format!("give {name} or {name}_hex, not both")),
        (None, None) => Err(format!("give {name} (text) or {name}_hex (bytes as hex)")),
    }
}

/// The bytes under `name` (text) or `<name>_hex`.
fn get_bytes(entry: &Value, name: &str) -> Result<Vec<u8>, String> {
    if let Some(text) = entry.get(name).and_then(Value::as_str) {
        return Ok(text.as_bytes().to_vec());
    }
    let hex = entry
        .get(format!("{name}_hex"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("it has no {name} or {name}_hex"))?;
    from_hex(name, hex)
}

fn from_hex(name: &str, hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
        return Err(format!("{name}_hex is not hex"));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| format!("{name}_hex is not hex"))
        })
        .collect()
}

/// `bytes` under `name` as text, or under `<name>_hex` when they are not UTF-8.
pub fn named_bytes(name: &str, bytes: &[u8]) -> (String, Value) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (name.to_string(), text.into()),
        Err(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            (format!("{name}_hex"), hex.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_bytes_round_trip() {
        for (key, value) in [
            (b"open/acme".to_vec(), b"3".to_vec()),
            (vec![0xff, 0x00], "Zoë".as_bytes().to_vec()),
        ] {
            let json = entry_to_json(&key, &value);
            assert_eq!(entry_from_json(&json).unwrap(), (key, value));
        }
        assert_eq!(
            entry_to_json(&[0xff, 0x00], b"1").to_string(),
            r#"{"key_hex":"ff00","value":"1"}"#
        );
    }

    #[test]
    fn names_what_is_wrong() {
        let error = entry_from_json(&serde_json::json!({"key": "a"})).unwrap_err();
        assert_eq!(error, "it has no value or value_hex");
        let error = entry_from_json(&serde_json::json!({"key_hex": "f", "value": "1"}));
        assert_eq!(error.unwrap_err(), "key_hex is not hex");
        assert_eq!(
            bytes_from_text_or_hex("key", None, Some("6b")).unwrap(),
            b"k"
        );
        assert!(bytes_from_text_or_hex("key", Some("a"), Some("6b")).is_err());
        assert!(bytes_from_text_or_hex("key", None, None).is_err());
    }
}
