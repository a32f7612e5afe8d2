//! Telling security failures apart in librdkafka's error and log callbacks, from the
//! client's settings: the broker, the mechanism and the problem.

use std::collections::BTreeMap;

use rdkafka::error::RDKafkaErrorCode;

use crate::failure::{SecurityFailure, SecurityProblem};
use crate::properties::{redact_values, secret_values};

/// The security settings of a client, as far as a failure's message names them. Not
/// `Debug`: it holds the secret values, to remove them from messages.
#[derive(Default)]
pub(crate) struct SecuritySettings {
    bootstrap: String,
    protocol: String,
    mechanism: Option<String>,
    username: Option<String>,
    token_endpoint: Option<String>,
    ca_location: Option<String>,
    /// `ssl.ca.pem`: CA certificates given inline.
    ca_pem: Option<String>,
    client_certificate: Option<String>,
    /// Whether librdkafka checks the broker's name against its certificate.
    verifies_hostname: bool,
    /// Values never to repeat in a message.
    secrets: Vec<String>,
}

impl SecuritySettings {
    /// The settings of librdkafka `properties`.
    pub(crate) fn new(properties: &BTreeMap<String, String>) -> SecuritySettings {
        let get = |name: &str| properties.get(name).filter(|v| !v.is_empty()).cloned();
        let protocol = get("security.protocol")
            .unwrap_or_else(|| "PLAINTEXT".into())
            .to_ascii_uppercase();
        let mechanism = protocol.starts_with("SASL").then(|| {
            get("sasl.mechanism")
                .or_else(|| get("sasl.mechanisms"))
                .unwrap_or_else(|| "GSSAPI".into())
        });
        let client_certificate = get("ssl.certificate.location")
            .or_else(|| get("ssl.keystore.location"))
            .map(|path| format!("`{path}`"))
            .or_else(|| get("ssl.certificate.pem").map(|_| "in ssl.certificate.pem".into()));
        SecuritySettings {
            bootstrap: get("bootstrap.servers").unwrap_or_default(),
            protocol,
            mechanism,
            username: get("sasl.username"),
            token_endpoint: get("sasl.oauthbearer.token.endpoint.url"),
            ca_location: get("ssl.ca.location"),
            ca_pem: get("ssl.ca.pem"),
            client_certificate,
            verifies_hostname: get("ssl.endpoint.identification.algorithm")
                .is_none_or(|algorithm| algorithm.eq_ignore_ascii_case("https")),
            secrets: secret_values(properties),
        }
    }

    /// Values never to repeat in a message.
    pub(crate) fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// Whether librdkafka checks the broker's name against its certificate.
    pub(crate) fn verifies_hostname(&self) -> bool {
        self.verifies_hostname
    }

    /// The CA certificates the client trusts: `ssl.ca.location` and `ssl.ca.pem`.
    pub(crate) fn trusted_cas(&self) -> (Option<&str>, Option<&str>) {
        (self.ca_location.as_deref(), self.ca_pem.as_deref())
    }

    /// The failure an error callback reports, if it is a security failure.
    pub(crate) fn classify(&self, code: RDKafkaErrorCode, reason: &str) -> Option<SecurityFailure> {
        let (broker, text) = split_broker(reason);
        let endpoint = self.token_endpoint.clone();
        let problem = match code {
            RDKafkaErrorCode::Authentication => {
                if text.contains("Failed to acquire SASL OAUTHBEARER token") {
                    if text.contains("unexpired token") {
                        SecurityProblem::TokenExpired { endpoint }
                    } else {
                        SecurityProblem::TokenUnavailable { endpoint }
                    }
                } else if text.contains("Request not valid in current SASL state") {
                    // A handshake out of step (a re-authentication racing a closing
                    // session): transient, and librdkafka connects again.
                    return None;
                } else if let Some(offered) = after(text, "broker's supported mechanisms: ") {
                    SecurityProblem::MechanismNotEnabled {
                        offered: offered.to_string(),
                    }
                } else if self.mechanism.as_deref() == Some("OAUTHBEARER") {
                    SecurityProblem::TokenRejected { endpoint }
                } else if text.contains("invalid credentials")
                    || text.contains("Invalid username or password")
                {
                    SecurityProblem::WrongCredentials {
                        username: self.username.clone(),
                    }
                } else {
                    SecurityProblem::AuthenticationFailed
                }
            }
            RDKafkaErrorCode::SSL if text.contains("certificate verify failed") => {
                SecurityProblem::CertificateUnverified {
                    ca: self.ca_location.clone(),
                }
            }
            RDKafkaErrorCode::SSL => SecurityProblem::TlsFailed,
            RDKafkaErrorCode::BrokerTransportFailure
                if [
                    "alert bad certificate",
                    "alert certificate unknown",
                    "alert unknown ca",
                    "certificate required",
                ]
                .iter()
                .any(|alert| text.contains(alert)) =>
            {
                SecurityProblem::ClientCertificateRefused {
                    certificate: self.client_certificate.clone(),
                }
            }
            RDKafkaErrorCode::BrokerTransportFailure
                if text.contains("connecting to a PLAINTEXT broker listener") =>
            {
                SecurityProblem::NotTls
            }
            _ => return None,
        };
        Some(SecurityFailure {
            broker: broker.unwrap_or_else(|| self.first_bootstrap()),
            protocol: self.protocol.clone(),
            mechanism: self.mechanism.clone(),
            problem,
            detail: redact_values(&without_suffix(text), &self.secrets),
        })
    }

    /// The failure a log line reports, for the failures librdkafka only logs: a token
    /// it could not fetch again while the connection still had one.
    pub(crate) fn classify_log(&self, facility: &str, message: &str) -> Option<SecurityFailure> {
        if facility != "OIDC" || !message.contains("Failed to retrieve OIDC token") {
            return None;
        }
        let detail = message.split_once("]: ").map_or(message, |(_, text)| text);
        Some(SecurityFailure {
            broker: self.first_bootstrap(),
            protocol: self.protocol.clone(),
            mechanism: self.mechanism.clone(),
            problem: SecurityProblem::TokenUnavailable {
                endpoint: self.token_endpoint.clone(),
            },
            detail: redact_values(detail, &self.secrets),
        })
    }

    /// How the client connects, in words: `b:9092 over SASL_SSL with SCRAM-SHA-512 as
    /// `sluice``.
    fn summary(&self) -> String {
        let mut text = format!("{} over {}", self.bootstrap, self.protocol);
        if let Some(mechanism) = &self.mechanism {
            text += &format!(" with {mechanism}");
        }
        if let Some(user) = &self.username {
            text += &format!(" as `{user}`");
        }
        if let Some(endpoint) = &self.token_endpoint {
            text += &format!(", tokens from {endpoint}");
        }
        if let Some(certificate) = &self.client_certificate {
            text += &format!(", client certificate {certificate}");
        }
        text
    }

    fn first_bootstrap(&self) -> String {
        self.bootstrap
            .split(',')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    }
}

/// How a client with these librdkafka properties connects, in words (no secrets):
/// `b:9092 over SASL_SSL with SCRAM-SHA-512 as `sluice``.
pub fn connection_summary(properties: &BTreeMap<String, String>) -> String {
    SecuritySettings::new(properties).summary()
}

/// The broker address of a librdkafka message (`sasl_ssl://host:port/id: text`), and the
/// text after it.
fn split_broker(reason: &str) -> (Option<String>, &str) {
    let Some((scheme, rest)) = reason.split_once("://") else {
        return (None, reason);
    };
    if scheme.contains(' ') {
        return (None, reason);
    }
    let Some((name, text)) = rest.split_once(": ") else {
        return (None, reason);
    };
    let address = name.split('/').next().unwrap_or(name);
    (Some(address.to_string()), text)
}

/// The text after `marker`, up to librdkafka's ` (after ...)` suffix.
fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &text[text.find(marker)? + marker.len()..];
    Some(rest.split(" (after ").next().unwrap_or(rest).trim())
}

/// The message without librdkafka's ` (after 315ms in state AUTH_REQ, ...)` suffix.
fn without_suffix(text: &str) -> String {
    text.split(" (after ").next().unwrap_or(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{OAUTH, properties};

    fn settings(pairs: &[(&str, &str)]) -> SecuritySettings {
        SecuritySettings::new(&properties(pairs))
    }

    fn classify(
        properties: &[(&str, &str)],
        code: RDKafkaErrorCode,
        reason: &str,
    ) -> SecurityFailure {
        settings(properties)
            .classify(code, reason)
            .expect("a security failure")
    }

    const SCRAM: &[(&str, &str)] = &[
        ("bootstrap.servers", "127.0.0.1:19096"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "sluice"),
        ("sasl.password", "hunter2"),
    ];

    #[test]
    fn a_rejected_scram_password_names_the_broker_user_and_mechanism() {
        let failure = classify(
            SCRAM,
            RDKafkaErrorCode::Authentication,
            "sasl_ssl://127.0.0.1:19096/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 315ms in state AUTH_REQ, 1 identical error(s) suppressed)",
        );
        assert_eq!(failure.broker, "127.0.0.1:19096");
        assert_eq!(
            failure.problem,
            SecurityProblem::WrongCredentials {
                username: Some("sluice".into())
            }
        );
        let message = failure.to_string();
        assert!(
            message.starts_with("Could not connect to Kafka at 127.0.0.1:19096 (SASL_SSL with SCRAM-SHA-512): the broker rejected the password of user `sluice`. Check sasl.username"),
            "{message}"
        );
        assert!(!message.contains("after 315ms"), "{message}");
    }

    #[test]
    fn a_plain_refusal_is_wrong_credentials_too() {
        let failure = classify(
            &[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanism", "PLAIN"),
            ],
            RDKafkaErrorCode::Authentication,
            "sasl_ssl://127.0.0.1:19096/bootstrap: SASL authentication error: Authentication failed: Invalid username or password (after 301ms in state AUTH_REQ)",
        );
        assert_eq!(
            failure.problem,
            SecurityProblem::WrongCredentials { username: None }
        );
        assert_eq!(failure.protocol, "SASL_SSL");
    }

    #[test]
    fn a_mechanism_the_listener_lacks_lists_what_it_offers() {
        let failure = classify(
            SCRAM,
            RDKafkaErrorCode::Authentication,
            "sasl_plaintext://127.0.0.1:19094/bootstrap: SASL SCRAM-SHA-512 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN,SCRAM-SHA-256 (after 301ms in state AUTH_HANDSHAKE)",
        );
        assert_eq!(
            failure.problem,
            SecurityProblem::MechanismNotEnabled {
                offered: "PLAIN,SCRAM-SHA-256".into()
            }
        );
    }

    #[test]
    fn token_failures_are_told_apart() {
        let endpoint = Some("http://127.0.0.1:19180/kafka/token".to_string());
        let expired = classify(
            OAUTH,
            RDKafkaErrorCode::Authentication,
            "Failed to acquire SASL OAUTHBEARER token: Must supply an unexpired token: now=1796176924434ms, exp=1796176324000ms",
        );
        assert_eq!(
            expired.problem,
            SecurityProblem::TokenExpired {
                endpoint: endpoint.clone()
            }
        );
        assert_eq!(expired.broker, "127.0.0.1:19098", "the bootstrap server");
        let unavailable = classify(
            OAUTH,
            RDKafkaErrorCode::Authentication,
            "Failed to acquire SASL OAUTHBEARER token: Failed to connect to 127.0.0.1:1 after 0 ms: Could not connect to server",
        );
        assert_eq!(
            unavailable.problem,
            SecurityProblem::TokenUnavailable {
                endpoint: endpoint.clone()
            }
        );
        let rejected = classify(
            OAUTH,
            RDKafkaErrorCode::Authentication,
            "sasl_ssl://127.0.0.1:19098/bootstrap: SASL authentication error: {\"status\":\"invalid_token\"} (after 304ms in state AUTH_REQ)",
        );
        assert_eq!(
            rejected.problem,
            SecurityProblem::TokenRejected { endpoint }
        );
    }

    #[test]
    fn secrets_never_reach_the_detail() {
        let failure = classify(
            OAUTH,
            RDKafkaErrorCode::Authentication,
            "Failed to acquire SASL OAUTHBEARER token: client s3cret refused",
        );
        assert!(!failure.to_string().contains("s3cret"), "{failure}");
    }

    #[test]
    fn tls_failures_are_told_apart() {
        let tls = &[
            ("bootstrap.servers", "127.0.0.1:19097"),
            ("security.protocol", "SSL"),
        ];
        let refused = classify(
            tls,
            RDKafkaErrorCode::BrokerTransportFailure,
            "ssl://127.0.0.1:19097/bootstrap: Receive failed: error:0A000412:SSL routines::sslv3 alert bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY)",
        );
        assert_eq!(
            refused.problem,
            SecurityProblem::ClientCertificateRefused { certificate: None }
        );
        let with_certificate = classify(
            &[
                ("security.protocol", "SSL"),
                ("ssl.certificate.location", "/certs/client.crt"),
            ],
            RDKafkaErrorCode::BrokerTransportFailure,
            "ssl://127.0.0.1:19097/bootstrap: Receive failed: error:0A000416:SSL routines::sslv3 alert certificate unknown: SSL alert number 46",
        );
        assert_eq!(
            with_certificate.problem,
            SecurityProblem::ClientCertificateRefused {
                certificate: Some("`/certs/client.crt`".into())
            }
        );
        let unverified = classify(
            tls,
            RDKafkaErrorCode::SSL,
            "ssl://127.0.0.1:19095/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package) (after 6ms in state SSL_HANDSHAKE)",
        );
        assert_eq!(
            unverified.problem,
            SecurityProblem::CertificateUnverified { ca: None }
        );
        let not_tls = classify(
            tls,
            RDKafkaErrorCode::BrokerTransportFailure,
            "ssl://127.0.0.1:19092/bootstrap: SSL handshake failed: Disconnected: SSL connection closed by peer: connecting to a PLAINTEXT broker listener? (after 1ms in state SSL_HANDSHAKE)",
        );
        assert_eq!(not_tls.problem, SecurityProblem::NotTls);
    }

    #[test]
    fn a_handshake_out_of_step_is_no_failure() {
        assert_eq!(
            settings(OAUTH).classify(
                RDKafkaErrorCode::Authentication,
                "sasl_ssl://127.0.0.1:19098/1: SASL OAUTHBEARER mechanism handshake failed: Broker: Request not valid in current SASL state: broker's supported mechanisms:  (after 1ms in state AUTH_HANDSHAKE)",
            ),
            None
        );
    }

    #[test]
    fn librdkafkas_plural_mechanism_property_counts() {
        let failure = classify(
            &[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanisms", "OAUTHBEARER"),
            ],
            RDKafkaErrorCode::Authentication,
            "sasl_ssl://b:1/bootstrap: SASL authentication error: {\"status\":\"invalid_token\"}",
        );
        assert_eq!(failure.mechanism.as_deref(), Some("OAUTHBEARER"));
        assert!(matches!(
            failure.problem,
            SecurityProblem::TokenRejected { .. }
        ));
    }

    #[test]
    fn other_errors_are_not_security_failures() {
        let settings = settings(SCRAM);
        for (code, reason) in [
            (
                RDKafkaErrorCode::BrokerTransportFailure,
                "sasl_ssl://127.0.0.1:19096/bootstrap: Connect to ipv4#127.0.0.1:19096 failed: Connection refused (after 0ms in state CONNECT)",
            ),
            (RDKafkaErrorCode::AllBrokersDown, "1/1 brokers are down"),
        ] {
            assert_eq!(settings.classify(code, reason), None, "{reason}");
        }
    }

    #[test]
    fn the_summary_names_the_listener_without_secrets() {
        assert_eq!(
            connection_summary(&properties(OAUTH)),
            "127.0.0.1:19098 over SASL_SSL with OAUTHBEARER, tokens from http://127.0.0.1:19180/kafka/token"
        );
    }
}
