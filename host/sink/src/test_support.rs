//! Fixtures the unit tests of several modules share.

use std::collections::BTreeMap;

/// A property map from pairs.
pub(crate) fn properties(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The settings of a client on the local broker's OAUTHBEARER listener.
pub(crate) const OAUTH: &[(&str, &str)] = &[
    ("bootstrap.servers", "127.0.0.1:19098"),
    ("security.protocol", "SASL_SSL"),
    ("sasl.mechanism", "OAUTHBEARER"),
    (
        "sasl.oauthbearer.token.endpoint.url",
        "http://127.0.0.1:19180/kafka/token",
    ),
    ("sasl.oauthbearer.client.secret", "s3cret"),
];
