//! The producer's librdkafka properties: the user's, Sluice's defaults, and secrets.

use std::collections::BTreeMap;

use crate::error::SinkError;
use crate::spelling;

/// Properties Sluice sets unless the config sets them.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "20"),
    ("compression.type", "lz4"),
];

/// Whether a property's value is a secret: it never appears in messages, logs or the
/// service's API (`sasl.password`, `sasl.jaas.config`, `ssl.key.password`,
/// `sasl.oauthbearer.client.secret`, ...).
pub fn is_secret_property(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("password")
        || name.contains("passphrase")
        || name.contains("secret")
        || name.contains("jaas")
        || name.contains("oauthbearer.config")
        || name.ends_with(".key")
        || name.ends_with("key.pem")
}

/// The properties librdkafka gets for the configured ones: Spark's and Java's spellings
/// (a `kafka.` prefix, `sasl.jaas.config`, PEM stores) become librdkafka's.
pub fn client_properties(
    configured: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SinkError> {
    Ok(spelling::translate(configured)?.properties)
}

/// One sentence per Spark or Java spelling among the configured properties that
/// [`client_properties`] translates (what `sluice check` shows).
pub fn translation_notes(configured: &BTreeMap<String, String>) -> Vec<String> {
    spelling::translate(configured)
        .map(|translated| translated.notes)
        .unwrap_or_default()
}

/// Removes secret property values from a message.
pub fn redact(message: &str, properties: &BTreeMap<String, String>) -> String {
    redact_values(message, &secret_values(properties))
}

/// The values of the secret properties among `properties`.
pub(crate) fn secret_values(properties: &BTreeMap<String, String>) -> Vec<String> {
    properties
        .iter()
        .filter(|(name, secret)| is_secret_property(name) && !secret.is_empty())
        .map(|(_, secret)| secret.clone())
        .collect()
}

/// Removes these secret values from a message.
pub(crate) fn redact_values(message: &str, secrets: &[String]) -> String {
    secrets.iter().fold(message.to_string(), |text, secret| {
        text.replace(secret.as_str(), "***")
    })
}

/// The configured `bootstrap.servers`, for messages (empty when unset).
pub(crate) fn bootstrap_of(properties: &BTreeMap<String, String>) -> String {
    properties
        .get("bootstrap.servers")
        .cloned()
        .unwrap_or_default()
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
