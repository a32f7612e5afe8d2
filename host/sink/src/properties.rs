//! The producer's librdkafka properties: the user's, Sluice's defaults, and secrets.

use std::collections::BTreeMap;

/// Properties Sluice sets unless the config sets them.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "20"),
    ("compression.type", "lz4"),
];

/// Property names whose values are secrets and never appear in messages.
const SECRET_PROPERTIES: &[&str] = &[
    "sasl.password",
    "sasl.jaas.config",
    "sasl.oauthbearer.client.secret",
    "ssl.key.password",
    "ssl.keystore.password",
];

/// Removes secret property values from a message.
pub fn redact(message: &str, properties: &BTreeMap<String, String>) -> String {
    SECRET_PROPERTIES
        .iter()
        .filter_map(|name| properties.get(*name))
        .filter(|secret| !secret.is_empty())
        .fold(message.to_string(), |text, secret| {
            text.replace(secret.as_str(), "***")
        })
}

/// The properties a consumer of the position topic needs: the connection and security
/// settings, none of the producer's.
pub fn consumer_properties(properties: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    properties
        .iter()
        .filter(|(name, _)| {
            [
                "bootstrap.servers",
                "security.protocol",
                "client.id",
                "client.rack",
            ]
            .contains(&name.as_str())
                || name.starts_with("sasl.")
                || name.starts_with("ssl.")
                || name.starts_with("socket.")
                || name.starts_with("broker.")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_messages() {
        let properties = BTreeMap::from([("sasl.password".to_string(), "hunter2".to_string())]);
        assert_eq!(redact("bad value hunter2", &properties), "bad value ***");
    }

    #[test]
    fn consumers_get_connection_settings_only() {
        let properties = BTreeMap::from([
            ("bootstrap.servers".to_string(), "b:9092".to_string()),
            ("sasl.mechanism".to_string(), "PLAIN".to_string()),
            ("linger.ms".to_string(), "5".to_string()),
        ]);
        let consumer = consumer_properties(&properties);
        assert_eq!(consumer.len(), 2);
        assert!(!consumer.contains_key("linger.ms"));
    }
}
