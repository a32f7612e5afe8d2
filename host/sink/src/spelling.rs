//! The Spark and Java spellings of Kafka client settings, as users paste them from a
//! Databricks notebook or a Kafka Connect worker, translated to librdkafka's: Spark's
//! `kafka.` prefix, JAAS logins (PLAIN, SCRAM, OAUTHBEARER with client credentials),
//! PEM trust and key stores, and the empty endpoint identification algorithm. Java-only
//! forms librdkafka cannot read (JKS stores) are refused with the command that converts
//! them. Messages never quote a JAAS string: it holds a password.

use std::collections::BTreeMap;

use crate::error::SinkError;

/// librdkafka properties for configured ones, and a note per translation made.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Translated {
    /// What librdkafka gets.
    pub(crate) properties: BTreeMap<String, String>,
    /// One sentence per Spark or Java spelling translated.
    pub(crate) notes: Vec<String>,
}

/// Translates the Spark and Java spellings among `configured`.
pub(crate) fn translate(configured: &BTreeMap<String, String>) -> Result<Translated, SinkError> {
    let mut translated = Translated::default();
    for (name, value) in configured {
        let plain = name.strip_prefix("kafka.").unwrap_or(name);
        if plain != name {
            if configured.contains_key(plain) {
                return Err(config_error(format!(
                    "both `{name}` (Spark's spelling) and `{plain}` are set; keep one"
                )));
            }
            translated
                .notes
                .push(format!("`{name}` is Spark's spelling of `{plain}`."));
        }
        translated
            .properties
            .insert(plain.to_string(), value.clone());
    }
    // librdkafka's own alias, so that what follows looks at one name.
    if let Some(mechanism) = translated.properties.remove("sasl.mechanisms")
        && translated
            .properties
            .insert("sasl.mechanism".into(), mechanism)
            .is_some()
    {
        return Err(config_error(
            "both `sasl.mechanisms` and `sasl.mechanism` are set; keep one".into(),
        ));
    }
    jaas(&mut translated)?;
    login_callback(&mut translated)?;
    java_login_settings(&mut translated);
    trust_store(&mut translated)?;
    key_store(&mut translated)?;
    rename(&mut translated, "ssl.truststore.certificates", "ssl.ca.pem")?;
    rename(
        &mut translated,
        "ssl.keystore.certificate.chain",
        "ssl.certificate.pem",
    )?;
    rename(&mut translated, "ssl.keystore.key", "ssl.key.pem")?;
    let properties = &mut translated.properties;
    if properties
        .get("ssl.endpoint.identification.algorithm")
        .is_some_and(|algorithm| algorithm.trim().is_empty())
    {
        properties.insert(
            "ssl.endpoint.identification.algorithm".into(),
            "none".into(),
        );
        translated.notes.push(
            "An empty `ssl.endpoint.identification.algorithm` (Java's way to skip the host name check) is librdkafka's `none`.".into(),
        );
    }
    Ok(translated)
}

fn config_error(detail: String) -> SinkError {
    SinkError::Config(format!("Kafka settings: {detail}"))
}

fn jaas_error(detail: String) -> SinkError {
    config_error(format!("`sasl.jaas.config`: {detail}"))
}

/// Moves Java's `from` to librdkafka's `to`, unless both are set.
fn rename(translated: &mut Translated, from: &str, to: &str) -> Result<(), SinkError> {
    if let Some(value) = translated.properties.remove(from) {
        set_translated(translated, &format!("Java's `{from}`"), to, value)?;
        translated
            .notes
            .push(format!("Java's `{from}` is librdkafka's `{to}`."));
    }
    Ok(())
}

/// Sets librdkafka's `to` from `from` (described), refusing to overwrite a value the
/// config sets itself.
fn set_translated(
    translated: &mut Translated,
    from: &str,
    to: &str,
    value: String,
) -> Result<(), SinkError> {
    if translated.properties.contains_key(to) {
        return Err(config_error(format!(
            "both {from} and `{to}` are set; keep one: either the Java setting or librdkafka's"
        )));
    }
    translated.properties.insert(to.into(), value);
    Ok(())
}

/// Sets librdkafka's `name` from the JAAS login, refusing to overwrite it.
fn set_from_jaas(translated: &mut Translated, name: &str, value: String) -> Result<(), SinkError> {
    set_translated(translated, "`sasl.jaas.config`", name, value)
}

/// A `sasl.jaas.config` becomes librdkafka's `sasl.*` properties.
fn jaas(translated: &mut Translated) -> Result<(), SinkError> {
    let Some(text) = translated.properties.remove("sasl.jaas.config") else {
        return Ok(());
    };
    let mut login = JaasLogin::parse(&text).map_err(jaas_error)?;
    let mechanism = translated
        .properties
        .get("sasl.mechanism")
        .map(String::as_str);
    let implied = match (login.module, mechanism) {
        (LoginModule::Plain, None) => Some("PLAIN"),
        (LoginModule::OAuthBearer, None) => Some("OAUTHBEARER"),
        (LoginModule::Plain, Some("PLAIN"))
        | (LoginModule::Scram, Some("SCRAM-SHA-256" | "SCRAM-SHA-512"))
        | (LoginModule::OAuthBearer, Some("OAUTHBEARER")) => None,
        (module, mechanism) => {
            return Err(jaas_error(format!(
                "its {} login module does not go with sasl.mechanism `{}`; use PlainLoginModule with PLAIN, ScramLoginModule with SCRAM-SHA-256 or SCRAM-SHA-512, OAuthBearerLoginModule with OAUTHBEARER",
                module.name(),
                mechanism.unwrap_or("(unset)")
            )));
        }
    };
    if let Some(mechanism) = implied {
        translated
            .properties
            .insert("sasl.mechanism".into(), mechanism.into());
    }
    match login.module {
        LoginModule::Plain | LoginModule::Scram => {
            let username = login.take("username")?;
            let password = login.take("password")?;
            set_from_jaas(translated, "sasl.username", username)?;
            set_from_jaas(translated, "sasl.password", password)?;
        }
        LoginModule::OAuthBearer => {
            if !translated
                .properties
                .contains_key("sasl.oauthbearer.token.endpoint.url")
            {
                return Err(jaas_error(
                    "an OAuthBearerLoginModule login needs `sasl.oauthbearer.token.endpoint.url`, the identity provider's token endpoint".into(),
                ));
            }
            set_from_jaas(translated, "sasl.oauthbearer.method", "oidc".into())?;
            let client_id = login.take("clientId")?;
            let client_secret = login.take("clientSecret")?;
            set_from_jaas(translated, "sasl.oauthbearer.client.id", client_id)?;
            set_from_jaas(translated, "sasl.oauthbearer.client.secret", client_secret)?;
            if let Some(scope) = login.options.remove("scope") {
                set_from_jaas(translated, "sasl.oauthbearer.scope", scope)?;
            }
            // Confluent Cloud's `extension_logicalCluster="lkc-..."` and the like.
            let extensions: Vec<String> = login
                .options
                .iter()
                .filter_map(|(key, value)| {
                    key.strip_prefix("extension_")
                        .map(|key| format!("{key}={value}"))
                })
                .collect();
            if !extensions.is_empty() {
                set_from_jaas(
                    translated,
                    "sasl.oauthbearer.extensions",
                    extensions.join(","),
                )?;
            }
        }
    }
    translated.notes.push(format!(
        "`sasl.jaas.config` ({}) became librdkafka's sasl.* properties.",
        login.module.name()
    ));
    Ok(())
}

/// Java's OAuth login callback handler is what librdkafka's `oidc` method does itself.
fn login_callback(translated: &mut Translated) -> Result<(), SinkError> {
    let Some(class) = translated
        .properties
        .remove("sasl.login.callback.handler.class")
    else {
        return Ok(());
    };
    if !class.ends_with(".OAuthBearerLoginCallbackHandler") {
        return Err(config_error(format!(
            "`sasl.login.callback.handler.class` `{class}` is a Java class librdkafka cannot run; only Kafka's OAuthBearerLoginCallbackHandler has an equivalent (sasl.oauthbearer.method = \"oidc\")"
        )));
    }
    translated
        .properties
        .entry("sasl.oauthbearer.method".into())
        .or_insert_with(|| "oidc".into());
    translated.notes.push(
        "`sasl.login.callback.handler.class` (OAuthBearerLoginCallbackHandler) is librdkafka's built-in `oidc` token fetching.".into(),
    );
    Ok(())
}

/// Java's login tuning (`sasl.login.connect.timeout.ms`, `sasl.login.retry.backoff.ms`,
/// `sasl.login.refresh.*`, ...) has no librdkafka equivalent, which would refuse it as an
/// unknown property: it is dropped.
fn java_login_settings(translated: &mut Translated) {
    let dropped: Vec<String> = translated
        .properties
        .keys()
        .filter(|name| name.starts_with("sasl.login."))
        .cloned()
        .collect();
    for name in &dropped {
        translated.properties.remove(name);
    }
    if !dropped.is_empty() {
        translated.notes.push(format!(
            "Java's login tuning has no librdkafka equivalent and is left out: {}.",
            dropped
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// Java's trust store: a PEM one is librdkafka's `ssl.ca.location`; JKS and PKCS#12 ones
/// must be converted to PEM first.
fn trust_store(translated: &mut Translated) -> Result<(), SinkError> {
    let properties = &mut translated.properties;
    let kind = properties
        .remove("ssl.truststore.type")
        .unwrap_or_else(|| "JKS".into());
    let Some(location) = properties.remove("ssl.truststore.location") else {
        return Ok(());
    };
    properties.remove("ssl.truststore.password");
    match kind.to_ascii_uppercase().as_str() {
        "PEM" => {
            set_translated(
                translated,
                "`ssl.truststore.location`",
                "ssl.ca.location",
                location,
            )?;
            translated.notes.push(
                "Java's PEM `ssl.truststore.location` is librdkafka's `ssl.ca.location`.".into(),
            );
            Ok(())
        }
        "PKCS12" => Err(config_error(format!(
            "librdkafka cannot read the PKCS#12 trust store `{location}`; convert it with `openssl pkcs12 -in {location} -nokeys -out ca.pem` and set ssl.ca.location = \"ca.pem\""
        ))),
        _ => Err(config_error(format!(
            "librdkafka cannot read the {kind} trust store `{location}` (Java's default type is JKS); export its CA with `keytool -exportcert -rfc -keystore {location} -alias <alias> -file ca.pem` and set ssl.ca.location = \"ca.pem\""
        ))),
    }
}

/// Java's key store: librdkafka reads PKCS#12 ones under the same name, and a PEM one
/// (key and certificate chain in one file) as `ssl.certificate.location` and
/// `ssl.key.location`; JKS ones must be converted.
fn key_store(translated: &mut Translated) -> Result<(), SinkError> {
    let properties = &mut translated.properties;
    let Some(kind) = properties.remove("ssl.keystore.type") else {
        return Ok(());
    };
    let Some(location) = properties.get("ssl.keystore.location").cloned() else {
        return Ok(());
    };
    match kind.to_ascii_uppercase().as_str() {
        "PKCS12" => Ok(()),
        "PEM" => {
            properties.remove("ssl.keystore.location");
            let from = "Java's PEM `ssl.keystore.location`";
            set_translated(
                translated,
                from,
                "ssl.certificate.location",
                location.clone(),
            )?;
            set_translated(translated, from, "ssl.key.location", location)?;
            translated.notes.push(
                "Java's PEM `ssl.keystore.location` is librdkafka's `ssl.certificate.location` and `ssl.key.location`.".into(),
            );
            Ok(())
        }
        _ => Err(config_error(format!(
            "librdkafka cannot read the {kind} key store `{location}`; convert it with `keytool -importkeystore -srckeystore {location} -destkeystore client.p12 -deststoretype PKCS12` and set ssl.keystore.location = \"client.p12\""
        ))),
    }
}

/// A token of a JAAS configuration.
#[derive(Debug, PartialEq, Eq)]
enum JaasToken {
    Word(String),
    Quoted(String),
    Equals,
    End,
}

/// Splits a JAAS configuration into tokens; errors name no value.
fn jaas_tokens(text: &str) -> Result<Vec<JaasToken>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => tokens.push(JaasToken::Equals),
            ';' => tokens.push(JaasToken::End),
            '"' | '\'' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err("a quoted value has no closing quote".into()),
                        Some('\\') => value.extend(chars.next()),
                        Some(end) if end == c => break,
                        Some(other) => value.push(other),
                    }
                }
                tokens.push(JaasToken::Quoted(value));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, '=' | ';' | '"' | '\'') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                tokens.push(JaasToken::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// The login modules whose JAAS configuration maps onto librdkafka's properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoginModule {
    Plain,
    Scram,
    OAuthBearer,
}

impl LoginModule {
    fn name(self) -> &'static str {
        match self {
            LoginModule::Plain => "PlainLoginModule",
            LoginModule::Scram => "ScramLoginModule",
            LoginModule::OAuthBearer => "OAuthBearerLoginModule",
        }
    }
}

/// A parsed `sasl.jaas.config`: `<module class> <flag> key="value" ...;`.
#[derive(Debug)]
struct JaasLogin {
    module: LoginModule,
    options: BTreeMap<String, String>,
}

impl JaasLogin {
    /// Parses the value as Java's JAAS parser does (words or single- or double-quoted
    /// values with backslash escapes, spaces around `=`, the control flag in any case);
    /// errors never quote it, since it holds a password.
    fn parse(text: &str) -> Result<JaasLogin, String> {
        let mut tokens = jaas_tokens(text)?.into_iter();
        let Some(JaasToken::Word(class)) = tokens.next() else {
            return Err("expected `<login module> required key=\"value\" ...;`".into());
        };
        // Databricks shades Kafka's classes under `kafkashaded.`; the suffix decides.
        let module = if class.ends_with(".plain.PlainLoginModule") {
            LoginModule::Plain
        } else if class.ends_with(".scram.ScramLoginModule") {
            LoginModule::Scram
        } else if class.ends_with(".oauthbearer.OAuthBearerLoginModule") {
            LoginModule::OAuthBearer
        } else {
            return Err(format!(
                "login module `{class}` has no librdkafka equivalent Sluice can derive; set librdkafka's sasl.* properties instead"
            ));
        };
        match tokens.next() {
            Some(JaasToken::Word(flag))
                if ["required", "requisite", "sufficient", "optional"]
                    .iter()
                    .any(|known| flag.eq_ignore_ascii_case(known)) => {}
            _ => {
                return Err(
                    "expected a control flag such as `required` after the login module".into(),
                );
            }
        }
        let mut options = BTreeMap::new();
        loop {
            let key = match tokens.next() {
                None | Some(JaasToken::End) => break,
                Some(JaasToken::Word(key)) => key,
                Some(_) => {
                    return Err("expected key=\"value\" options after the control flag".into());
                }
            };
            if tokens.next() != Some(JaasToken::Equals) {
                return Err(format!("expected `=` after `{key}`"));
            }
            match tokens.next() {
                Some(JaasToken::Word(value) | JaasToken::Quoted(value)) => {
                    options.insert(key, value);
                }
                _ => return Err(format!("`{key}` has no value")),
            }
        }
        Ok(JaasLogin { module, options })
    }

    /// Takes a required option out.
    fn take(&mut self, key: &str) -> Result<String, SinkError> {
        self.options
            .remove(key)
            .ok_or_else(|| jaas_error(format!("it has no {key}=\"...\"")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::properties;

    fn translated(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        translate(&properties(pairs)).unwrap().properties
    }

    fn refusal(pairs: &[(&str, &str)]) -> String {
        translate(&properties(pairs)).unwrap_err().to_string()
    }

    #[test]
    fn a_plain_jaas_login_becomes_librdkafka_properties() {
        assert_eq!(
            translated(&[(
                "sasl.jaas.config",
                r#"kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required username="KEY" password="se cret";"#,
            )]),
            properties(&[
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "KEY"),
                ("sasl.password", "se cret"),
            ])
        );
    }

    #[test]
    fn jaas_values_are_read_as_java_reads_them() {
        assert_eq!(
            translated(&[(
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule REQUIRED username = 'KEY' password="se\"cr\\et" ;"#,
            )]),
            properties(&[
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "KEY"),
                ("sasl.password", r#"se"cr\et"#),
            ])
        );
        assert_eq!(
            translated(&[(
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=KEY password=SECRET;",
            )])["sasl.password"],
            "SECRET"
        );
    }

    #[test]
    fn a_scram_jaas_login_needs_its_mechanism() {
        let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#;
        let err = refusal(&[("sasl.jaas.config", jaas)]);
        assert!(err.contains("ScramLoginModule"), "{err}");
        let ok = translated(&[
            ("sasl.jaas.config", jaas),
            ("sasl.mechanism", "SCRAM-SHA-512"),
        ]);
        assert_eq!(ok["sasl.username"], "u");
    }

    #[test]
    fn an_oauth_jaas_login_becomes_librdkafka_oidc() {
        // Confluent Cloud's OAuth settings as a Databricks notebook has them.
        let settings = translated(&[
            ("kafka.bootstrap.servers", "pkc-1.confluent.cloud:9092"),
            ("kafka.security.protocol", "SASL_SSL"),
            ("kafka.sasl.mechanism", "OAUTHBEARER"),
            (
                "kafka.sasl.oauthbearer.token.endpoint.url",
                "https://idp.example/oauth2/token",
            ),
            (
                "kafka.sasl.login.callback.handler.class",
                "kafkashaded.org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
            ),
            (
                "kafka.sasl.jaas.config",
                r#"kafkashaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="sluice" clientSecret="s3cret" scope="kafka" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";"#,
            ),
        ]);
        assert_eq!(
            settings,
            properties(&[
                ("bootstrap.servers", "pkc-1.confluent.cloud:9092"),
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "OAUTHBEARER"),
                (
                    "sasl.oauthbearer.token.endpoint.url",
                    "https://idp.example/oauth2/token"
                ),
                ("sasl.oauthbearer.method", "oidc"),
                ("sasl.oauthbearer.client.id", "sluice"),
                ("sasl.oauthbearer.client.secret", "s3cret"),
                ("sasl.oauthbearer.scope", "kafka"),
                (
                    "sasl.oauthbearer.extensions",
                    "identityPoolId=pool-2,logicalCluster=lkc-1"
                ),
            ])
        );
        let err = refusal(&[(
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="a" clientSecret="s3cret";"#,
        )]);
        assert!(err.contains("sasl.oauthbearer.token.endpoint.url"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
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
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2"#,
                "no closing quote",
            ),
        ] {
            let err = refusal(&[("sasl.jaas.config", jaas)]);
            assert!(err.contains(expected), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        let both = refusal(&[
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";"#,
            ),
            ("sasl.username", "v"),
        ]);
        assert!(both.contains("either"), "{both}");
    }

    #[test]
    fn spark_prefixes_are_dropped_with_a_note() {
        let result = translate(&properties(&[
            ("kafka.bootstrap.servers", "b:9092"),
            ("kafka.ssl.endpoint.identification.algorithm", ""),
        ]))
        .unwrap();
        assert_eq!(
            result.properties,
            properties(&[
                ("bootstrap.servers", "b:9092"),
                ("ssl.endpoint.identification.algorithm", "none"),
            ])
        );
        assert!(
            result.notes[0].contains("`kafka.bootstrap.servers` is Spark's spelling"),
            "{:?}",
            result.notes
        );
        let twice = refusal(&[
            ("kafka.bootstrap.servers", "a:9092"),
            ("bootstrap.servers", "b:9092"),
        ]);
        assert!(twice.contains("keep one"), "{twice}");
    }

    #[test]
    fn java_stores_become_pem_locations_or_are_refused_with_the_conversion() {
        assert_eq!(
            translated(&[
                ("ssl.truststore.location", "/certs/ca.pem"),
                ("ssl.truststore.type", "PEM"),
                ("ssl.keystore.location", "/certs/client.pem"),
                ("ssl.keystore.type", "PEM"),
            ]),
            properties(&[
                ("ssl.ca.location", "/certs/ca.pem"),
                ("ssl.certificate.location", "/certs/client.pem"),
                ("ssl.key.location", "/certs/client.pem"),
            ])
        );
        assert_eq!(
            translated(&[
                ("ssl.keystore.location", "/certs/client.p12"),
                ("ssl.keystore.type", "PKCS12"),
                ("ssl.keystore.password", "pw"),
            ]),
            properties(&[
                ("ssl.keystore.location", "/certs/client.p12"),
                ("ssl.keystore.password", "pw"),
            ])
        );
        let jks = refusal(&[
            ("ssl.truststore.location", "/certs/truststore.jks"),
            ("ssl.truststore.password", "changeit"),
        ]);
        assert!(jks.contains("keytool -exportcert"), "{jks}");
        assert!(!jks.contains("changeit"), "{jks}");
        let keystore = refusal(&[
            ("ssl.keystore.location", "/certs/ks.jks"),
            ("ssl.keystore.type", "JKS"),
        ]);
        assert!(keystore.contains("keytool -importkeystore"), "{keystore}");
    }

    #[test]
    fn librdkafkas_plural_mechanism_goes_with_a_jaas_login() {
        let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#;
        let settings = translated(&[
            ("sasl.jaas.config", jaas),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
        ]);
        assert_eq!(settings["sasl.mechanism"], "SCRAM-SHA-512");
        assert!(!settings.contains_key("sasl.mechanisms"));
        let both = refusal(&[("sasl.mechanisms", "PLAIN"), ("sasl.mechanism", "PLAIN")]);
        assert!(both.contains("keep one"), "{both}");
    }

    #[test]
    fn translations_never_overwrite_what_the_config_sets() {
        let err = refusal(&[
            ("ssl.keystore.location", "/certs/client.pem"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.key.location", "/certs/other.key"),
        ]);
        assert!(
            err.contains("`ssl.key.location` are set; keep one"),
            "{err}"
        );
        let err = refusal(&[
            ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----"),
            ("ssl.ca.pem", "-----BEGIN CERTIFICATE-----"),
        ]);
        assert!(err.contains("keep one"), "{err}");
    }

    #[test]
    fn java_oauth_settings_without_jaas_still_mean_oidc() {
        let result = translate(&properties(&[
            (
                "sasl.login.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            ),
            ("sasl.login.connect.timeout.ms", "15000"),
            ("sasl.login.retry.backoff.ms", "100"),
            ("sasl.oauthbearer.client.id", "sluice"),
        ]))
        .unwrap();
        assert_eq!(
            result.properties,
            properties(&[
                ("sasl.oauthbearer.method", "oidc"),
                ("sasl.oauthbearer.client.id", "sluice"),
            ])
        );
        assert!(
            result
                .notes
                .iter()
                .any(|note| note.contains("`sasl.login.connect.timeout.ms`")),
            "{:?}",
            result.notes
        );
    }

    #[test]
    fn only_kafkas_oauth_callback_handler_is_understood() {
        let err = refusal(&[("sasl.login.callback.handler.class", "com.example.MyHandler")]);
        assert!(err.contains("com.example.MyHandler"), "{err}");
    }
}
