//! `sluice init`: writes a new transform project in a chosen language, ready for
//! `sluice build`.

use std::path::{Path, PathBuf};

use crate::Language;

/// Why a project could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The directory exists and is not empty.
    #[error("{0} already exists and is not empty; choose a new directory.")]
    NotEmpty(PathBuf),
    /// The name cannot name a module.
    #[error(
        "`{0}` cannot name a transform: use lowercase letters, digits, `-` and `_`, starting with a letter."
    )]
    BadName(String),
    /// A file could not be written.
    #[error("Cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// The files of a new project: path within it, and template.
fn templates(language: Language) -> &'static [(&'static str, &'static str)] {
    match language {
        Language::Rust => &[
            ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
            ("src/lib.rs", include_str!("../templates/rust/lib.rs")),
            (".gitignore", "/target\n"),
        ],
        Language::JavaScript => &[
            ("package.json", include_str!("../templates/js/package.json")),
            ("src/index.js", include_str!("../templates/js/index.js")),
            (".gitignore", "/node_modules\n/target\n"),
        ],
        Language::TypeScript => &[
            ("package.json", include_str!("../templates/ts/package.json")),
            (
                "tsconfig.json",
                include_str!("../templates/ts/tsconfig.json"),
            ),
            ("src/index.ts", include_str!("../templates/ts/index.ts")),
            (".gitignore", "/node_modules\n/target\n"),
        ],
        Language::Python => &[
            ("app.py", include_str!("../templates/python/app.py")),
            (".gitignore", "/target\n__pycache__/\n"),
        ],
        Language::C => &[
            ("transform.c", include_str!("../templates/c/transform.c")),
            (".gitignore", "/target\n"),
        ],
        Language::Go => &[
            ("go.mod", include_str!("../templates/go/go.mod")),
            ("transform.go", include_str!("../templates/go/transform.go")),
            (".gitignore", "/target\n"),
        ],
    }
}

/// Writes a new `language` project into `dir` (created; must not hold files), named
/// after the directory, with the SDK at `sdk_dir`. Returns the files written.
pub fn scaffold(
    language: Language,
    dir: &Path,
    sdk_dir: &Path,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    // `sluice init --lang c .` names the project after the current directory.
    let name = std::path::absolute(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // Lowercase, as npm wants package names.
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        return Err(ScaffoldError::BadName(name));
    }
    if dir
        .read_dir()
        .is_ok_and(|mut entries| entries.next().is_some())
    {
        return Err(ScaffoldError::NotEmpty(dir.to_path_buf()));
    }
    let sdk = std::fs::canonicalize(sdk_dir)
        .or_else(|_| std::path::absolute(sdk_dir))
        .unwrap_or_else(|_| sdk_dir.to_path_buf());
    let sdk = sdk.to_string_lossy();
    // A Go package name: the module's name without `-` and `_`.
    let package: String = name.chars().filter(char::is_ascii_alphanumeric).collect();
    let mut written = Vec::new();
    for (file, template) in templates(language) {
        let path = dir.join(file);
        let text = template
            .replace("{{name}}", &name)
            .replace("{{package}}", &package)
            .replace("{{sdk}}", &sdk);
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|source| ScaffoldError::Io {
                path: path.clone(),
                source,
            })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_scaffolds_a_project_its_builder_recognises() {
        let root = tempfile::tempdir().unwrap();
        for language in Language::ALL {
            let dir = root.path().join(format!("my-{}", language.name()));
            let files = scaffold(language, &dir, Path::new("/sdk")).unwrap();
            assert!(!files.is_empty());
            assert_eq!(Language::detect(&dir).unwrap(), language);
            for file in files {
                let text = std::fs::read_to_string(file).unwrap();
                for placeholder in ["{{name}}", "{{package}}", "{{sdk}}"] {
                    assert!(!text.contains(placeholder), "{text}");
                }
            }
        }
    }

    #[test]
    fn names_and_non_empty_directories_are_refused() {
        let root = tempfile::tempdir().unwrap();
        for bad in ["9lives", "Deals"] {
            let err = scaffold(Language::C, &root.path().join(bad), Path::new("/sdk")).unwrap_err();
            assert!(matches!(err, ScaffoldError::BadName(_)), "{err}");
        }
        let dir = root.path().join("taken");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("x"), "").unwrap();
        let err = scaffold(Language::Python, &dir, Path::new("/sdk")).unwrap_err();
        assert!(matches!(err, ScaffoldError::NotEmpty(_)), "{err}");
    }
}
