//! The language a component was written in, as its toolchains recorded it in the
//! `producers` sections (and, for Python, the interpreter's module name): shown by the
//! service beside each module.

use wasmtime::wasmparser::{KnownCustom, Name, Parser, Payload};

/// What the sections of a component say about its source.
#[derive(Default)]
struct Producers {
    /// `language` of the component itself (componentize-js writes `JavaScript` there).
    component_language: Option<String>,
    /// `language` of its first core module that names one: the transform's own code.
    module_language: Option<String>,
    /// A core module is the CPython interpreter (componentize-py names no language).
    python: bool,
}

/// The language `bytes` (a component) was written in: `rust`, `go`, `c`, `c++`,
/// `javascript`, `python`, another language's name as its compiler wrote it, or `None`
/// when nothing says.
pub fn source_language(bytes: &[u8]) -> Option<String> {
    let mut found = Producers::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::CustomSection(section) => match section.as_known() {
                KnownCustom::Producers(fields) => {
                    for field in fields.into_iter().flatten() {
                        if field.name != "language" {
                            continue;
                        }
                        let first = field.values.into_iter().flatten().next();
                        let Some(value) = first.map(|v| v.name.to_string()) else {
                            continue;
                        };
                        if depth == 0 {
                            found.component_language.get_or_insert(value);
                        } else {
                            found.module_language.get_or_insert(value);
                        }
                    }
                }
                KnownCustom::Name(names) => {
                    found.python |= names.into_iter().flatten().any(
                        |name| matches!(name, Name::Module { name, .. } if name.starts_with("libpython")),
                    );
                }
                _ => {}
            },
            _ => {}
        }
    }
    if found.python {
        return Some("python".into());
    }
    let language = found.component_language.or(found.module_language)?;
    Some(spelled(&language))
}

/// The language's usual name, from the DWARF-style names compilers write (`C99`,
/// `C_plus_plus_14`, `Rust`).
fn spelled(language: &str) -> String {
    let lower = language.to_ascii_lowercase();
    if lower.starts_with("c_plus_plus") {
        "c++".into()
    } else if lower.starts_with('c') && lower[1..].chars().all(|c| c.is_ascii_digit()) {
        "c".into()
    } else {
        lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_spellings_become_language_names() {
        assert_eq!(spelled("C99"), "c");
        assert_eq!(spelled("C11"), "c");
        assert_eq!(spelled("C_plus_plus_14"), "c++");
        assert_eq!(spelled("Rust"), "rust");
        assert_eq!(spelled("JavaScript"), "javascript");
        assert_eq!(spelled("Cobol"), "cobol");
    }

    #[test]
    fn bytes_that_are_no_component_name_no_language() {
        assert_eq!(source_language(b"not wasm"), None);
        assert_eq!(source_language(b"\0asm\x01\0\0\0"), None);
    }
}
