//! `[cluster]` of `sluice serve`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::topic::SharedTopic;

/// `[cluster]`: run as one node of a cluster of `sluice serve` processes that share the
/// pipelines through Kafka. Without it a node runs alone with its state on local disk.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The cluster's name: nodes with the same name and Kafka form one cluster. It names
    /// the consumer group (`sluice-cluster-<name>`) and the topics
    /// (`sluice-cluster-<name>-state`, `-status`, `-slots`).
    pub name: String,
    /// This node's name in logs and statuses (default: the API's listen address).
    #[serde(default)]
    pub node: Option<String>,
    /// Where the other nodes reach this node's admin API, to relay the logs of the
    /// pipelines it runs (default: `http://` and the API's listen address).
    #[serde(default)]
    pub advertised_url: Option<String>,
    /// Slots the pipelines are spread over (default 64): more than there will ever be
    /// nodes. Fixed once the cluster exists.
    #[serde(default = "default_slots")]
    pub slots: u32,
    /// How long a node may be silent before its slots move to the others (default
    /// `6s`, the least Kafka brokers allow unless `group.min.session.timeout.ms` is
    /// lowered): the longest a lost node's pipelines wait, plus their start-up.
    #[serde(default = "default_session_timeout", with = "humantime_serde")]
    pub session_timeout: Duration,
    /// Replication factor of the cluster's topics (default: the brokers'
    /// `default.replication.factor`).
    #[serde(default)]
    pub replication_factor: Option<i32>,
    /// librdkafka properties of the cluster's own clients: `bootstrap.servers` and
    /// credentials. Values may be `${env:NAME}` or `${file:PATH}`.
    pub kafka: BTreeMap<String, String>,
}

fn default_slots() -> u32 {
    64
}

fn default_session_timeout() -> Duration {
    Duration::from_secs(6)
}

/// Most slots a cluster may have.
const MAX_SLOTS: u32 = 10_000;

impl ClusterConfig {
    /// The consumer group the nodes share.
    pub fn group(&self) -> String {
        format!("sluice-cluster-{}", self.name)
    }

    /// The compacted topic every node reads as the shared state.
    pub fn state_topic(&self) -> String {
        self.shared_topic(SharedTopic::State)
    }

    /// One of the compacted topics every node reads (`sluice-cluster-<name>-state`,
    /// `-status`).
    pub fn shared_topic(&self, shared: SharedTopic) -> String {
        format!("sluice-cluster-{}-{}", self.name, shared.name())
    }

    /// The topic whose partitions are the slots.
    pub fn slots_topic(&self) -> String {
        format!("sluice-cluster-{}-slots", self.name)
    }

    /// The brokers, for messages.
    pub fn bootstrap(&self) -> String {
        self.kafka
            .get("bootstrap.servers")
            .cloned()
            .unwrap_or_default()
    }

    /// Refuses a config the cluster cannot run with, saying what to change.
    pub fn validate(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 100
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(format!(
                "[cluster] name `{}` must be 1 to 100 letters, digits, '_' or '-' (it names Kafka topics)",
                self.name
            ));
        }
        if !(1..=MAX_SLOTS).contains(&self.slots) {
            return Err(format!(
                "[cluster] slots = {} must be from 1 to {MAX_SLOTS}",
                self.slots
            ));
        }
        if self.bootstrap().is_empty() {
            return Err("[cluster.kafka] needs \"bootstrap.servers\": the Kafka cluster that holds the cluster's state".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ClusterConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn names_and_defaults() {
        let config = parse(
            r#"
            name = "prod"
            [kafka]
            "bootstrap.servers" = "b:9092"
            "#,
        );
        assert_eq!(config.slots, 64);
        assert_eq!(config.session_timeout, Duration::from_secs(6));
        assert_eq!(config.group(), "sluice-cluster-prod");
        assert_eq!(config.state_topic(), "sluice-cluster-prod-state");
        assert_eq!(config.slots_topic(), "sluice-cluster-prod-slots");
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn a_bad_name_slot_count_or_missing_brokers_is_refused() {
        let mut config = parse(
            r#"
            name = "a b"
            slots = 0
            [kafka]
            "#,
        );
        assert!(config.validate().unwrap_err().contains("name `a b`"));
        config.name = "ok".into();
        assert!(config.validate().unwrap_err().contains("slots = 0"));
        config.slots = 8;
        assert!(config.validate().unwrap_err().contains("bootstrap.servers"));
    }
}
