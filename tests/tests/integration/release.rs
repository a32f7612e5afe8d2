//! The release archive `scripts/release.sh` makes holds what a user needs without the
//! checkout: unpacked in an empty directory, its `sluice` starts, builds and previews a
//! JavaScript and a Python transform with the SDKs the archive carries.

use std::path::Path;
use std::process::{Command, Output};

use sluice_tests::{deals_table, repo_root, sluice_binary};

fn succeeded(what: &str, output: Output) -> Output {
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The archive's `sluice`, run in `dir` with no SDK directory in its environment.
fn installed(sluice: &Path, dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(sluice)
        .args(args)
        .current_dir(dir)
        .env_remove("SLUICE_SDK_DIR")
        .output()
        .expect("the archive's sluice runs");
    succeeded(&format!("sluice {}", args.join(" ")), output)
}

#[test]
fn the_release_archive_builds_and_previews_transforms_on_its_own() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("dist");
    let made = Command::new(repo_root().join("scripts/release.sh"))
        .arg("--out-dir")
        .arg(&out)
        .arg("--binary")
        .arg(sluice_binary())
        .output()
        .expect("release.sh runs");
    let archive = String::from_utf8(succeeded("release.sh", made).stdout).unwrap();
    let archive = Path::new(archive.trim());
    let name = archive
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_end_matches(".tar.gz")
        .to_string();
    assert!(name.starts_with("sluice-0."), "{name}");

    // The checksum beside it, and the one of every file inside.
    succeeded(
        "sha256sum of the archive",
        Command::new("sha256sum")
            .args(["--check", &format!("{name}.tar.gz.sha256")])
            .current_dir(&out)
            .output()
            .unwrap(),
    );
    let clean = work.path().join("clean");
    std::fs::create_dir(&clean).unwrap();
    succeeded(
        "unpacking",
        Command::new("tar")
            .arg("-xzf")
            .arg(archive)
            .arg("-C")
            .arg(&clean)
            .output()
            .unwrap(),
    );
    let unpacked = clean.join(&name);
    succeeded(
        "SHA256SUMS",
        Command::new("sha256sum")
            .args(["--check", "--quiet", "SHA256SUMS"])
            .current_dir(&unpacked)
            .output()
            .unwrap(),
    );
    for file in [
        "share/man/man1/sluice.1",
        "share/bash-completion/completions/sluice",
        "share/zsh/site-functions/_sluice",
        "share/doc/sluice/README.md",
        "share/sluice/guest-sdk/c/include/sluice.h",
        "share/sluice/guest-sdk/go/go.mod",
    ] {
        assert!(unpacked.join(file).is_file(), "the archive has no {file}");
    }

    let packages: Vec<String> = std::fs::read_dir(unpacked.join("share/sluice/packages"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let version = name["sluice-".len()..].split('-').next().unwrap();
    for (what, file) in [
        ("the npm tarball", "sluice-transform-1.0.0.tgz".to_string()),
        ("the Python sdist", "transform-1.0.0.tar.gz".to_string()),
        ("the Go module", format!("sluice-go-{version}.tar.gz")),
        ("the C sources", format!("sluice-c-{version}.tar.gz")),
    ] {
        assert!(
            packages.iter().any(|p| p.ends_with(&file)),
            "no {what} in {packages:?}"
        );
    }

    // A new user's first transforms, in a directory that knows nothing of the checkout.
    let sluice = unpacked.join("bin/sluice");
    let projects = work.path().join("projects");
    std::fs::create_dir(&projects).unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "20"]);
    let mut previews = Vec::new();
    for lang in ["js", "python"] {
        let project = format!("changes-{lang}");
        installed(&sluice, &projects, &["init", "--lang", lang, &project]);
        let built = installed(
            &sluice,
            &projects,
            &["build", &project, "--out-dir", "modules"],
        );
        let module = projects.join(String::from_utf8(built.stdout).unwrap().trim());
        assert!(
            module.is_file(),
            "{lang}: no module at {}",
            module.display()
        );
        let preview = installed(
            &sluice,
            &projects,
            &[
                "preview",
                "--table",
                table.to_str().unwrap(),
                "--module",
                module.to_str().unwrap(),
                "--param",
                "key=documentId",
            ],
        );
        let records: Vec<serde_json::Value> = String::from_utf8_lossy(&preview.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(records.len(), 20, "{lang}: {records:?}");
        previews.push(records);
    }
    assert_eq!(
        previews[0], previews[1],
        "JavaScript and Python make different records"
    );
}
