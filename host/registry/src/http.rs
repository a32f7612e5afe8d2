//! The Schema Registry REST API over HTTP(S), with basic or bearer authentication and
//! an optional certificate authority of its own.

use std::time::Duration;

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value as Json, json};
use sluice_encoding::{SchemaKind, WriterSchema};
use ureq::Agent;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

use crate::{Registration, RegistryError, SchemaRegistry};

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// How requests authenticate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RegistryAuth {
    /// No credentials.
    #[default]
    None,
    /// HTTP basic authentication (Confluent Cloud: API key and secret).
    Basic {
        /// User name or API key.
        username: String,
        /// Password or API secret.
        password: String,
    },
    /// A bearer token.
    Bearer(String),
}

/// Where a registry is and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrySettings {
    /// Base address of the Confluent API (`https://psrc-....confluent.cloud`,
    /// `http://127.0.0.1:8081/apis/ccompat/v7` for Apicurio).
    pub url: String,
    /// Credentials.
    pub auth: RegistryAuth,
    /// PEM certificates trusted for https instead of the well-known authorities.
    pub ca_pem: Option<Vec<u8>>,
    /// Longest one request may take.
    pub timeout: Duration,
}

/// A registry reached over HTTP.
pub struct HttpRegistry {
    url: String,
    authorization: Option<String>,
    agent: Agent,
    timeout: Duration,
}

impl HttpRegistry {
    /// A client for the registry `settings` names; fails only on an unreadable
    /// certificate authority.
    pub fn new(settings: &RegistrySettings) -> Result<HttpRegistry, RegistryError> {
        let url = settings.url.trim_end_matches('/').to_string();
        let mut config = Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            .http_status_as_error(false);
        if let Some(pem) = &settings.ca_pem {
            let certificates = ureq::tls::parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<Vec<Certificate<'static>>, _>>()
                .map_err(|e| RegistryError::Unreachable {
                    url: url.clone(),
                    detail: format!("its certificate authority (ca_location) is not PEM: {e}"),
                })?;
            config = config.tls_config(
                TlsConfig::builder()
                    .root_certs(RootCerts::new_with_certs(&certificates))
                    .build(),
            );
        }
        let authorization = match &settings.auth {
            RegistryAuth::None => None,
            RegistryAuth::Basic { username, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
            RegistryAuth::Bearer(token) => Some(format!("Bearer {token}")),
        };
        Ok(HttpRegistry {
            url,
            authorization,
            agent: config.build().into(),
            timeout: settings.timeout,
        })
    }

    /// Sends a POST of `body`, or a GET without one; the status and parsed body of any
    /// answer.
    fn call(&self, path: &str, body: Option<Json>) -> Result<(u16, Json), RegistryError> {
        let address = format!("{}{path}", self.url);
        let unreachable = |e: ureq::Error| {
            let certificate = match &e {
                ureq::Error::Rustls(rustls::Error::InvalidCertificate(_)) => true,
                ureq::Error::Io(io) => io
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                    .is_some_and(|inner| matches!(inner, rustls::Error::InvalidCertificate(_))),
                _ => false,
            };
            match certificate {
                true => RegistryError::Untrusted {
                    url: self.url.clone(),
                    detail: e.to_string(),
                },
                false => RegistryError::Unreachable {
                    url: self.url.clone(),
                    detail: unanswered(&e, self.timeout),
                },
            }
        };
        let response = match body {
            Some(body) => {
                let mut request = self
                    .agent
                    .post(&address)
                    .header("Content-Type", CONTENT_TYPE);
                if let Some(auth) = &self.authorization {
                    request = request.header("Authorization", auth);
                }
                request.send(body.to_string())
            }
            None => {
                let mut request = self.agent.get(&address).header("Accept", CONTENT_TYPE);
                if let Some(auth) = &self.authorization {
                    request = request.header("Authorization", auth);
                }
                request.call()
            }
        };
        let mut response = response.map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(unreachable)?;
        let body = serde_json::from_str(&text).unwrap_or(Json::String(text));
        if status == 401 || status == 403 {
            return Err(RegistryError::Unauthorized {
                url: self.url.clone(),
                status,
                message: message(&body),
            });
        }
        // Confluent's 404s carry error codes 404xx (no such subject, version, schema,
        // subject-level config...); one without is an address the API does not have.
        let known_absence = matches!(
            body.get("error_code").and_then(Json::as_u64),
            Some(40400..=40499)
        );
        if status == 404 && !known_absence {
            return Err(RegistryError::NotFound {
                url: self.url.clone(),
                path: path.split('?').next().unwrap_or(path).to_string(),
            });
        }
        if status == 429 || status >= 500 {
            return Err(RegistryError::Unavailable {
                url: self.url.clone(),
                status,
                message: message(&body),
            });
        }
        Ok((status, body))
    }
}

/// Why a request got no answer, in words (the client's own text, such as `timeout:
/// global`, says little to whoever reads the pipeline's error).
fn unanswered(error: &ureq::Error, timeout: Duration) -> String {
    use std::io::ErrorKind;
    match error {
        ureq::Error::Timeout(_) => format!(
            "no complete answer within {} s ([sink.schema_registry] timeout): the registry is overloaded or stalled, or something on the way holds the connection",
            timeout.as_secs_f64()
        ),
        ureq::Error::HostNotFound => "its host name does not resolve".to_string(),
        ureq::Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => {
                "the connection was refused (nothing listens at that address)".to_string()
            }
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                "the connection was reset".to_string()
            }
            ErrorKind::UnexpectedEof => {
                "the connection closed before a complete answer".to_string()
            }
            ErrorKind::TimedOut => format!(
                "no complete answer within {} s ([sink.schema_registry] timeout)",
                timeout.as_secs_f64()
            ),
            _ => format!("the connection failed: {io}"),
        },
        other => other.to_string(),
    }
}

/// The registry's own message in an error body.
fn message(body: &Json) -> String {
    match body.get("message").and_then(Json::as_str) {
        Some(message) => message.to_string(),
        None => match body {
            Json::String(text) => text.chars().take(300).collect(),
            other => other.to_string(),
        },
    }
}

/// The request body naming `schema` (Avro is the API's default type).
fn schema_body(schema: &WriterSchema) -> Json {
    let mut body = json!({"schema": schema.text});
    if schema.kind != SchemaKind::Avro {
        body["schemaType"] = json!(schema.kind.registry_name());
    }
    body
}

impl HttpRegistry {
    /// The request body naming `schema` with its references (a `.proto` file's imports)
    /// by subject and version, each registered first when `register`; `None` when, only
    /// looking, a reference is not registered yet.
    fn body(&self, schema: &WriterSchema, register: bool) -> Result<Option<Json>, RegistryError> {
        let mut body = schema_body(schema);
        if schema.references.is_empty() {
            return Ok(Some(body));
        }
        let mut references = Vec::new();
        for reference in &schema.references {
            let subject = &reference.name;
            if register {
                self.register(subject, &reference.schema)?;
            }
            let Some(own) = self.body(&reference.schema, register)? else {
                return Ok(None);
            };
            let (status, found) =
                self.call(&format!("/subjects/{}", segment(subject)), Some(own))?;
            match found.get("version").and_then(Json::as_u64) {
                Some(version) if status < 300 => references.push(json!({
                    "name": reference.name,
                    "subject": subject,
                    "version": version,
                })),
                _ if !register => return Ok(None),
                _ => {
                    return Err(RegistryError::Refused {
                        url: self.url.clone(),
                        subject: subject.clone(),
                        status,
                        message: format!(
                            "the registered reference has no version: {}",
                            message(&found)
                        ),
                    });
                }
            }
        }
        body["references"] = Json::Array(references);
        Ok(Some(body))
    }
}

/// What a subject keeps of its characters in a URL path: RFC 3986's unreserved ones,
/// so a registry that quotes the path back names the subject as it is.
const SUBJECT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn segment(subject: &str) -> String {
    utf8_percent_encode(subject, SUBJECT).to_string()
}

impl SchemaRegistry for HttpRegistry {
    fn register(&self, subject: &str, schema: &WriterSchema) -> Result<u32, RegistryError> {
        let body = self
            .body(schema, true)?
            .unwrap_or_else(|| schema_body(schema));
        let path = format!("/subjects/{}/versions", segment(subject));
        let (status, answer) = self.call(&path, Some(body))?;
        if let Some(id) = answer
            .get("id")
            .and_then(Json::as_u64)
            .filter(|_| status < 300)
        {
            return u32::try_from(id).map_err(|_| RegistryError::Refused {
                url: self.url.clone(),
                subject: subject.to_string(),
                status,
                message: format!("the id {id} does not fit in 4 bytes"),
            });
        }
        if status == 409 {
            return Err(RegistryError::Incompatible {
                url: self.url.clone(),
                subject: subject.to_string(),
                level: self
                    .compatibility(subject)
                    .unwrap_or_else(|_| "unknown".to_string()),
                message: message(&answer),
            });
        }
        Err(RegistryError::Refused {
            url: self.url.clone(),
            subject: subject.to_string(),
            status,
            message: message(&answer),
        })
    }

    fn preview(&self, subject: &str, schema: &WriterSchema) -> Result<Registration, RegistryError> {
        // A reference the registry does not have yet is registered with the schema.
        let Some(body) = self.body(schema, false)? else {
            return Ok(Registration::Accepted);
        };
        let (status, known) = self.call(
            &format!("/subjects/{}", segment(subject)),
            Some(body.clone()),
        )?;
        if status < 300
            && let Some(id) = known.get("id").and_then(Json::as_u64)
        {
            return Ok(Registration::Known(id as u32));
        }
        let path = format!(
            "/compatibility/subjects/{}/versions/latest?verbose=true",
            segment(subject)
        );
        let (status, answer) = self.call(&path, Some(body))?;
        // No subject or version yet (a Confluent 404): any schema is the first.
        if status == 404 {
            return Ok(Registration::Accepted);
        }
        match answer.get("is_compatible").and_then(Json::as_bool) {
            Some(true) => Ok(Registration::Accepted),
            Some(false) => {
                let reasons = answer
                    .get("messages")
                    .and_then(Json::as_array)
                    .map(|m| {
                        m.iter()
                            .filter_map(Json::as_str)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| {
                        "the registry's compatibility check gave no reasons (Apicurio gives them only when the schema is registered: `sluice run` would stop there with them)".to_string()
                    });
                Ok(Registration::Refused(reasons))
            }
            None => Err(RegistryError::Refused {
                url: self.url.clone(),
                subject: subject.to_string(),
                status,
                message: message(&answer),
            }),
        }
    }

    fn compatibility(&self, subject: &str) -> Result<String, RegistryError> {
        let level = |body: &Json| {
            ["compatibilityLevel", "compatibility"]
                .iter()
                .find_map(|k| body.get(k).and_then(Json::as_str))
                .map(str::to_string)
        };
        let path = format!("/config/{}?defaultToGlobal=true", segment(subject));
        let (status, body) = self.call(&path, None)?;
        if status < 300
            && let Some(found) = level(&body)
        {
            return Ok(found);
        }
        let (status, body) = self.call("/config", None)?;
        match level(&body).filter(|_| status < 300) {
            Some(found) => Ok(found),
            None => Err(RegistryError::Refused {
                url: self.url.clone(),
                subject: subject.to_string(),
                status,
                message: format!("no compatibility level in its answer: {}", message(&body)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn subjects_keep_their_unreserved_characters_in_paths() {
        assert_eq!(
            segment("gold-deals.v1_x~y-value"),
            "gold-deals.v1_x~y-value"
        );
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }

    /// Serves one request with `answer`; returns what it received.
    fn serve_once(status: u16, answer: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&request).contains("\"schema\"") {
                let n = stream.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            let reply = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
            String::from_utf8_lossy(&request).into_owned()
        });
        (url, handle)
    }

    fn schema() -> WriterSchema {
        WriterSchema {
            kind: SchemaKind::Json,
            text: "{\"type\":\"object\"}".into(),
            name: "sluice.Value".into(),
            references: Vec::new(),
        }
    }

    fn settings(url: String, auth: RegistryAuth) -> RegistrySettings {
        RegistrySettings {
            url,
            auth,
            ca_pem: None,
            timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn registers_with_basic_credentials_and_the_schema_type() {
        let (url, server) = serve_once(200, r#"{"id":7}"#);
        let auth = RegistryAuth::Basic {
            username: "key".into(),
            password: "secret".into(),
        };
        let registry = HttpRegistry::new(&settings(url, auth)).unwrap();
        assert_eq!(registry.register("deals value/x", &schema()).unwrap(), 7);
        let request = server.join().unwrap();
        assert!(
            request.starts_with("POST /subjects/deals%20value%2Fx/versions "),
            "{request}"
        );
        assert!(
            request.contains("authorization: Basic a2V5OnNlY3JldA==")
                || request.contains("Authorization: Basic a2V5OnNlY3JldA=="),
            "{request}"
        );
        assert!(request.contains(r#""schemaType":"JSON""#), "{request}");
    }

    #[test]
    fn refused_credentials_say_which_settings_to_check() {
        let (url, server) = serve_once(401, r#"{"error_code":401,"message":"Unauthorized"}"#);
        let registry = HttpRegistry::new(&settings(url, RegistryAuth::Bearer("t".into()))).unwrap();
        let error = registry.register("deals-value", &schema()).unwrap_err();
        assert!(request_has(&server.join().unwrap(), "Bearer t"));
        assert!(matches!(
            error,
            RegistryError::Unauthorized { status: 401, .. }
        ));
        assert!(
            error.to_string().contains("username and password"),
            "{error}"
        );
    }

    fn request_has(request: &str, text: &str) -> bool {
        request.contains(text)
    }

    #[test]
    fn a_url_that_is_not_a_confluent_api_says_so() {
        let (url, server) = serve_once(
            404,
            r#"{"title":"Could not find resource","status":404,"name":"NotFoundException"}"#,
        );
        let registry = HttpRegistry::new(&settings(url.clone(), RegistryAuth::None)).unwrap();
        let error = registry.preview("deals", &schema()).unwrap_err();
        server.join().unwrap();
        assert!(!error.is_transient());
        assert_eq!(
            error.to_string(),
            format!(
                "The schema registry at {url} has no /subjects/deals (HTTP 404). Check that [sink.schema_registry] url is the base of its Confluent Schema Registry API (Apicurio's ends in /apis/ccompat/v7)."
            )
        );
    }

    #[test]
    fn a_registry_that_does_not_answer_in_time_says_so_in_words() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Takes the connection and never answers.
        let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
        let mut settings = settings(url.clone(), RegistryAuth::None);
        settings.timeout = Duration::from_millis(300);
        let registry = HttpRegistry::new(&settings).unwrap();
        let error = registry.register("deals-value", &schema()).unwrap_err();
        drop(held.join().unwrap());
        assert!(error.is_transient());
        assert_eq!(
            error.unavailability(),
            Some((
                url.as_str(),
                "no complete answer within 0.3 s ([sink.schema_registry] timeout): the registry is overloaded or stalled, or something on the way holds the connection".to_string()
            ))
        );
        assert!(!error.to_string().contains("timeout: global"), "{error}");
    }

    #[test]
    fn a_registry_that_is_not_there_is_unreachable_and_transient() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let registry = HttpRegistry::new(&settings(url.clone(), RegistryAuth::None)).unwrap();
        let error = registry.register("deals-value", &schema()).unwrap_err();
        assert!(error.is_transient());
        assert!(
            error.to_string().starts_with(&format!(
                "The schema registry at {url} did not answer: the connection was refused (nothing listens at that address). Check"
            )),
            "{error}"
        );
    }
}
