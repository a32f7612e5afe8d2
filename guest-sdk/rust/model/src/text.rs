//! String functions with Spark's semantics.

/// Spark's `substring(s, pos, len)` for a 1-based `pos`: characters, not bytes, and
/// whatever part of the range exists. A `pos` of 0 is treated as 1, as Spark does.
pub fn spark_substring(s: &str, pos: usize, len: usize) -> &str {
    if len == 0 {
        return "";
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
    }
}
