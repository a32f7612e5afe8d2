//! Open deals per account, kept in the pipeline's state and emitted whenever a count
//! changes: a record keyed by the account with `{"account": …, "open_deals": n}`, or a
//! tombstone when the account has no open deal left, so the compacted topic holds
//! every account's current count.
//!
//! State: `deal/<documentId>` holds the group of each open deal (inserts and updates
//! that open, move or close a deal, deletes that remove it, all counted once), and
//! `open/<group>` the count per group.
//!
//! Parameters: `group_by`, the column deals are counted by (default
//! `fullDocument.account_id`); `open_status`, the `fullDocument.status` of an open deal
//! (default `open`).

use std::collections::HashMap;

use sluice_transform::{Batch, ChangeType, Error, Output, Params, Transform, state};

/// The transform.
pub struct AccountPipeline {
    group_by: String,
    open_status: String,
}

fn deal_key(id: &str) -> String {
    format!("deal/{id}")
}

fn count_key(group: &str) -> String {
    format!("open/{group}")
}

impl Transform for AccountPipeline {
    fn init(params: &Params) -> Result<Self, String> {
        Ok(AccountPipeline {
            group_by: params
                .get_or("group_by", "fullDocument.account_id")
                .to_string(),
            open_status: params.get_or("open_status", "open").to_string(),
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        let ids = batch.column("documentId")?;
        let groups = batch.column(&self.group_by)?;
        let statuses = batch.column("fullDocument.status")?;
        // Groups whose count changed, with the last row that changed each, in the
        // order they were first changed.
        let mut changed: Vec<(String, u32)> = Vec::new();
        // Where each group is in `changed`: a batch may change thousands of groups.
        let mut position: HashMap<String, usize> = HashMap::new();
        let mut touch = |group: String, row: u32| match position.get(&group) {
            Some(&at) => changed[at].1 = row,
            None => {
                position.insert(group.clone(), changed.len());
                changed.push((group, row));
            }
        };
        for row in batch.rows()? {
            let index = row.index() as usize;
            let Some(id) = ids.str(index) else {
                return Err(Error::row(row.index(), "The row has no documentId."));
            };
            let now_open = match row.change_type() {
                ChangeType::UpdatePreimage => continue,
                ChangeType::Delete => None,
                ChangeType::Insert | ChangeType::UpdatePostimage => statuses
                    .str(index)
                    .filter(|status| *status == self.open_status)
                    .map(|_| groups.str(index).unwrap_or_default().to_string()),
            };
            let key = deal_key(id);
            let was_open = state::get_str(&key);
            if was_open == now_open {
                continue;
            }
            if let Some(group) = was_open {
                state::add_i64(&count_key(&group), -1);
                touch(group, row.index());
            }
            match now_open {
                Some(group) => {
                    state::put_str(&key, &group);
                    state::add_i64(&count_key(&group), 1);
                    touch(group, row.index());
                }
                None => state::delete(key.as_bytes()),
            }
        }
        for (group, row) in changed {
            let count = state::get_i64(&count_key(&group)).unwrap_or(0);
            let value = (count != 0).then(|| {
                format!(
                    "{{\"account\":{},\"open_deals\":{count}}}",
                    json_string(&group)
                )
            });
            out.emit_bytes(
                row,
                Some(group.as_bytes()),
                value.as_deref().map(str::as_bytes),
            );
        }
        Ok(())
    }
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if (c as u32) < 0x20 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

sluice_transform::export!(AccountPipeline);
