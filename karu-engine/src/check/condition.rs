//! Entity tags and `If-Match`: which tags are strong, and whether a response's tag satisfies
//! a condition (RFC 9110 §13.1.1, strong comparison).

/// The tag if it is strong (`"x"`), `None` for weak (`W/"x"`) or malformed tags.
pub fn strong_etag(etag: Option<&str>) -> Option<String> {
    let tag = etag?.trim();
    (tag.len() >= 2 && tag.starts_with('"') && tag.ends_with('"')).then(|| tag.to_string())
}

/// Whether a strong ETag can pin a resume: one strong tag, not a wildcard or a list.
pub fn is_single_strong(condition: &str) -> bool {
    let c = condition.trim();
    c.len() >= 2 && c.starts_with('"') && c.ends_with('"') && !c[1..c.len() - 1].contains('"')
}

/// RFC 9110 `If-Match` evaluation with strong comparison: `*` matches anything; a list
/// matches if any member is strongly equal to the response's tag. Weak tags never match.
pub fn if_match_satisfied(condition: &str, actual: &str) -> bool {
    let condition = condition.trim();
    if condition == "*" {
        return true;
    }
    let Some(actual) = strong_etag(Some(actual)) else {
        return false;
    };
    condition
        .split(',')
        .map(str::trim)
        .any(|candidate| !candidate.starts_with("W/") && candidate == actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_semantics() {
        assert!(if_match_satisfied("*", "\"a\""));
        assert!(if_match_satisfied("\"a\", \"b\"", "\"b\""));
        assert!(!if_match_satisfied("\"a\"", "\"b\""));
        assert!(!if_match_satisfied("W/\"a\"", "\"a\""));
        assert!(!if_match_satisfied("\"a\"", "W/\"a\""));
        assert!(is_single_strong("\"abc\""));
        assert!(!is_single_strong("W/\"abc\""));
        assert!(!is_single_strong("*"));
        assert!(!is_single_strong("\"a\", \"b\""));
        assert_eq!(strong_etag(Some("W/\"x\"")), None);
        assert_eq!(strong_etag(Some(" \"x\" ")).as_deref(), Some("\"x\""));
    }
}
