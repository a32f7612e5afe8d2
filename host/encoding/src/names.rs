//! Avro names: what a record, field or namespace may be called, and a name in its
//! namespace. The formats, the schemas a module supplies and the decoder all name
//! records, so the rules sit in a leaf they share.

/// Avro record and field names: letters, digits and `_`, not starting with a digit.
pub(crate) fn avro_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Why `name` cannot be an Avro name (letters, digits and `_`, not starting with a
/// digit), or `None`; a namespace (`dotted`) is such names joined by dots.
pub fn invalid_avro_name(name: &str, dotted: bool) -> Option<String> {
    let valid = |part: &str| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let ok = if dotted {
        name.is_empty() || name.split('.').all(valid)
    } else {
        valid(name)
    };
    (!ok).then(|| {
        format!(
            "`{name}` is not an Avro {}: use letters, digits and `_`, not starting with a digit{}",
            if dotted { "namespace" } else { "name" },
            if dotted { ", parts joined by dots" } else { "" }
        )
    })
}

/// `namespace.name`, or `name` without a namespace.
pub(crate) fn full_name(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    }
}
