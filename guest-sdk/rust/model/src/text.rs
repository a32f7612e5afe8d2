//! String functions with Spark's semantics.

/// Spark's `substring(s, pos, len)` for a 1-based `pos`: characters, not bytes, and
/// whatever part of the range exists. A `pos` of 0 is treated as 1, as Spark does.
pub fn spark_substring(s: &str, pos: usize, len: usize) -> &str {
    if len == 0 {
        return "";
    }
    // Where the characters up to the end are ASCII, characters are bytes.
    let start = (pos.max(1) - 1).min(s.len());
    let end = start.saturating_add(len).min(s.len());
    if s.as_bytes()[..end].is_ascii() {
        return &s[start..end];
    }
    let mut bounds = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()));
    let start = bounds.nth(pos.max(1) - 1).unwrap_or(s.len());
    let end = bounds.nth(len - 1).unwrap_or(s.len());
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring_matches_spark() {
        let id = "ObjectId('65a1f0c2e4b0a1b2c3d4e5f6')";
        assert_eq!(spark_substring(id, 11, 24), "65a1f0c2e4b0a1b2c3d4e5f6");
        assert_eq!(spark_substring("short", 11, 24), "");
        assert_eq!(spark_substring("ObjectId('é5a1')", 11, 24), "é5a1')");
        assert_eq!(spark_substring("abc", 0, 2), "ab");
        assert_eq!(spark_substring("abc", 2, 0), "");
        assert_eq!(spark_substring("abcé", 2, 9), "bcé");
        assert_eq!(spark_substring("abcé", 2, 2), "bc");
        assert_eq!(spark_substring("ab", 3, 1), "");
        assert_eq!(spark_substring("ab", 1, usize::MAX), "ab");
    }
}
