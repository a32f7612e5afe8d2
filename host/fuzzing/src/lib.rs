//! Structured fuzzing, on proptest, of the inputs a guest module or a tenant controls:
//! the arguments of host calls, pipeline and service configs, admin API bodies.
//!
//! A target is a proptest [`Strategy`] and a property over its values; [`fuzz`] runs
//! the property on generated cases for a time budget. A failing case is shrunk to a
//! minimal one, which is reported with the seed of the case, so it can be run again
//! alone. [`strategies`] holds what the targets share: inputs in the shapes the code
//! expects, mutated away from them, starting from seed inputs kept in the repository
//! ([`corpus`]).
//!
//! `SLUICE_FUZZ_SECONDS` sets the budget of each target (default
//! [`DEFAULT_SECONDS`]); `SLUICE_FUZZ_SEED` runs the one case of that seed.

pub mod strategies;

use std::cell::RefCell;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::time::{Duration, Instant};

/// The proptest the targets build their strategies with, so they need no dependency of
/// their own that could drift from this one.
pub use proptest;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};

/// Seconds each target runs when `SLUICE_FUZZ_SECONDS` is not set: short enough for
/// the test command, long enough to catch regressions.
pub const DEFAULT_SECONDS: f64 = 5.0;

/// How long shrinking a failure may take: past it, the smallest failing input found so
/// far is reported, so a slow target cannot hold the test command for long.
const SHRINK_MILLISECONDS: u32 = 60_000;

/// How many runs shrinking a failure may take (proptest's default would allow four
/// for the one case each runner runs here).
const SHRINK_RUNS: u32 = 100_000;

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

/// Runs `test` on values of `strategy` for the time budget (or on the one case
/// `SLUICE_FUZZ_SEED` names). A case fails when `test` panics; the first failure is
/// shrunk, and this panics naming the reason, the minimal input and the case's seed.
pub fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl FnMut(S::Value)) -> Report {
    let report = match run(name, Settings::from_env(), &strategy, test) {
        Ok(report) => report,
        Err(Failure {
            seed,
            reason,
            minimal,
        }) => panic!(
            "fuzz target {name} failed on seed {seed}: {reason}\nminimal input: {minimal:?}\nrun it again with SLUICE_FUZZ_SEED={seed}"
        ),
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

/// How long to fuzz, and whether to run one seed's case only.
#[derive(Clone, Copy, Debug)]
struct Settings {
    budget: Duration,
    seed: Option<u64>,
}

impl Settings {
    fn from_env() -> Settings {
        let var = |name| std::env::var(name).ok();
        Settings::parse(
            var("SLUICE_FUZZ_SECONDS").as_deref(),
            var("SLUICE_FUZZ_SEED").as_deref(),
        )
    }

    /// The settings the two variables give; a value that does not parse is an error
    /// rather than ignored, since a mistyped seed would otherwise run a whole budget.
    fn parse(seconds: Option<&str>, seed: Option<&str>) -> Settings {
        let seconds = seconds.map_or(DEFAULT_SECONDS, |text| {
            text.parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .unwrap_or_else(|| panic!("SLUICE_FUZZ_SECONDS={text} is no number of seconds"))
        });
        let seed = seed.map(|text| {
            text.parse::<u64>()
                .unwrap_or_else(|_| panic!("SLUICE_FUZZ_SEED={text} is no seed (a u64)"))
        });
        Settings {
            budget: Duration::from_secs_f64(seconds),
            seed,
        }
    }
}

/// A failing case, shrunk.
#[derive(Debug)]
struct Failure<T> {
    /// The seed of the case: run alone, it fails again and shrinks to the same input.
    seed: u64,
    /// What the property said (its panic message).
    reason: String,
    /// The smallest input found that still fails.
    minimal: T,
}

/// Runs cases of consecutive seeds until the budget is spent, or the one case of
/// `settings.seed`; stops at the first failure, shrunk.
fn run<S: Strategy>(
    name: &str,
    settings: Settings,
    strategy: &S,
    test: impl FnMut(S::Value),
) -> Result<Report, Failure<S::Value>> {
    // proptest's runner takes a `Fn`; a target may count what it saw.
    let test = RefCell::new(test);
    // A fresh start each run, so repeated runs try new cases; the OS seeds it.
    let first = settings
        .seed
        .unwrap_or_else(|| RandomState::new().hash_one(name));
    let started = Instant::now();
    let mut cases = 0u64;
    loop {
        let seed = first.wrapping_add(cases);
        run_case(name, seed, strategy, &test)?;
        cases += 1;
        if settings.seed.is_some() || started.elapsed() >= settings.budget {
            break;
        }
    }
    Ok(Report {
        cases,
        elapsed: started.elapsed(),
    })
}

/// One case, generated from `seed` alone: a runner of one case with its own random
/// generator, so the seed is all it takes to run the case again.
fn run_case<S: Strategy>(
    name: &str,
    seed: u64,
    strategy: &S,
    test: &RefCell<impl FnMut(S::Value)>,
) -> Result<(), Failure<S::Value>> {
    let config = Config {
        cases: 1,
        failure_persistence: None,
        max_shrink_time: SHRINK_MILLISECONDS,
        max_shrink_iters: SHRINK_RUNS,
        ..Config::default()
    };
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &key);
    let mut runner = TestRunner::new_with_rng(config, rng);
    match runner.run(strategy, |value| {
        (test.borrow_mut())(value);
        Ok(())
    }) {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, minimal)) => Err(Failure {
            seed,
            reason: reason.message().to_string(),
            minimal,
        }),
        // Only rejections abort a run, and the strategies here reject nothing.
        Err(TestError::Abort(reason)) => panic!("fuzz target {name} gave up: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use std::panic::catch_unwind;

    use proptest::collection::vec;
    use proptest::prelude::any;

    use super::*;

    /// Fails when a vector holds a byte of 200 or more and has more than three bytes.
    fn planted(bytes: Vec<u8>) {
        assert!(
            bytes.len() <= 3 || bytes.iter().all(|&b| b < 200),
            "{} bytes, one of them 200 or more",
            bytes.len()
        );
    }

    #[test]
    fn a_failure_is_shrunk_and_its_seed_runs_it_again() {
        let strategy = vec(any::<u8>(), 0..64);
        let settings = Settings::parse(Some("30"), None);
        let failure = run("planted", settings, &strategy, planted).unwrap_err();
        let mut minimal = failure.minimal.clone();
        minimal.sort();
        assert_eq!(minimal, [0, 0, 0, 200], "{failure:?}");
        assert!(failure.reason.contains("4 bytes"), "{failure:?}");

        let seed = failure.seed.to_string();
        let again = Settings::parse(None, Some(&seed));
        let repeated = run("planted", again, &strategy, planted).unwrap_err();
        assert_eq!(repeated.seed, failure.seed);
        assert_eq!(repeated.minimal, failure.minimal);
    }

    #[test]
    fn a_seed_runs_one_case() {
        let settings = Settings::parse(Some("30"), Some("7"));
        let report = run("passes", settings, &any::<u8>(), |_| ()).unwrap();
        assert_eq!(report.cases, 1);
    }

    #[test]
    fn a_panicking_target_names_its_seed_and_input() {
        let outcome = catch_unwind(|| fuzz("always-fails", any::<bool>(), |_| panic!("boom")));
        let message = outcome.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("SLUICE_FUZZ_SEED="), "{message}");
        assert!(message.contains("boom"), "{message}");
        assert!(message.contains("minimal input: false"), "{message}");
    }
}
