//! How the binary reports the error that stops it: the error, then each cause whose
//! words it did not already say (most of Sluice's errors quote their cause's sentence,
//! which anyhow's report would print a second time under "Caused by").

/// The report of `error`, as `sluice` prints it to stderr.
pub fn explained(error: &anyhow::Error) -> String {
    let mut said = error.to_string();
    let mut report = format!("Error: {error}");
    let mut first = true;
    for cause in error.chain().skip(1).map(|cause| cause.to_string()) {
        if said.contains(&cause) {
            continue;
        }
        if first {
            report.push_str("\n\nCaused by:");
            first = false;
        }
        report.push_str("\n    ");
        report.push_str(&cause);
        said.push_str(&cause);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED: &str = "the registry at http://r refused the connection";

    #[test]
    fn a_cause_the_error_already_quotes_is_not_repeated() {
        let error = anyhow::anyhow!(REFUSED).context(format!("Pipeline p stopped: {REFUSED}"));
        assert_eq!(
            explained(&error),
            format!("Error: Pipeline p stopped: {REFUSED}")
        );
    }

    #[test]
    fn a_cause_the_error_does_not_say_is_kept() {
        let error = anyhow::anyhow!(REFUSED).context("cannot check the pipeline");
        assert_eq!(
            explained(&error),
            format!("Error: cannot check the pipeline\n\nCaused by:\n    {REFUSED}")
        );
    }
}
