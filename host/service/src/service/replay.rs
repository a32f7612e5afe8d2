//! Replays: a range of a pipeline's table sent again through a chosen module into a
//! chosen topic. A replay is a pipeline of its own, made from the pipeline's config
//! with `[source] starting_version` and `ending_version` set and its own topic, so it
//! has what every pipeline has: its own transactional id and stored position (exactly
//! once, resumed after a crash), progress, tenant caps, placement in a cluster. It
//! finishes once it has delivered its last version; the live pipeline is untouched.

use std::sync::Arc;
use std::time::SystemTime;

use serde::Deserialize;

use super::{CreatePipeline, PipelineStatus, Service};
use crate::auth::TenantScope;
use crate::error::ServiceError;

/// A request to replay versions of a pipeline's table, named by number or by commit
/// time (one of each end).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    /// The first version to send.
    #[serde(default)]
    pub from_version: Option<u64>,
    /// Or: from the first version committed at or after this time (RFC 3339), as
    /// Spark's `startingTimestamp`.
    #[serde(default, with = "humantime_serde")]
    pub from_timestamp: Option<SystemTime>,
    /// The last version to send (inclusive).
    #[serde(default)]
    pub to_version: Option<u64>,
    /// Or: through the last version committed at or before this time, which has
    /// passed, as Spark's `endingTimestamp`.
    #[serde(default, with = "humantime_serde")]
    pub to_timestamp: Option<SystemTime>,
    /// Send the table as of `from_version` (every row an insert) before the changes
    /// after it, as `[source] snapshot` does.
    #[serde(default)]
    pub snapshot: bool,
    /// The topic to send to (the tenant's topic rules apply); never the pipeline's own.
    pub topic: String,
    /// Digest of an uploaded module of the tenant (default: the pipeline's).
    #[serde(default)]
    pub module: Option<String>,
    /// Where the replay's failed rows go, when the pipeline sends them to a
    /// dead-letter topic (required then: the live pipeline's letters stay its own).
    #[serde(default)]
    pub dead_letter_topic: Option<String>,
    /// The replay pipeline's name (default `<pipeline>-replay-<from>-<to>`).
    #[serde(default)]
    pub name: Option<String>,
}

impl Service {
    /// Starts a replay of `request`'s versions of pipeline `name`'s table: a new
    /// pipeline, which finishes after the last version.
    pub async fn replay(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
        request: Replay,
    ) -> Result<PipelineStatus, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let definition = entry.definition();
        let module = request
            .module
            .clone()
            .unwrap_or_else(|| definition.module.clone());
        let (from, to) = ends(&request)?;
        let range = match (from, to) {
            (End::Version(from), End::Version(to)) => (from, to),
            _ => {
                let config = self.pipeline_config(
                    &definition.tenant,
                    name,
                    &definition.config,
                    &module,
                    definition.state_generation,
                )?;
                let found = sluice_pipeline::versions_at_times(&config, from.time(), to.time())
                    .await
                    .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
                let version = |end: End, found: Option<u64>| match end {
                    End::Version(version) => version,
                    End::Time(_) => found.expect("a version is found for each time given"),
                };
                (version(from, found.0), version(to, found.1))
            }
        };
        if range.1 < range.0 {
            return Err(ServiceError::BadRequest(format!(
                "the replay would end at version {} before it starts at version {}; a replay sends its first version through its last",
                range.1, range.0
            )));
        }
        let config = replay_config(&definition.config, name, &request, range)?;
        let replay_name = request
            .name
            .clone()
            .unwrap_or_else(|| format!("{name}-replay-{}-{}", range.0, range.1));
        let status = self
            .create_pipeline(tenant, &replay_name, CreatePipeline { config, module })
            .await?;
        tracing::info!(
            tenant = &**tenant,
            pipeline = name,
            replay = replay_name,
            from_version = range.0,
            to_version = range.1,
            topic = request.topic,
            "A replay started: a pipeline of its own sends the versions again and finishes after the last."
        );
        Ok(status)
    }
}

/// One end of a replay: a version, or a commit time to find the version of.
#[derive(Clone, Copy, Debug)]
enum End {
    Version(u64),
    Time(SystemTime),
}

impl End {
    fn time(self) -> Option<SystemTime> {
        match self {
            End::Version(_) => None,
            End::Time(time) => Some(time),
        }
    }
}

/// The request's two ends, one named per end; a time to end at must have passed.
fn ends(request: &Replay) -> Result<(End, End), ServiceError> {
    let bad = |message: &str| Err(ServiceError::BadRequest(message.to_string()));
    let from = match (request.from_version, request.from_timestamp) {
        (Some(version), None) => End::Version(version),
        (None, Some(time)) => End::Time(time),
        _ => return bad("a replay starts at from_version or at from_timestamp: give one of them"),
    };
    let to = match (request.to_version, request.to_timestamp) {
        (Some(version), None) => End::Version(version),
        (None, Some(time)) if time > SystemTime::now() => {
            return bad(
                "to_timestamp is in the future, where versions may still be committed before it; end at a time that has passed, or at a to_version",
            );
        }
        (None, Some(time)) => End::Time(time),
        _ => return bad("a replay ends at to_version or at to_timestamp: give one of them"),
    };
    Ok((from, to))
}

/// The config of a replay of versions `range` of the pipeline `name` whose config is
/// `config`.
fn replay_config(
    config: &str,
    name: &str,
    request: &Replay,
    range: (u64, u64),
) -> Result<String, ServiceError> {
    let bad = |message: String| ServiceError::BadRequest(message);
    let mut table: toml::Table = config
        .parse()
        .map_err(|e| bad(format!("the config of pipeline {name} does not read: {e}")))?;
    let section = |table: &mut toml::Table, key: &str| -> Result<toml::Table, ServiceError> {
        match table.remove(key) {
            Some(toml::Value::Table(section)) => Ok(section),
            None => Ok(toml::Table::new()),
            Some(_) => Err(bad(format!(
                "the config of pipeline {name} has a [{key}] that is not a section"
            ))),
        }
    };
    let mut source = section(&mut table, "source")?;
    for key in ["starting_version", "starting_timestamp", "snapshot"] {
        source.remove(key);
    }
    source.insert(
        "starting_version".into(),
        toml::Value::Integer(version(range.0)?),
    );
    source.insert(
        "ending_version".into(),
        toml::Value::Integer(version(range.1)?),
    );
    if request.snapshot {
        source.insert("snapshot".into(), toml::Value::Boolean(true));
    }
    table.insert("source".into(), toml::Value::Table(source));

    let mut sink = section(&mut table, "sink")?;
    if sink.get("topic").and_then(toml::Value::as_str) == Some(request.topic.as_str()) {
        return Err(bad(format!(
            "topic {} is pipeline {name}'s own; a replay goes to a topic of its own",
            request.topic
        )));
    }
    sink.insert("topic".into(), toml::Value::String(request.topic.clone()));
    table.insert("sink".into(), toml::Value::Table(sink));

    let mut transform = section(&mut table, "transform")?;
    let letters = transform
        .get("dead_letter_topic")
        .and_then(toml::Value::as_str)
        .map(str::to_string);
    match (letters, &request.dead_letter_topic) {
        (Some(live), None) => {
            return Err(bad(format!(
                "pipeline {name} sends failed rows to dead-letter topic {live}; give the replay a dead_letter_topic of its own"
            )));
        }
        (Some(_), Some(own)) => {
            transform.insert("dead_letter_topic".into(), toml::Value::String(own.clone()));
        }
        (None, Some(_)) => {
            return Err(bad(format!(
                "pipeline {name} keeps no dead letters; a replay of it takes no dead_letter_topic"
            )));
        }
        (None, None) => {}
    }
    table.insert("transform".into(), toml::Value::Table(transform));
    Ok(table.to_string())
}

fn version(version: u64) -> Result<i64, ServiceError> {
    i64::try_from(version)
        .map_err(|_| ServiceError::BadRequest(format!("version {version} is not a Delta version")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Replay {
        Replay {
            from_version: Some(3),
            to_version: Some(7),
            topic: "acme.replayed".into(),
            ..Replay::default()
        }
    }

    #[test]
    fn a_replay_reads_its_range_into_its_own_topic() {
        let live = "[source]\ntable = \"deals\"\nstarting_version = \"latest\"\nbatch_rows = 250\n[sink]\ntopic = \"acme.gold\"\n";
        let replayed: toml::Table = replay_config(live, "gold", &request(), (3, 7))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(replayed["source"]["starting_version"].as_integer(), Some(3));
        assert_eq!(replayed["source"]["ending_version"].as_integer(), Some(7));
        assert_eq!(replayed["source"]["batch_rows"].as_integer(), Some(250));
        assert_eq!(replayed["sink"]["topic"].as_str(), Some("acme.replayed"));
    }

    #[test]
    fn a_replay_into_the_live_topic_or_dead_letters_is_refused() {
        let live = "[source]\ntable = \"deals\"\n[sink]\ntopic = \"acme.replayed\"\n";
        let refused = replay_config(live, "gold", &request(), (3, 7)).unwrap_err();
        assert!(
            refused.to_string().contains("is pipeline gold's own"),
            "{refused}"
        );

        let lettered = "[source]\ntable = \"deals\"\n[transform]\non_error = \"dead-letter\"\ndead_letter_topic = \"acme.letters\"\n[sink]\ntopic = \"acme.gold\"\n";
        let refused = replay_config(lettered, "gold", &request(), (3, 7)).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("a dead_letter_topic of its own"),
            "{refused}"
        );
        let own = Replay {
            dead_letter_topic: Some("acme.replay-letters".into()),
            ..request()
        };
        let replayed: toml::Table = replay_config(lettered, "gold", &own, (3, 7))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            replayed["transform"]["dead_letter_topic"].as_str(),
            Some("acme.replay-letters")
        );
    }

    #[test]
    fn each_end_is_a_version_or_a_time_that_has_passed() {
        let both = Replay {
            from_timestamp: Some(SystemTime::UNIX_EPOCH),
            ..request()
        };
        assert!(ends(&both).is_err(), "from_version and from_timestamp");
        let neither = Replay {
            to_version: None,
            ..request()
        };
        let error = ends(&neither).unwrap_err().to_string();
        assert!(error.contains("to_version or at to_timestamp"), "{error}");
        let future = Replay {
            to_version: None,
            to_timestamp: Some(SystemTime::now() + std::time::Duration::from_secs(3600)),
            ..request()
        };
        let error = ends(&future).unwrap_err().to_string();
        assert!(error.contains("in the future"), "{error}");
        let by_time = Replay {
            from_version: None,
            from_timestamp: Some(SystemTime::UNIX_EPOCH),
            ..request()
        };
        let (from, to) = ends(&by_time).unwrap();
        assert_eq!(from.time(), Some(SystemTime::UNIX_EPOCH));
        assert!(matches!(to, End::Version(7)));
        let parsed: Replay = serde_json::from_str(
            r#"{"from_timestamp": "2024-01-15T10:30:00Z", "to_version": 4, "topic": "t"}"#,
        )
        .unwrap();
        assert!(parsed.from_timestamp.is_some() && parsed.from_version.is_none());
    }
}
