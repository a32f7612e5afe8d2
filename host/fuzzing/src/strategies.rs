//! Strategies for the inputs a guest or a tenant controls, in the shapes the code
//! expects and mutated away from them: sizes at and past their bounds, indexes out of
//! range, edge integers, odd text, values of other types, removed and unknown keys,
//! edited bytes. Each shrinks toward the plain case: the first of its alternatives,
//! fewer edits, shorter lists, smaller numbers, the first seed input.

use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};

/// A length bounded by `bound`: usually small, sometimes 0, at `bound` or past it.
pub fn size(bound: usize) -> impl Strategy<Value = usize> + Clone {
    prop_oneof![
        8 => 0..=bound.min(16),
        1 => Just(bound),
        1 => bound + 1..=2 * bound + 1,
    ]
}

/// A list of `element`s as long as [`size`] draws; it shrinks by dropping elements.
pub fn list<S>(element: S, bound: usize) -> impl Strategy<Value = Vec<S::Value>> + Clone
where
    S: Strategy + Clone,
{
    prop_oneof![
        8 => vec(element.clone(), 0..=bound.min(16)),
        1 => vec(element.clone(), bound..=bound),
        1 => vec(element, bound + 1..=2 * bound + 1),
    ]
}

/// An index into a list of `len`: usually within it, sometimes `len` itself or far out.
pub fn index(len: usize) -> impl Strategy<Value = u32> + Clone {
    let len = u32::try_from(len).expect("a list the fuzzer indexes has fewer than 2^32 items");
    prop_oneof![
        10 => 0..len.max(1),
        1 => Just(len),
        1 => u32::MAX - 1..=u32::MAX,
    ]
}

/// An `i64`, the edge values likely.
pub fn integer() -> impl Strategy<Value = i64> + Clone {
    prop_oneof![
        4 => -999_999i64..1_000_000,
        1 => Just(-1),
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
    ]
}

/// Text: usually one of `known` (a number when there is none), sometimes empty,
/// multi-byte, very long, or a known one with its bytes edited.
pub fn text(known: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    let plain = if known.is_empty() {
        any::<u64>().prop_map(|n| n.to_string()).boxed()
    } else {
        select(known).prop_map(str::to_string).boxed()
    };
    prop_oneof![
        4 => plain.clone(),
        1 => Just(String::new()),
        1 => (1..=4usize).prop_map(|n| "é😀\u{0}\"\\\n".repeat(n)),
        1 => size(4096).prop_map(|n| "x".repeat(n)),
        1 => (plain, byte_edits()).prop_map(|(text, edits)| edits.apply_to_text(&text)),
    ]
}

/// One to four edits of a byte string, each a place and what happens there.
#[derive(Clone, Debug)]
pub struct ByteEdits(Vec<ByteEdit>);

#[derive(Clone, Debug)]
enum ByteEdit {
    Flip {
        at: Index,
        bit: u8,
    },
    Insert {
        at: Index,
        byte: u8,
    },
    Remove {
        at: Index,
    },
    Repeat {
        at: Index,
        len: usize,
    },
    /// A byte that means something to a parser: brackets, quotes, separators.
    Syntax {
        at: Index,
        byte: u8,
    },
}

impl ByteEdits {
    /// `bytes` with the edits made, in order.
    pub fn apply(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for edit in &self.0 {
            match *edit {
                ByteEdit::Flip { at, bit } if !out.is_empty() => {
                    let at = at.index(out.len());
                    out[at] ^= 1 << bit;
                }
                ByteEdit::Insert { at, byte } | ByteEdit::Syntax { at, byte } => {
                    out.insert(at.index(out.len() + 1), byte);
                }
                ByteEdit::Remove { at } if !out.is_empty() => {
                    out.remove(at.index(out.len()));
                }
                ByteEdit::Repeat { at, len } => {
                    let at = at.index(out.len() + 1);
                    let piece = out[at..(at + len).min(out.len())].to_vec();
                    out.splice(at..at, piece);
                }
                ByteEdit::Flip { .. } | ByteEdit::Remove { .. } => {}
            }
        }
        out
    }

    /// `text` with the edits made to its bytes, read back as UTF-8 (lossily).
    pub fn apply_to_text(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.apply(text.as_bytes())).into_owned()
    }
}

/// Edits for [`ByteEdits::apply`]: bits flipped, bytes inserted, removed or repeated.
pub fn byte_edits() -> impl Strategy<Value = ByteEdits> + Clone {
    let at = any::<Index>;
    let edit = prop_oneof![
        (at(), 0..8u8).prop_map(|(at, bit)| ByteEdit::Flip { at, bit }),
        (at(), any::<u8>()).prop_map(|(at, byte)| ByteEdit::Insert { at, byte }),
        at().prop_map(|at| ByteEdit::Remove { at }),
        (at(), 0..16usize).prop_map(|(at, len)| ByteEdit::Repeat { at, len }),
        (at(), select(b"{}[]\"=,.:\n#\\0-".as_slice()))
            .prop_map(|(at, byte)| ByteEdit::Syntax { at, byte }),
    ];
    vec(edit, 1..=4).prop_map(ByteEdits)
}

/// `bytes` with [`byte_edits`] made.
pub fn mutated_bytes(bytes: &[u8]) -> impl Strategy<Value = Vec<u8>> + Clone {
    let bytes = bytes.to_vec();
    byte_edits().prop_map(move |edits| edits.apply(&bytes))
}

/// One of `seeds` (TOML documents, which must parse), changed: in its structure one to
/// four times (a key removed, a key added with `keys` likely, a value replaced by one
/// of any type, a string's bytes edited), or in its bytes.
pub fn mutated_toml(
    seeds: &[String],
    keys: &'static [&'static str],
) -> impl Strategy<Value = String> + Clone {
    mutated_document::<toml::Value>(seeds, keys)
}

/// One of `seeds` (JSON documents, which must parse), changed as [`mutated_toml`]
/// changes TOML.
pub fn mutated_json(
    seeds: &[String],
    keys: &'static [&'static str],
) -> impl Strategy<Value = String> + Clone {
    mutated_document::<serde_json::Value>(seeds, keys)
}

fn mutated_document<V: Document>(
    seeds: &[String],
    keys: &'static [&'static str],
) -> impl Strategy<Value = String> + Clone {
    assert!(!seeds.is_empty(), "a mutated document needs a seed");
    let seeds: Arc<Vec<(String, V)>> = Arc::new(
        seeds
            .iter()
            .map(|text| (text.clone(), V::parse(text)))
            .collect(),
    );
    let parsed = Arc::clone(&seeds);
    let edit = (vec(any::<Index>(), 0..3), change::<V>(keys))
        .prop_map(|(path, change)| TreeEdit { path, change });
    prop_oneof![
        2 => (any::<Index>(), vec(edit, 1..=4)).prop_map(move |(seed, edits)| {
            let (text, value) = &parsed[seed.index(parsed.len())];
            let mut value = value.clone();
            for edit in &edits {
                edit.apply(&mut value);
            }
            value.print().unwrap_or_else(|| text.clone())
        }),
        1 => (any::<Index>(), byte_edits()).prop_map(move |(seed, edits)| {
            edits.apply_to_text(&seeds[seed.index(seeds.len())].0)
        }),
    ]
}

/// A TOML or JSON document, seen as a tree of maps for [`TreeEdit`].
trait Document: Clone + std::fmt::Debug + Sized + 'static {
    fn parse(text: &str) -> Self;
    /// The text of the document; `None` when it cannot be written (a TOML document
    /// whose root is no table).
    fn print(&self) -> Option<String>;
    /// A value of any type, `keys` likely among its keys.
    fn any(keys: &'static [&'static str]) -> BoxedStrategy<Self>;
    /// The keys of a map, none for other values.
    fn keys(&self) -> Vec<String>;
    fn is_map(&self) -> bool;
    fn child_mut(&mut self, key: &str) -> Option<&mut Self>;
    fn remove(&mut self, key: &str);
    fn insert(&mut self, key: String, value: Self);
    fn text_mut(&mut self) -> Option<&mut String>;
}

/// A structural change of a document: down `path` (through maps only), one change.
#[derive(Clone, Debug)]
struct TreeEdit<V> {
    path: Vec<Index>,
    change: Change<V>,
}

#[derive(Clone, Debug)]
enum Change<V> {
    Insert(String, V),
    Remove(Index),
    Replace(Index, V),
    EditText(Index, ByteEdits),
}

fn change<V: Document>(keys: &'static [&'static str]) -> impl Strategy<Value = Change<V>> {
    prop_oneof![
        (text(keys), V::any(keys)).prop_map(|(key, value)| Change::Insert(key, value)),
        any::<Index>().prop_map(Change::Remove),
        (any::<Index>(), V::any(keys)).prop_map(|(at, value)| Change::Replace(at, value)),
        (any::<Index>(), byte_edits()).prop_map(|(at, edits)| Change::EditText(at, edits)),
    ]
}

impl<V: Document> TreeEdit<V> {
    fn apply(&self, root: &mut V) {
        let mut node = root;
        for step in &self.path {
            let keys = node.keys();
            let Some(key) = (!keys.is_empty()).then(|| &keys[step.index(keys.len())]) else {
                break;
            };
            if !node.child_mut(key).is_some_and(|child| child.is_map()) {
                break;
            }
            node = node.child_mut(key).expect("a key of the map");
        }
        let keys = node.keys();
        let key = |at: &Index| (!keys.is_empty()).then(|| keys[at.index(keys.len())].clone());
        match &self.change {
            Change::Insert(key, value) => node.insert(key.clone(), value.clone()),
            Change::Remove(at) => {
                if let Some(key) = key(at) {
                    node.remove(&key);
                }
            }
            Change::Replace(at, value) => {
                if let Some(child) = key(at).and_then(|key| node.child_mut(&key)) {
                    *child = value.clone();
                }
            }
            Change::EditText(at, edits) => {
                let child = key(at).and_then(|key| node.child_mut(&key));
                if let Some(text) = child.and_then(V::text_mut) {
                    *text = edits.apply_to_text(text);
                }
            }
        }
    }
}

/// Strings that mean something to a config: durations, offsets, interpolations.
const TOML_STRINGS: &[&str] = &[
    "10s",
    "0",
    "latest",
    "-1",
    "1 hour",
    "${env:HOME}",
    "${file:/etc/passwd}",
];

impl Document for toml::Value {
    fn parse(text: &str) -> Self {
        toml::from_str(text).unwrap_or_else(|e| panic!("a TOML seed does not parse: {e}"))
    }

    fn print(&self) -> Option<String> {
        toml::to_string(self).ok()
    }

    fn any(keys: &'static [&'static str]) -> BoxedStrategy<Self> {
        let leaf = prop_oneof![
            text(TOML_STRINGS).prop_map(toml::Value::String),
            integer().prop_map(toml::Value::Integer),
            any::<bool>().prop_map(toml::Value::Boolean),
            any::<u64>().prop_map(|bits| toml::Value::Float(f64::from_bits(bits))),
            vec((text(keys), text(&[])), 0..3).prop_map(|entries| toml::Value::Table(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, toml::Value::String(value)))
                    .collect()
            )),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            vec(inner, 0..3).prop_map(toml::Value::Array)
        })
        .boxed()
    }

    fn keys(&self) -> Vec<String> {
        self.as_table()
            .map(|table| table.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn is_map(&self) -> bool {
        self.is_table()
    }

    fn child_mut(&mut self, key: &str) -> Option<&mut Self> {
        self.as_table_mut()?.get_mut(key)
    }

    fn remove(&mut self, key: &str) {
        if let Some(table) = self.as_table_mut() {
            table.remove(key);
        }
    }

    fn insert(&mut self, key: String, value: Self) {
        if let Some(table) = self.as_table_mut() {
            table.insert(key, value);
        }
    }

    fn text_mut(&mut self) -> Option<&mut String> {
        match self {
            toml::Value::String(text) => Some(text),
            _ => None,
        }
    }
}

impl Document for serde_json::Value {
    fn parse(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("a JSON seed does not parse: {e}"))
    }

    fn print(&self) -> Option<String> {
        Some(self.to_string())
    }

    fn any(keys: &'static [&'static str]) -> BoxedStrategy<Self> {
        use serde_json::Value;
        prop_oneof![
            text(&[]).prop_map(Value::String),
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            integer().prop_map(Value::from),
            text(keys).prop_map(|key| Value::Array(vec![Value::String(key)])),
            (text(keys), text(&[])).prop_map(|(key, value)| serde_json::json!({ key: value })),
        ]
        .boxed()
    }

    fn keys(&self) -> Vec<String> {
        self.as_object()
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn is_map(&self) -> bool {
        self.is_object()
    }

    fn child_mut(&mut self, key: &str) -> Option<&mut Self> {
        self.as_object_mut()?.get_mut(key)
    }

    fn remove(&mut self, key: &str) {
        if let Some(map) = self.as_object_mut() {
            map.remove(key);
        }
    }

    fn insert(&mut self, key: String, value: Self) {
        if let Some(map) = self.as_object_mut() {
            map.insert(key, value);
        }
    }

    fn text_mut(&mut self) -> Option<&mut String> {
        match self {
            serde_json::Value::String(text) => Some(text),
            _ => None,
        }
    }
}
