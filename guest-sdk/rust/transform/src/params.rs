//! The pipeline's parameters for a transform.

use std::collections::BTreeMap;

/// The pipeline's `[transform.params]`, as strings.
#[derive(Clone, Debug, Default)]
pub struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    /// Parameters from name/value pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Params {
        Params {
            values: pairs.into_iter().collect(),
        }
    }

    /// A parameter's value, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A parameter's value, or `default` when unset.
    pub fn get_or<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.get(name).unwrap_or(default)
    }
}
