//! What the installed `sluice` gives a shell: completion scripts that bash loads and
//! completes with, and man pages for the command and each subcommand.

use std::process::Command;

use sluice_tests::sluice_binary;

/// What bash offers for the words typed so far (the last one being completed), with
/// the script `sluice completions bash` prints sourced.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let script = Command::new(sluice_binary())
        .args(["completions", "bash"])
        .output()
        .expect("sluice runs");
    assert!(script.status.success(), "{script:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    let line = words.join(" ");
    // Quoted, so the empty word being completed is a word too.
    let words: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let words = words.join(" ");
    let completion = format!(
        "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
         COMP_LINE=\"{line}\"; COMP_POINT=${{#COMP_LINE}}; \
         _sluice sluice \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &completion])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_their_actions() {
    assert_eq!(bash_completes(&["sluice", "pip"]), ["pipeline"]);
    let actions = bash_completes(&["sluice", "pipeline", ""]);
    for action in ["create", "deploy", "pause", "resume", "delete"] {
        assert!(actions.iter().any(|a| a == action), "{actions:?}");
    }
    assert!(
        !bash_completes(&["sluice", ""]).contains(&"compile-worker".to_string()),
        "the hidden compile worker is offered"
    );
    for shell in ["zsh", "fish"] {
        let out = Command::new(sluice_binary())
            .args(["completions", shell])
            .output()
            .expect("sluice runs");
        assert!(out.status.success() && out.stdout.len() > 1000, "{out:?}");
    }
}

#[test]
fn man_pages_are_written_for_the_command_and_each_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    let out = Command::new(sluice_binary())
        .args(["manpages", "--out-dir"])
        .arg(&out_dir)
        .output()
        .expect("sluice runs");
    assert!(out.status.success(), "{out:?}");
    let page = |name: &str| {
        std::fs::read_to_string(out_dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let main = page("sluice.1");
    assert!(
        main.starts_with(".ie") || main.contains(".TH sluice"),
        "{main}"
    );
    for subcommand in [
        "run",
        "preview",
        "serve",
        "pipeline",
        "build",
        "completions",
    ] {
        assert!(
            main.contains(subcommand),
            "sluice.1 does not name {subcommand}"
        );
    }
    let run = page("sluice-run.1");
    assert!(run.contains("stop\\-at\\-latest"), "{run}");
    assert!(page("sluice-pipeline-create.1").contains("create"));
}
