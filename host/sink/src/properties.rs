//! The producer's librdkafka properties: the user's, Sluice's defaults, and secrets.

use std::collections::BTreeMap;

use crate::error::SinkError;

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
        || name.contains("secret")
        || name.contains("jaas")
        || name.contains("oauthbearer.config")
        || name.ends_with(".key")
        || name.ends_with("key.pem")
}

/// The properties librdkafka gets for the configured ones: a Java-style
/// `sasl.jaas.config` (what Spark and Kafka Connect users have) becomes `sasl.username`,
/// `sasl.password` and, for PLAIN, `sasl.mechanism`; a Spark-style `kafka.` prefix is
/// refused with the name to use.
pub fn client_properties(
    configured: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SinkError> {
    if let Some(name) = configured.keys().find(|name| name.starts_with("kafka.")) {
        return Err(SinkError::Config(format!(
            "`{name}` looks like a Spark Kafka option; librdkafka calls it `{}` (drop the `kafka.` prefix)",
            &name["kafka.".len()..]
        )));
    }
    let mut properties = configured.clone();
    let Some(jaas) = properties.remove("sasl.jaas.config") else {
        return Ok(properties);
    };
    let login = JaasLogin::parse(&jaas).map_err(jaas_error)?;
    let mechanism = properties.get("sasl.mechanism").map(String::as_str);
    match (login.module, mechanism) {
        (LoginModule::Plain, None) => {
            properties.insert("sasl.mechanism".into(), "PLAIN".into());
        }
        (LoginModule::Plain, Some("PLAIN")) => {}
        (LoginModule::Scram, Some("SCRAM-SHA-256" | "SCRAM-SHA-512")) => {}
        (module, mechanism) => {
            return Err(jaas_error(format!(
                "its {} login module does not go with sasl.mechanism `{}`; use PlainLoginModule with PLAIN, ScramLoginModule with SCRAM-SHA-256 or SCRAM-SHA-512",
                module.name(),
                mechanism.unwrap_or("(unset)")
            )));
        }
    }
    for (name, value) in [
        ("sasl.username", login.username),
        ("sasl.password", login.password),
    ] {
        if properties.contains_key(name) {
            return Err(jaas_error(format!(
                "`{name}` is set too; set either sasl.jaas.config or sasl.username and sasl.password"
            )));
        }
        properties.insert(name.into(), value);
    }
    Ok(properties)
}

fn jaas_error(detail: String) -> SinkError {
    SinkError::Config(format!("[sink.kafka] `sasl.jaas.config`: {detail}"))
}

/// The login modules whose JAAS configuration maps onto librdkafka's properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoginModule {
    Plain,
    Scram,
}

impl LoginModule {
    fn name(self) -> &'static str {
        match self {
            LoginModule::Plain => "PlainLoginModule",
            LoginModule::Scram => "ScramLoginModule",
        }
    }
}

/// A parsed `sasl.jaas.config`: `<module class> required username="..." password="...";`.
#[derive(Debug)]
struct JaasLogin {
    module: LoginModule,
    username: String,
    password: String,
}

impl JaasLogin {
    /// Parses the value; errors never quote it, since it holds a password.
    fn parse(text: &str) -> Result<JaasLogin, String> {
        let text = text.trim().trim_end_matches(';').trim();
        let (class, rest) = text
            .split_once(char::is_whitespace)
            .ok_or("expected `<login module> required username=\"...\" password=\"...\";`")?;
        // Databricks shades Kafka's classes under `kafkashaded.`; the suffix decides.
        let module = if class.ends_with(".plain.PlainLoginModule") {
            LoginModule::Plain
        } else if class.ends_with(".scram.ScramLoginModule") {
            LoginModule::Scram
        } else {
            return Err(format!(
                "login module `{class}` has no librdkafka equivalent Sluice can derive; set librdkafka's sasl.* properties instead"
            ));
        };
        let (flag, mut rest) = rest
            .trim_start()
            .split_once(char::is_whitespace)
            .unwrap_or((rest.trim(), ""));
        if !["required", "requisite", "sufficient", "optional"].contains(&flag) {
            return Err(format!(
                "expected a control flag such as `required` after the login module, not `{flag}`"
            ));
        }
        let (mut username, mut password) = (None, None);
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (key, after) = rest
                .split_once('=')
                .ok_or("expected key=\"value\" options after the control flag")?;
            let after = after
                .strip_prefix('"')
                .ok_or_else(|| format!("the value of `{}` must be in double quotes", key.trim()))?;
            let end = after
                .find('"')
                .ok_or_else(|| format!("the value of `{}` has no closing quote", key.trim()))?;
            let value = after[..end].to_string();
            match key.trim() {
                "username" => username = Some(value),
                "password" => password = Some(value),
                _ => {}
            }
            rest = &after[end + 1..];
        }
        Ok(JaasLogin {
            module,
            username: username.ok_or("it has no username=\"...\"")?,
            password: password.ok_or("it has no password=\"...\"")?,
        })
    }
}

/// Removes secret property values from a message.
pub fn redact(message: &str, properties: &BTreeMap<String, String>) -> String {
    properties
        .iter()
        .filter(|(name, secret)| is_secret_property(name) && !secret.is_empty())
        .map(|(_, secret)| secret)
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

    fn properties(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_plain_jaas_login_becomes_librdkafka_properties() {
        let translated = client_properties(&properties(&[(
            "sasl.jaas.config",
            r#"kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required username="KEY" password="se cret";"#,
        )]))
        .unwrap();
        assert_eq!(
            translated,
            properties(&[
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "KEY"),
                ("sasl.password", "se cret"),
            ])
        );
    }

    #[test]
    fn a_scram_jaas_login_needs_its_mechanism() {
        let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#;
        let err = client_properties(&properties(&[("sasl.jaas.config", jaas)])).unwrap_err();
        assert!(err.to_string().contains("ScramLoginModule"), "{err}");
        let ok = client_properties(&properties(&[
            ("sasl.jaas.config", jaas),
            ("sasl.mechanism", "SCRAM-SHA-512"),
        ]))
        .unwrap();
        assert_eq!(ok["sasl.username"], "u");
    }

    #[test]
    fn bad_jaas_logins_are_explained_without_the_password() {
        for (jaas, expected) in [
            (
                r#"com.sun.security.auth.module.Krb5LoginModule required password="hunter2";"#,
                "no librdkafka equivalent",
            ),
            (
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u";"#,
                "no password",
            ),
            (
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required password=hunter2"#,
                "double quotes",
            ),
        ] {
            let err = client_properties(&properties(&[("sasl.jaas.config", jaas)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        let both = client_properties(&properties(&[
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";"#,
            ),
            ("sasl.username", "v"),
        ]))
        .unwrap_err();
        assert!(both.to_string().contains("either"), "{both}");
    }

    #[test]
    fn spark_style_kafka_prefixes_are_named() {
        let err = client_properties(&properties(&[("kafka.bootstrap.servers", "b:9092")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`bootstrap.servers`"), "{err}");
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
