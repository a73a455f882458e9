//! Reading C and C++ source text (Karu's `karu.h` and `karu.hpp`) for checks of what it
//! declares: the C ABI's baseline and the vocabulary table's names.

/// `text` without its comments (`/* … */` and `// …` to the end of the line; the line break
/// kept). Not a C lexer: a comment marker inside a string literal counts as one, which
/// Karu's headers never have.
pub fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without_comments;

    #[test]
    fn both_kinds_of_comment_go_and_the_code_and_line_breaks_stay() {
        let text = "int a; /* gone\n still gone */ int b; // gone too\nint é; /* unclosed";
        assert_eq!(without_comments(text), "int a;  int b; \nint é; ");
    }
}
