//! Why a registry did not give a schema's id, with what to do about it.

/// A registry failure, with the registry's address and the subject.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No answer: connection refused, timeout, a broken TLS connection.
    #[error(
        "The schema registry at {url} did not answer: {detail}. Check [sink.schema_registry] url, that the registry runs and this host can reach it (and, for https, its certificate authority: ca_location)."
    )]
    Unreachable {
        /// The registry's address.
        url: String,
        /// What the HTTP client said.
        detail: String,
    },
    /// The registry's https certificate is not trusted (or not valid): retrying cannot
    /// help.
    #[error(
        "The schema registry at {url} presented a certificate this host does not trust: {detail}. Set [sink.schema_registry] ca_location to the PEM file of the certificate authority that signed it, or check that url names the registry's host."
    )]
    Untrusted {
        /// The registry's address.
        url: String,
        /// What the TLS library said.
        detail: String,
    },
    /// An address under the url is not there (a 404 that is not Confluent's "subject
    /// or version not found"): the url is not the base of a Confluent API.
    #[error(
        "The schema registry at {url} has no {path} (HTTP 404). Check that [sink.schema_registry] url is the base of its Confluent Schema Registry API (Apicurio's ends in /apis/ccompat/v7)."
    )]
    NotFound {
        /// The registry's address.
        url: String,
        /// The path asked for, under the url.
        path: String,
    },
    /// The credentials were refused.
    #[error(
        "The schema registry at {url} refused the credentials (HTTP {status}: {message}). Check [sink.schema_registry] username and password (an API key and secret on Confluent Cloud) or token."
    )]
    Unauthorized {
        /// The registry's address.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The registry's message.
        message: String,
    },
    /// The registry is there but cannot serve now (HTTP 5xx, or 429: too many requests).
    #[error(
        "The schema registry at {url} cannot serve now (HTTP {status}: {message}). Check the registry's health and its own logs."
    )]
    Unavailable {
        /// The registry's address.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The registry's message.
        message: String,
    },
    /// The registry refused a new version of a subject's schema as incompatible.
    #[error(
        "The schema registry at {url} refused a new schema for subject `{subject}` as incompatible with its compatibility level {level}: {message}. Nothing after the change was produced. Either make the change compatible (for BACKWARD, a new field needs a default: a nullable column gets one), or set the subject's compatibility to one that allows it (PUT {url}/config/{subject} {{\"compatibility\": \"NONE\"}}), or write to a new topic; then start the pipeline again: it resumes at the first row of the change."
    )]
    Incompatible {
        /// The registry's address.
        url: String,
        /// The subject.
        subject: String,
        /// The compatibility level that applied (`BACKWARD`...), or `unknown`.
        level: String,
        /// The registry's explanation.
        message: String,
    },
    /// Any other refusal.
    #[error(
        "The schema registry at {url} refused to register a schema under subject `{subject}` (HTTP {status}: {message}). Check [sink.encoding] (record_name and namespace must be names the format allows) and that the registry accepts this schema type."
    )]
    Refused {
        /// The registry's address.
        url: String,
        /// The subject.
        subject: String,
        /// The HTTP status.
        status: u16,
        /// The registry's message.
        message: String,
    },
    /// A schema a module framed its own bytes with names no record, and the subject
    /// strategy names subjects after records.
    #[error(
        "The {kind} schema the module framed its records with names no record, and [sink.encoding] subject_name_strategy names subjects after records. Name it (an Avro named type, a JSON Schema's title, or the name the module gives with the schema), or use subject_name_strategy = \"topic\"."
    )]
    Unnamed {
        /// The schema's kind, as the registry names it.
        kind: &'static str,
    },
}

impl RegistryError {
    /// Whether trying again later may succeed (the registry was away), as opposed to a
    /// refusal that stands until someone changes something.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            RegistryError::Unreachable { .. } | RegistryError::Unavailable { .. }
        )
    }

    /// For a registry that is away ([`RegistryError::is_transient`]): its address and,
    /// in a few words, why it gave no id (`the connection was refused`).
    pub fn unavailability(&self) -> Option<(&str, String)> {
        match self {
            RegistryError::Unreachable { url, detail } => Some((url, detail.clone())),
            RegistryError::Unavailable {
                url,
                status,
                message,
            } => Some((url, format!("it answered HTTP {status}: {message}"))),
            _ => None,
        }
    }
}
