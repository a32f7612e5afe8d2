//! A small structured fuzzer for the inputs a guest module or a tenant controls: the
//! arguments of host calls, pipeline and service configs, admin API bodies.
//!
//! A target is a closure over a seeded [`Gen`]; [`fuzz`] runs it for a time budget,
//! catches panics and reports the seed of the failing case, so it can be run again
//! alone. Inputs are generated from the shapes the code expects and mutated away from
//! them (values of the wrong type, keys that do not exist, sizes at and past the
//! bounds, bytes flipped in text), starting from seed inputs kept in the repository.
//!
//! `SLUICE_FUZZ_SECONDS` sets the budget of each target (default
//! [`DEFAULT_SECONDS`]); `SLUICE_FUZZ_SEED` runs one case.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

/// Seconds each target runs when `SLUICE_FUZZ_SECONDS` is not set: short enough for
/// the test command, long enough to catch regressions.
pub const DEFAULT_SECONDS: f64 = 5.0;

/// A deterministic generator (SplitMix64): one seed, one input.
#[derive(Clone, Debug)]
pub struct Gen {
    state: u64,
}

impl Gen {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Gen {
        Gen { state: seed }
    }

    /// The next 64 random bits.
    pub fn u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.u64() % n as u64) as usize
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// A size that is usually small, sometimes at `bound`, sometimes past it.
    pub fn size(&mut self, bound: usize) -> usize {
        match self.below(10) {
            0 => bound,
            1 => bound + 1 + self.below(bound + 1),
            2 => 0,
            _ => self.below(bound.min(16) + 1),
        }
    }

    /// An index that is usually within `len`, sometimes just past it or far out.
    pub fn index(&mut self, len: usize) -> usize {
        match self.below(12) {
            0 => len,
            1 => u32::MAX as usize - self.below(2),
            _ => self.below(len.max(1)),
        }
    }

    /// One of `items` (which must not be empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An `i64` with the edge values likely.
    pub fn i64(&mut self) -> i64 {
        match self.below(8) {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => -1,
            3 => 0,
            _ => self.u64() as i64 % 1_000_000,
        }
    }

    /// Text: usually one of `known`, sometimes empty, multi-byte, very long or a
    /// mutation of a known one.
    pub fn text(&mut self, known: &[&str]) -> String {
        match self.below(8) {
            0 => String::new(),
            1 => "é😀\u{0}\"\\\n".repeat(1 + self.below(4)),
            2 => "x".repeat(self.size(4096)),
            3 if !known.is_empty() => {
                let base = self.pick(known).to_string();
                self.mutate_text(&base)
            }
            _ if !known.is_empty() => self.pick(known).to_string(),
            _ => format!("{}", self.u64()),
        }
    }

    /// `bytes` with a few random edits: flips, insertions, deletions, repeats.
    pub fn mutate_bytes(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for _ in 0..1 + self.below(4) {
            let at = self.below(out.len() + 1);
            match self.below(5) {
                0 if at < out.len() => out[at] ^= 1 << self.below(8),
                1 => out.insert(at, self.u64() as u8),
                2 if at < out.len() => {
                    out.remove(at);
                }
                3 => {
                    let end = (at + self.below(16)).min(out.len());
                    let piece = out[at..end].to_vec();
                    out.splice(at..at, piece);
                }
                _ => out.insert(at, *self.pick(b"{}[]\"=,.:\n#\\0-")),
            }
        }
        out
    }

    /// `text` with a few random byte edits, read back as UTF-8 (lossily).
    pub fn mutate_text(&mut self, text: &str) -> String {
        String::from_utf8_lossy(&self.mutate_bytes(text.as_bytes())).into_owned()
    }

    /// A random TOML value of any type.
    pub fn toml_value(&mut self, keys: &[&str]) -> toml::Value {
        match self.below(7) {
            0 => toml::Value::Integer(self.i64()),
            1 => toml::Value::Float(f64::from_bits(self.u64())),
            2 => toml::Value::Boolean(self.one_in(2)),
            3 => toml::Value::Array((0..self.below(3)).map(|_| self.toml_value(keys)).collect()),
            4 => {
                let mut table = toml::Table::new();
                for _ in 0..self.below(3) {
                    table.insert(self.text(keys), toml::Value::String(self.text(&[])));
                }
                toml::Value::Table(table)
            }
            _ => toml::Value::String(self.text(&[
                "10s",
                "0",
                "latest",
                "-1",
                "1 hour",
                "${env:HOME}",
                "${file:/etc/passwd}",
            ])),
        }
    }

    /// `value` with one structural change somewhere in it: a value replaced by another
    /// of any type, a key removed, a key added (known names likely).
    pub fn mutate_toml(&mut self, value: &mut toml::Value, keys: &[&str]) {
        let toml::Value::Table(table) = value else {
            *value = self.toml_value(keys);
            return;
        };
        let names: Vec<String> = table.keys().cloned().collect();
        match self.below(4) {
            0 if !names.is_empty() => {
                table.remove(self.pick(&names).as_str());
            }
            1 => {
                let key = self.text(keys);
                let new = self.toml_value(keys);
                table.insert(key, new);
            }
            _ if !names.is_empty() => {
                let name = self.pick(&names).clone();
                let child = table.get_mut(&name).expect("a key of the table");
                if self.one_in(3) {
                    *child = self.toml_value(keys);
                } else {
                    self.mutate_toml(child, keys);
                }
            }
            _ => {}
        }
    }

    /// One of `seeds` (TOML documents), changed: in its structure one to four times
    /// (known `keys` likely), or in its bytes.
    pub fn mutated_toml_seed(&mut self, seeds: &[String], keys: &[&str]) -> String {
        let seed = self.pick(seeds).clone();
        if self.one_in(3) {
            return self.mutate_text(&seed);
        }
        let mut value: toml::Value = toml::from_str(&seed).expect("TOML seeds parse");
        for _ in 0..1 + self.below(4) {
            self.mutate_toml(&mut value, keys);
        }
        toml::to_string(&value).unwrap_or(seed)
    }

    /// `value` with one structural change somewhere in it, as [`Gen::mutate_toml`].
    pub fn mutate_json(&mut self, value: &mut serde_json::Value, keys: &[&str]) {
        use serde_json::Value;
        let random = |g: &mut Gen| match g.below(6) {
            0 => Value::Null,
            1 => Value::Bool(g.one_in(2)),
            2 => Value::from(g.i64()),
            3 => Value::Array(vec![Value::String(g.text(keys))]),
            4 => serde_json::json!({ g.text(keys): g.text(&[]) }),
            _ => Value::String(g.text(&[])),
        };
        match value {
            Value::Object(map) => {
                let names: Vec<String> = map.keys().cloned().collect();
                match self.below(4) {
                    0 if !names.is_empty() => {
                        map.remove(self.pick(&names).as_str());
                    }
                    1 => {
                        let key = self.text(keys);
                        let new = random(self);
                        map.insert(key, new);
                    }
                    _ if !names.is_empty() => {
                        let name = self.pick(&names).clone();
                        let child = map.get_mut(&name).expect("a key of the object");
                        match child {
                            Value::String(s) if self.one_in(2) => *s = self.mutate_text(s),
                            _ if self.one_in(3) => *child = random(self),
                            _ => self.mutate_json(child, keys),
                        }
                    }
                    _ => {}
                }
            }
            _ => *value = random(self),
        }
    }
}

/// What a fuzzing run did.
#[derive(Clone, Debug)]
pub struct Report {
    /// Cases run.
    pub cases: u64,
    /// How long they took.
    pub elapsed: Duration,
}

impl Report {
    /// Cases per second.
    pub fn per_second(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn budget() -> Duration {
    let seconds = std::env::var("SLUICE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(DEFAULT_SECONDS);
    Duration::from_secs_f64(seconds)
}

/// Runs `target` on generated cases for the time budget (or on the one case
/// `SLUICE_FUZZ_SEED` names); panics naming the seed of the first case that panicked.
pub fn fuzz(name: &str, mut target: impl FnMut(&mut Gen)) -> Report {
    let only: Option<u64> = std::env::var("SLUICE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let budget = budget();
    let started = Instant::now();
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let first_seed = Gen::new(clock ^ u64::from(std::process::id())).u64();
    let mut cases = 0u64;
    loop {
        let seed = only.unwrap_or_else(|| first_seed.wrapping_add(cases));
        let outcome = catch_unwind(AssertUnwindSafe(|| target(&mut Gen::new(seed))));
        cases += 1;
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "fuzz target {name} failed on seed {seed} ({message}); run it again with SLUICE_FUZZ_SEED={seed}"
            );
        }
        if only.is_some() || started.elapsed() >= budget {
            break;
        }
    }
    let report = Report {
        cases,
        elapsed: started.elapsed(),
    };
    eprintln!(
        "fuzz target {name}: {} cases in {:.1} s ({:.0}/s)",
        report.cases,
        report.elapsed.as_secs_f64(),
        report.per_second()
    );
    report
}

/// The seed inputs of a target: every file in `dir` (a folder in the repository), as
/// text, sorted by name.
pub fn corpus(dir: &Path) -> Vec<String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("the corpus {} cannot be read: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .collect();
    entries.sort();
    let seeds: Vec<String> = entries
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("a corpus file is text"))
        .collect();
    assert!(!seeds.is_empty(), "the corpus {} is empty", dir.display());
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_makes_one_input() {
        let a: Vec<u64> = (0..4).map(|_| Gen::new(7).u64()).collect();
        assert!(a.iter().all(|&x| x == a[0]));
        let mut g = Gen::new(7);
        assert_ne!(g.u64(), g.u64());
    }

    #[test]
    fn mutations_change_structure_and_stay_in_type() {
        let mut g = Gen::new(1);
        let mut changed = 0;
        for _ in 0..100 {
            let mut value: toml::Value = toml::from_str("[a]\nb = 1\nc = \"x\"").unwrap();
            let before = value.clone();
            g.mutate_toml(&mut value, &["b", "c", "d"]);
            changed += usize::from(value != before);
        }
        assert!(changed > 50, "{changed} of 100 mutations changed the value");
    }

    #[test]
    fn a_panicking_target_names_its_seed() {
        let outcome = catch_unwind(|| fuzz("always-fails", |_| panic!("boom")));
        let message = outcome.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("SLUICE_FUZZ_SEED="), "{message}");
        assert!(message.contains("boom"), "{message}");
    }
}
