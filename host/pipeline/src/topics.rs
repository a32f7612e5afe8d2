//! Which topics a pipeline's records may name: its own, those `[sink] allowed_topics`
//! lists, and under `sluice serve` only topics within the tenant's `topic_prefix`. A
//! record naming another topic fails its row under the pipeline's error policy and is
//! never sent: a broker that creates topics on first use would otherwise create it, in
//! a space that may belong to another tenant.

use std::collections::BTreeMap;

use sluice_engine::{Framed, OutputRecord};

use crate::config::SinkSection;

/// The topics a pipeline's records may name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRule {
    /// The pipeline's own topic, where records that name none go.
    own: String,
    /// `[sink] allowed_topics`: names, and name starts ending in `*`; `None`: any.
    allowed: Option<Vec<String>>,
    /// The tenant's `topic_prefix`.
    prefix: Option<String>,
}

impl TopicRule {
    /// The rule of a pipeline's `[sink]` section.
    pub fn of(sink: &SinkSection) -> TopicRule {
        TopicRule {
            own: sink.topic.clone(),
            allowed: sink.allowed_topics.clone(),
            prefix: sink.topic_prefix.clone(),
        }
    }

    /// Whether some topic is refused: without a prefix or a list every topic may be
    /// named, and records need no look.
    pub fn restricts(&self) -> bool {
        self.allowed.is_some() || self.prefix.is_some()
    }

    /// Why a record may not name `topic`, in a sentence that names the rule; `None`
    /// when it may.
    pub fn refusal(&self, topic: &str) -> Option<String> {
        if let Some(prefix) = &self.prefix
            && !topic.starts_with(prefix.as_str())
        {
            return Some(format!(
                "a record names topic `{topic}`, outside the tenant's topic_prefix `{prefix}`"
            ));
        }
        if let Some(allowed) = &self.allowed
            && topic != self.own
            && !allowed.iter().any(|entry| allows(entry, topic))
        {
            return Some(format!(
                "a record names topic `{topic}`, which is neither the pipeline's topic `{}` nor in [sink] allowed_topics",
                self.own
            ));
        }
        None
    }

    /// Takes out of `records` every record of a row that has a record naming a refused
    /// topic, so a row is sent whole or not at all, and moves `framed`'s ranges over
    /// the records that stay. Returns those rows, in order, each with why (its first
    /// refusal).
    pub(crate) fn refuse(
        &self,
        records: &mut Vec<OutputRecord>,
        framed: &mut [Framed],
    ) -> Vec<(u32, String)> {
        if !self.restricts() {
            return Vec::new();
        }
        let mut refused: BTreeMap<u32, String> = BTreeMap::new();
        for record in records.iter() {
            if let Some(topic) = &record.topic
                && !refused.contains_key(&record.source_row)
                && let Some(why) = self.refusal(topic)
            {
                refused.insert(
                    record.source_row,
                    format!("{why}; none of the row's records were sent"),
                );
            }
        }
        if refused.is_empty() {
            return Vec::new();
        }
        // For each index, how many records before it stay: a range's new bounds.
        let mut kept_before = Vec::with_capacity(records.len() + 1);
        let mut kept = 0;
        for record in records.iter() {
            kept_before.push(kept);
            kept += usize::from(!refused.contains_key(&record.source_row));
        }
        kept_before.push(kept);
        let moved = |index: usize| kept_before[index.min(records.len())];
        for range in framed.iter_mut() {
            range.records = moved(range.records.start)..moved(range.records.end);
        }
        records.retain(|record| !refused.contains_key(&record.source_row));
        refused.into_iter().collect()
    }
}

/// Whether an `allowed_topics` entry allows `topic`: the same name, or for an entry
/// ending in `*` a name starting with what comes before it.
fn allows(entry: &str, topic: &str) -> bool {
    match entry.strip_suffix('*') {
        Some(start) => topic.starts_with(start),
        None => entry == topic,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_encoding::{SchemaKind, WriterSchema};

    use super::*;

    fn rule(allowed: Option<&[&str]>, prefix: Option<&str>) -> TopicRule {
        TopicRule {
            own: "evil.out".into(),
            allowed: allowed.map(|a| a.iter().map(|s| s.to_string()).collect()),
            prefix: prefix.map(str::to_string),
        }
    }

    fn record(row: u32, topic: Option<&str>) -> OutputRecord {
        OutputRecord {
            source_row: row,
            topic: topic.map(str::to_string),
            value: Some(format!("{row}").into_bytes()),
            ..OutputRecord::default()
        }
    }

    #[test]
    fn the_prefix_and_the_list_both_apply() {
        let open = rule(None, None);
        assert!(!open.restricts());
        assert_eq!(open.refusal("acme.anything"), None);

        let prefixed = rule(None, Some("evil."));
        assert_eq!(prefixed.refusal("evil.orders"), None);
        let why = prefixed.refusal("acme.from-evil-1").unwrap();
        assert!(
            why.contains("`acme.from-evil-1`") && why.contains("topic_prefix `evil.`"),
            "{why}"
        );

        let listed = rule(Some(&["evil.audit", "evil.by-country.*"]), Some("evil."));
        assert_eq!(listed.refusal("evil.out"), None, "the pipeline's own topic");
        assert_eq!(listed.refusal("evil.audit"), None);
        assert_eq!(listed.refusal("evil.by-country.fr"), None);
        let why = listed.refusal("evil.other").unwrap();
        assert!(
            why.contains("`evil.other`") && why.contains("allowed_topics"),
            "{why}"
        );
        assert!(
            listed
                .refusal("acme.by-country.fr")
                .unwrap()
                .contains("topic_prefix"),
            "the prefix holds whatever the list says"
        );
    }

    /// A row with one record on a refused topic loses all its records, and the framed
    /// ranges still point at the records they framed.
    #[test]
    fn refused_rows_are_taken_out_whole_and_framing_follows() {
        let mut records = vec![
            record(0, None),
            record(1, Some("evil.side")),
            record(1, Some("acme.stolen")),
            record(2, Some("evil.side")),
            record(3, Some("acme.stolen")),
            record(4, None),
        ];
        let schema = Arc::new(WriterSchema {
            kind: SchemaKind::Avro,
            text: "\"string\"".into(),
            name: String::new(),
            references: Vec::new(),
        });
        let range = |records| Framed {
            records,
            key: None,
            value: Some(schema.clone()),
        };
        let mut framed = vec![range(0..3), range(3..5), range(5..6)];
        let refused = rule(None, Some("evil.")).refuse(&mut records, &mut framed);

        assert_eq!(
            refused.iter().map(|(row, _)| *row).collect::<Vec<_>>(),
            [1, 3]
        );
        assert!(refused[0].1.contains("`acme.stolen`"), "{}", refused[0].1);
        let rows: Vec<u32> = records.iter().map(|r| r.source_row).collect();
        assert_eq!(rows, [0, 2, 4]);
        let ranges: Vec<_> = framed.iter().map(|f| f.records.clone()).collect();
        assert_eq!(ranges, [0..1, 1..2, 2..3]);
    }

    #[test]
    fn an_open_rule_keeps_every_record() {
        let mut records = vec![record(0, Some("acme.anything")), record(1, None)];
        let mut framed = Vec::new();
        assert!(
            rule(None, None)
                .refuse(&mut records, &mut framed)
                .is_empty()
        );
        assert_eq!(records.len(), 2);
    }
}
