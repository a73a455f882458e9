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
/// matches if any member is strongly equal to the response's tag. Weak tags never match, and
/// neither does a condition that is not a list of entity tags.
pub fn if_match_satisfied(condition: &str, actual: &str) -> bool {
    if condition.trim() == "*" {
        return true;
    }
    let Some(actual) = strong_etag(Some(actual)) else {
        return false;
    };
    entity_tags(condition).is_some_and(|tags| {
        tags.iter()
            .any(|tag| !tag.starts_with("W/") && *tag == actual)
    })
}

/// The entity tags of a list such as an `If-Match` value, each with its quotes and any `W/`,
/// in order; `None` when the value is not a list of entity tags. An entity tag is a quoted
/// string holding no quote (RFC 9110 §8.8.3), so a comma inside the quotes belongs to the tag
/// (`"a,b"` is one tag); empty list elements are skipped (§5.6.1).
pub(crate) fn entity_tags(list: &str) -> Option<Vec<&str>> {
    let mut tags = Vec::new();
    let mut rest = list;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return (!tags.is_empty()).then_some(tags);
        }
        let quoted = rest.strip_prefix("W/").unwrap_or(rest);
        let inner = quoted.strip_prefix('"')?;
        let end = (rest.len() - inner.len()) + inner.find('"')? + 1;
        tags.push(&rest[..end]);
        rest = rest[end..].trim_start_matches([' ', '\t']);
        if !rest.is_empty() && !rest.starts_with(',') {
            return None;
        }
    }
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

    #[test]
    fn a_comma_inside_an_entity_tag_belongs_to_it() {
        assert!(if_match_satisfied("\"a,b\"", "\"a,b\""));
        assert!(if_match_satisfied("\"x\", \"a,b\"", "\"a,b\""));
        assert!(if_match_satisfied("\"a,b\",\"x\"", "\"a,b\""));
        assert!(!if_match_satisfied("\"a,b\"", "\"a\""));
        assert!(!if_match_satisfied("\"a\", \"b\"", "\"a,b\""));
        assert!(!if_match_satisfied("W/\"a,b\"", "\"a,b\""));
        assert!(is_single_strong("\"a,b\""));
    }

    #[test]
    fn entity_tag_lists_are_parsed_as_quoted_strings() {
        assert_eq!(entity_tags("\"a\""), Some(vec!["\"a\""]));
        assert_eq!(
            entity_tags(" \"a,b\" ,W/\"c\",, \"\" "),
            Some(vec!["\"a,b\"", "W/\"c\"", "\"\""])
        );
        for malformed in [
            "",
            " , ",
            "a",
            "\"a",
            "\"a\" b",
            "\"a\"\"b\"",
            "W/a",
            "*, \"a\"",
        ] {
            assert_eq!(entity_tags(malformed), None, "{malformed:?}");
            assert!(!if_match_satisfied(malformed, "\"a\""), "{malformed:?}");
        }
    }
}
