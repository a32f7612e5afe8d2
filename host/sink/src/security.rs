//! Authentication and TLS failures, told apart from librdkafka's error callbacks: which
//! broker, which mechanism, what is wrong and what to check. A wrong password, a token the
//! broker rejects or a certificate nobody trusts ends the connection attempt at once with
//! its own message, instead of a timeout.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::certificate;
use crate::properties::redact;

/// A failure to authenticate to, or set up TLS with, a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityFailure {
    /// The broker's address (`host:port`).
    pub broker: String,
    /// `security.protocol` as configured (`PLAINTEXT` when unset).
    pub protocol: String,
    /// `sasl.mechanism`, for SASL protocols.
    pub mechanism: Option<String>,
    /// What is wrong.
    pub problem: SecurityProblem,
    /// librdkafka's explanation, without secrets.
    pub detail: String,
}

/// What is wrong with a connection's security, each with what to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecurityProblem {
    /// The broker rejected the username and password (PLAIN, SCRAM).
    WrongCredentials {
        /// `sasl.username`, if set.
        username: Option<String>,
    },
    /// The listener does not offer the configured SASL mechanism.
    MechanismNotEnabled {
        /// The mechanisms it offers, as the broker lists them.
        offered: String,
    },
    /// No OAUTHBEARER token could be fetched from the token endpoint.
    TokenUnavailable {
        /// `sasl.oauthbearer.token.endpoint.url`, if set.
        endpoint: Option<String>,
    },
    /// The token endpoint handed out a token that had already expired.
    TokenExpired {
        /// `sasl.oauthbearer.token.endpoint.url`, if set.
        endpoint: Option<String>,
    },
    /// The broker rejected the OAUTHBEARER token (issuer, audience, signature or expiry).
    TokenRejected {
        /// `sasl.oauthbearer.token.endpoint.url`, if set.
        endpoint: Option<String>,
    },
    /// Another SASL authentication failure.
    AuthenticationFailed,
    /// The broker's certificate could not be verified, and looking at it did not say why.
    CertificateUnverified {
        /// `ssl.ca.location`, if set.
        ca: Option<String>,
    },
    /// The broker's certificate is not signed by a trusted CA.
    UntrustedCertificate {
        /// `ssl.ca.location`, if set; the system's CA certificates otherwise.
        ca: Option<String>,
        /// Who signed the broker's certificate.
        issuer: String,
    },
    /// The broker's certificate is valid, but for other names.
    HostnameMismatch {
        /// The host connected to.
        host: String,
        /// The names and addresses the certificate carries.
        names: Vec<String>,
    },
    /// The broker's certificate has expired or is not valid yet.
    CertificateOutOfDate,
    /// The broker refused the client certificate, or its absence (mutual TLS).
    ClientCertificateRefused {
        /// Where the client certificate comes from, if one is configured.
        certificate: Option<String>,
    },
    /// TLS was attempted against a listener that does not speak it.
    NotTls,
    /// Another TLS failure.
    TlsFailed,
}

impl SecurityProblem {
    /// What is wrong, as a clause.
    fn what(&self) -> String {
        match self {
            SecurityProblem::WrongCredentials { username } => match username {
                Some(user) => format!("the broker rejected the password of user `{user}`"),
                None => "the broker rejected the credentials".into(),
            },
            SecurityProblem::MechanismNotEnabled { offered } => {
                format!("the listener does not offer this SASL mechanism (it offers {offered})")
            }
            SecurityProblem::TokenUnavailable { endpoint } => format!(
                "no OAUTHBEARER token could be fetched{}",
                from_endpoint(endpoint)
            ),
            SecurityProblem::TokenExpired { endpoint } => format!(
                "the token{} had already expired when it arrived",
                from_endpoint(endpoint)
            ),
            SecurityProblem::TokenRejected { endpoint } => format!(
                "the broker rejected the OAUTHBEARER token{}",
                from_endpoint(endpoint)
            ),
            SecurityProblem::AuthenticationFailed => "SASL authentication failed".into(),
            SecurityProblem::CertificateUnverified { .. } => {
                "the broker's TLS certificate could not be verified".into()
            }
            SecurityProblem::UntrustedCertificate { ca, issuer } => format!(
                "the broker's TLS certificate (issued by `{issuer}`) is not signed by a CA this pipeline trusts ({})",
                trusted(ca)
            ),
            SecurityProblem::HostnameMismatch { host, names } => format!(
                "the broker's TLS certificate is for {}, not for `{host}`",
                if names.is_empty() {
                    "no name at all".to_string()
                } else {
                    names
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            SecurityProblem::CertificateOutOfDate => {
                "the broker's TLS certificate has expired or is not valid yet".into()
            }
            SecurityProblem::ClientCertificateRefused { certificate } => match certificate {
                Some(certificate) => {
                    format!("the broker refused the client certificate {certificate}")
                }
                None => {
                    "the listener requires a client certificate (mutual TLS) and none is configured"
                        .into()
                }
            },
            SecurityProblem::NotTls => {
                "the listener does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?)".into()
            }
            SecurityProblem::TlsFailed => "the TLS handshake failed".into(),
        }
    }

    /// What to check, as sentences.
    fn check(&self) -> &'static str {
        match self {
            SecurityProblem::WrongCredentials { .. } => {
                "Check sasl.username and sasl.password (or the API key and secret in sasl.jaas.config) in the Kafka settings; with SCRAM, also that the user has credentials for this mechanism on the cluster."
            }
            SecurityProblem::MechanismNotEnabled { .. } => {
                "Set sasl.mechanism to one the listener offers, or enable it on the broker (sasl.enabled.mechanisms)."
            }
            SecurityProblem::TokenUnavailable { .. } => {
                "Check sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret, and that the identity provider is reachable from this host."
            }
            SecurityProblem::TokenExpired { .. } => {
                "Check the clocks of this host and of the identity provider, and the token lifetime the provider issues for this client."
            }
            SecurityProblem::TokenRejected { .. } => {
                "The token's issuer, audience, signature or expiry does not match what the broker validates (its sasl.oauthbearer.expected.issuer, expected.audience and jwks.endpoint.url); check that sasl.oauthbearer.token.endpoint.url is the identity provider the broker trusts, and sasl.oauthbearer.scope."
            }
            SecurityProblem::AuthenticationFailed => {
                "Check sasl.mechanism and the credentials in the Kafka settings against what the listener expects."
            }
            SecurityProblem::CertificateUnverified { .. }
            | SecurityProblem::UntrustedCertificate { .. } => {
                "Set ssl.ca.location to the CA certificate (PEM) that signed the broker's certificate."
            }
            SecurityProblem::HostnameMismatch { .. } => {
                "Use a name the certificate carries in bootstrap.servers (and in the broker's advertised.listeners), or have the certificate reissued with this name among its subject alternative names."
            }
            SecurityProblem::CertificateOutOfDate => {
                "Have the broker's certificate renewed, and check this host's clock."
            }
            SecurityProblem::ClientCertificateRefused { .. } => {
                "Set ssl.certificate.location and ssl.key.location (PEM), or ssl.keystore.location (PKCS#12), to a certificate signed by a CA in the broker's ssl.truststore."
            }
            SecurityProblem::NotTls => {
                "Check security.protocol and the port in bootstrap.servers: SSL and SASL_SSL need a TLS listener."
            }
            SecurityProblem::TlsFailed => {
                "Check the ssl.* settings and security.protocol against the listener."
            }
        }
    }
}

impl SecurityProblem {
    /// Whether this problem explains others rather than following from one: a token that
    /// cannot be fetched explains the broker rejecting the expired one still in use.
    fn is_cause(&self) -> bool {
        !matches!(
            self,
            SecurityProblem::TokenRejected { .. } | SecurityProblem::AuthenticationFailed
        )
    }
}

fn from_endpoint(endpoint: &Option<String>) -> String {
    endpoint
        .as_ref()
        .map(|url| format!(" from {url}"))
        .unwrap_or_default()
}

fn trusted(ca: &Option<String>) -> String {
    match ca {
        Some(ca) => format!("ssl.ca.location is {ca}"),
        None => "ssl.ca.location is unset, so only the system's CA certificates".into(),
    }
}

impl std::fmt::Display for SecurityFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let listener = match &self.mechanism {
            Some(mechanism) => format!("{} with {mechanism}", self.protocol),
            None => self.protocol.clone(),
        };
        write!(
            f,
            "Kafka at {} ({listener}) refused the connection: {}. {} (librdkafka: {})",
            self.broker,
            self.problem.what(),
            self.problem.check(),
            self.detail
        )
    }
}

/// The security settings of a client, as far as a failure's message names them.
#[derive(Debug, Default)]
pub(crate) struct SecuritySettings {
    bootstrap: String,
    protocol: String,
    mechanism: Option<String>,
    username: Option<String>,
    token_endpoint: Option<String>,
    ca_location: Option<String>,
    client_certificate: Option<String>,
    /// Whether librdkafka checks the broker's name against its certificate.
    verifies_hostname: bool,
    /// Values never to repeat in a message.
    secrets: BTreeMap<String, String>,
}

impl SecuritySettings {
    /// The settings of librdkafka `properties`.
    pub(crate) fn new(properties: &BTreeMap<String, String>) -> SecuritySettings {
        let get = |name: &str| properties.get(name).filter(|v| !v.is_empty()).cloned();
        let protocol = get("security.protocol")
            .unwrap_or_else(|| "PLAINTEXT".into())
            .to_ascii_uppercase();
        let mechanism = protocol
            .starts_with("SASL")
            .then(|| get("sasl.mechanism").unwrap_or_else(|| "GSSAPI".into()));
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
            client_certificate,
            verifies_hostname: get("ssl.endpoint.identification.algorithm")
                .is_none_or(|algorithm| algorithm.eq_ignore_ascii_case("https")),
            secrets: properties.clone(),
        }
    }

    /// The failure an error callback reports, if it is a security failure.
    fn classify(&self, code: RDKafkaErrorCode, reason: &str) -> Option<SecurityFailure> {
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
                } else if let Some(offered) = after(text, "broker's supported mechanisms: ")
                    .filter(|offered| !offered.is_empty())
                {
                    // An empty list comes with a handshake out of step (a
                    // re-authentication racing a closing session), not a missing mechanism.
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
            detail: redact(&without_suffix(text), &self.secrets),
        })
    }

    /// The failure a log line reports, for the failures librdkafka only logs: a token
    /// it could not fetch again while the connection still had one.
    fn classify_log(&self, facility: &str, message: &str) -> Option<SecurityFailure> {
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
            detail: redact(detail, &self.secrets),
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

/// Collects the first security failure a client's error callback reports; shared by the
/// client's context and whoever waits on the client.
#[derive(Clone)]
pub(crate) struct SecurityWatch {
    settings: Arc<SecuritySettings>,
    seen: Arc<Mutex<Option<SecurityFailure>>>,
}

impl SecurityWatch {
    /// A watch for a client with these librdkafka `properties`.
    pub(crate) fn new(properties: &BTreeMap<String, String>) -> SecurityWatch {
        SecurityWatch {
            settings: Arc::new(SecuritySettings::new(properties)),
            seen: Arc::default(),
        }
    }

    /// Records an error callback's error; whether it was a security failure.
    pub(crate) fn record(&self, error: &KafkaError, reason: &str) -> bool {
        let failure = error
            .rdkafka_error_code()
            .and_then(|code| self.settings.classify(code, reason));
        self.keep(failure)
    }

    /// Keeps the first failure, unless it only follows from this one.
    fn keep(&self, failure: Option<SecurityFailure>) -> bool {
        let Some(failure) = failure else {
            return false;
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen
            .as_ref()
            .is_none_or(|kept| !kept.problem.is_cause() && failure.problem.is_cause())
        {
            *seen = Some(failure);
        }
        true
    }

    /// Logs a librdkafka log line as rdkafka does, and records the security failures
    /// librdkafka only logs.
    pub(crate) fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.keep(self.settings.classify_log(facility, message));
        let message = redact(message, &self.settings.secrets);
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
        }
    }

    /// Records an error callback's error, and logs it unless it is a security failure
    /// (which the client's user reports as an error of its own). `client` names the
    /// client in the log.
    pub(crate) fn report(&self, error: &KafkaError, reason: &str, client: &str) {
        if self.record(error, reason) {
            tracing::debug!(client, reason = %redact(reason, &self.settings.secrets), "The Kafka client met a security failure.");
        } else {
            tracing::warn!(client, %error, reason = %redact(reason, &self.settings.secrets), "The Kafka client reported a problem; it keeps retrying.");
        }
    }

    /// The first security failure seen, if any.
    pub(crate) fn failure(&self) -> Option<SecurityFailure> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The first security failure seen, if any; a certificate that could not be
    /// verified is looked at to say why (blocking: a TLS handshake with the broker).
    pub(crate) fn explained_failure(&self) -> Option<SecurityFailure> {
        let mut failure = self.failure()?;
        if let SecurityProblem::CertificateUnverified { ca } = &failure.problem {
            if let Some(problem) = certificate::why_unverified(
                &failure.broker,
                ca.as_deref(),
                self.settings.verifies_hostname,
            ) {
                failure.problem = problem;
            }
            *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure.clone());
        }
        Some(failure)
    }

    /// Forgets the failures seen so far: the connection works.
    pub(crate) fn clear(&self) {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(properties: &[(&str, &str)]) -> SecuritySettings {
        SecuritySettings::new(
            &properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
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
            message.starts_with("Kafka at 127.0.0.1:19096 (SASL_SSL with SCRAM-SHA-512) refused the connection: the broker rejected the password of user `sluice`. Check sasl.username"),
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

    const OAUTH: &[(&str, &str)] = &[
        ("bootstrap.servers", "127.0.0.1:19098"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        (
            "sasl.oauthbearer.token.endpoint.url",
            "http://127.0.0.1:19180/kafka/token",
        ),
        ("sasl.oauthbearer.client.secret", "s3cret"),
    ];

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
    fn a_handshake_out_of_step_is_no_missing_mechanism() {
        let failure = classify(
            OAUTH,
            RDKafkaErrorCode::Authentication,
            "sasl_ssl://127.0.0.1:19098/1: SASL OAUTHBEARER mechanism handshake failed: Broker: Request not valid in current SASL state: broker's supported mechanisms:  (after 1ms in state AUTH_HANDSHAKE)",
        );
        assert_eq!(
            failure.problem,
            SecurityProblem::TokenRejected {
                endpoint: Some("http://127.0.0.1:19180/kafka/token".into())
            }
        );
    }

    #[test]
    fn a_token_that_cannot_be_fetched_again_explains_the_rejections_after_it() {
        let watch = SecurityWatch::new(
            &OAUTH
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let rejected = KafkaError::Global(RDKafkaErrorCode::Authentication);
        watch.record(
            &rejected,
            "sasl_ssl://127.0.0.1:19098/1: SASL authentication error: {\"status\":\"invalid_token\"}",
        );
        watch.log(
            RDKafkaLogLevel::Error,
            "OIDC",
            "[thrd:background]: Failed to retrieve OIDC token from \"http://127.0.0.1:19180/kafka/token\": Empty reply from server (-1)",
        );
        let failure = watch.failure().unwrap();
        assert!(
            matches!(failure.problem, SecurityProblem::TokenUnavailable { .. }),
            "{failure}"
        );
        assert_eq!(
            failure.detail,
            "Failed to retrieve OIDC token from \"http://127.0.0.1:19180/kafka/token\": Empty reply from server (-1)"
        );
        watch.record(
            &rejected,
            "sasl_ssl://127.0.0.1:19098/1: SASL authentication error: {\"status\":\"invalid_token\"}",
        );
        assert!(matches!(
            watch.failure().unwrap().problem,
            SecurityProblem::TokenUnavailable { .. }
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
        let properties: BTreeMap<String, String> = OAUTH
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            connection_summary(&properties),
            "127.0.0.1:19098 over SASL_SSL with OAUTHBEARER, tokens from http://127.0.0.1:19180/kafka/token"
        );
    }

    #[test]
    fn the_watch_keeps_the_first_failure_until_cleared() {
        let watch = SecurityWatch::new(
            &SCRAM
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let error = KafkaError::Global(RDKafkaErrorCode::Authentication);
        assert!(watch.record(
            &error,
            "sasl_ssl://a:1/bootstrap: Authentication failed: Invalid username or password"
        ));
        assert!(watch.record(
            &error,
            "sasl_ssl://b:2/bootstrap: Authentication failed: Invalid username or password"
        ));
        assert_eq!(watch.failure().unwrap().broker, "a:1");
        watch.clear();
        assert_eq!(watch.failure(), None);
        assert!(!watch.record(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down"
        ));
        assert_eq!(watch.failure(), None);
    }
}
