//! Authentication and TLS failures: which broker, which listener, what is wrong and what
//! to check.

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
    /// Whether this problem explains others rather than following from one: a token that
    /// cannot be fetched explains the broker rejecting the expired one still in use.
    pub(crate) fn is_cause(&self) -> bool {
        !matches!(
            self,
            SecurityProblem::TokenRejected { .. } | SecurityProblem::AuthenticationFailed
        )
    }

    /// Whether one sighting settles it: a TLS handshake can also break because a
    /// connection dropped, so those count once they repeat.
    pub(crate) fn is_definite(&self) -> bool {
        !matches!(self, SecurityProblem::NotTls | SecurityProblem::TlsFailed)
    }

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
            "Could not connect to Kafka at {} ({listener}): {}. {} (librdkafka: {})",
            self.broker,
            self.problem.what(),
            self.problem.check(),
            self.detail
        )
    }
}
