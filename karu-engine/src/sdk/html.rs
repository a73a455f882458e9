//! The useful line of an HTML error page (`404 Not Found`), instead of its markup.

/// Elements whose content is never text a person reads.
const HIDDEN: [&str; 3] = ["script", "style", "head"];

/// The title of an HTML page (else its first heading or line of text), followed by its first
/// paragraph when that says more; `None` when `text` is not HTML.
///
/// `<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1><p>The requested
/// URL was not found on this server.</p></body></html>` gives `404 Not Found: The requested
/// URL was not found on this server.`
pub(crate) fn summary(text: &str) -> Option<String> {
    if !looks_like_html(text) {
        return None;
    }
    let title = element_text(text, "title");
    let heading = ["h1", "h2", "h3"]
        .iter()
        .find_map(|name| element_text(text, name));
    let paragraph = element_text(text, "p");
    let first_line = || {
        let visible = remove_elements(text, &HIDDEN);
        strip_tags(&visible)
            .lines()
            .map(collapse)
            .find(|line| !line.is_empty())
    };
    let head = title.or(heading).or_else(first_line)?;
    Some(match paragraph {
        Some(more) if !head.contains(&more) && !more.contains(&head) => format!("{head}: {more}"),
        Some(more) if more.contains(&head) => more,
        _ => head,
    })
}

/// Whether the body is an HTML document rather than text, XML or JSON.
fn looks_like_html(text: &str) -> bool {
    let start: String = text
        .trim_start()
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    let tagged = start.starts_with('<') && !start.starts_with("<?xml");
    start.starts_with("<!doctype html")
        || start.starts_with("<html")
        || tagged
            && ["<head", "<body", "<title", "<h1", "<center"]
                .iter()
                .any(|tag| start.contains(tag))
}

/// The text of the first `<name …>…</name>` element (tags inside removed, entities decoded,
/// whitespace collapsed), if it has any.
fn element_text(text: &str, name: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let open = format!("<{name}");
    let mut from = 0;
    while let Some(found) = lower[from..].find(&open) {
        let start = from + found;
        let after = start + open.len();
        // `<p` must not match `<pre` or `<param`.
        if lower[after..].starts_with(['>', ' ', '\t', '\n', '\r', '/']) {
            let body_start = after + lower[after..].find('>')? + 1;
            let close = format!("</{name}");
            let body_end = body_start + lower[body_start..].find(&close)?;
            let inner = strip_tags(&text[body_start..body_end]);
            let collapsed = collapse(&inner);
            return (!collapsed.is_empty()).then_some(collapsed);
        }
        from = after;
    }
    None
}

/// `text` without the elements named (and their content).
fn remove_elements(text: &str, names: &[&str]) -> String {
    let mut out = text.to_owned();
    for name in names {
        loop {
            let lower = out.to_ascii_lowercase();
            let Some(start) = lower.find(&format!("<{name}")) else {
                break;
            };
            let close = format!("</{name}>");
            let end = lower[start..]
                .find(&close)
                .map_or(out.len(), |end| start + end + close.len());
            out.replace_range(start..end, "\n");
        }
    }
    out
}

/// Tags replaced by line breaks (block elements) or nothing (inline ones), comments dropped,
/// the common entities decoded.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let end = if tag.starts_with("<!--") {
            tag.find("-->").map_or(tag.len(), |end| end + 3)
        } else {
            tag.find('>').map_or(tag.len(), |end| end + 1)
        };
        if is_block(&tag[..end]) {
            out.push('\n');
        }
        rest = &tag[end..];
    }
    out.push_str(rest);
    decode_entities(&out)
}

/// Whether a tag (`<p class=x>`, `</div>`, `<br/>`) ends a line of text.
fn is_block(tag: &str) -> bool {
    let name: String = tag
        .trim_start_matches(['<', '/'])
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(
        name.as_str(),
        "p" | "div"
            | "br"
            | "hr"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "li"
            | "tr"
            | "td"
            | "th"
            | "title"
            | "center"
            | "pre"
            | "body"
            | "head"
            | "html"
            | "table"
            | "ul"
            | "ol"
            | "address"
    )
}

/// Decodes `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`, `&apos;`, `&nbsp;` and numeric entities.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        let candidate = &rest[start..];
        let decoded = candidate
            .find(';')
            .filter(|&end| end <= 10)
            .and_then(|end| {
                let name = &candidate[1..end];
                let c = match name {
                    "amp" => Some('&'),
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "quot" => Some('"'),
                    "apos" | "#39" => Some('\''),
                    "nbsp" => Some(' '),
                    _ => name
                        .strip_prefix("#x")
                        .or_else(|| name.strip_prefix("#X"))
                        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                        .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                        .and_then(char::from_u32),
                };
                c.map(|c| (c, end + 1))
            });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &candidate[len..];
            }
            None => {
                out.push('&');
                rest = &candidate[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Runs of whitespace as single spaces, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_404_is_its_title() {
        let page = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n\
                    <center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n\
                    </body>\r\n</html>\r\n";
        assert_eq!(summary(page).as_deref(), Some("404 Not Found"));
    }

    #[test]
    fn apache_404_keeps_its_sentence() {
        let page = "<!DOCTYPE HTML PUBLIC \"-//IETF//DTD HTML 2.0//EN\">\n<html><head>\n\
                    <title>404 Not Found</title>\n</head><body>\n<h1>Not Found</h1>\n\
                    <p>The requested URL was not found on this server.</p>\n</body></html>\n";
        assert_eq!(
            summary(page).as_deref(),
            Some("404 Not Found: The requested URL was not found on this server.")
        );
    }

    #[test]
    fn pages_without_a_title_use_a_heading_or_the_first_text() {
        let page = "<html><body><h2>Bad &amp; <b>sad</b></h2></body></html>";
        assert_eq!(summary(page).as_deref(), Some("Bad & sad"));
        let page = "<html><head><style>p { color: red }</style><script>var x = 1;</script>\
                    </head><body><div>  Service   unavailable &#8212; retry later </div></body></html>";
        assert_eq!(
            summary(page).as_deref(),
            Some("Service unavailable \u{2014} retry later")
        );
        let page = "<html><body><p>Gone <!-- hidden --> for good</p></body></html>";
        assert_eq!(summary(page).as_deref(), Some("Gone for good"));
    }

    #[test]
    fn other_bodies_are_not_html() {
        for body in [
            "plain text",
            "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>",
            "{\"message\": \"<title>x</title>\"}",
            "",
        ] {
            assert_eq!(summary(body), None, "{body:?}");
        }
    }

    #[test]
    fn entities_decode_and_stray_ampersands_stay() {
        assert_eq!(
            decode_entities("a &lt;b&gt; &#x41;&#66; & c &bogus; &"),
            "a <b> AB & c &bogus; &"
        );
    }
}
