//! Reads the XML documents of the S3 mock and the STS fake with quick-xml: every element's
//! text by its path (`Error/Code`), so tests assert on parsed fields, not substrings.

use quick_xml::Reader;
use quick_xml::events::Event;

/// `(path, text)` of every element holding text, in document order; paths join the local
/// element names with `/` (`AssumeRoleWithWebIdentityResponse/.../AccessKeyId`).
///
/// # Panics
/// If the document is not well-formed XML.
pub(crate) fn elements(doc: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(doc).expect("UTF-8 XML");
    let mut reader = Reader::from_str(text);
    // The open elements, and whether each has child elements (only leaves are reported).
    let mut open: Vec<(String, bool)> = Vec::new();
    let mut current = String::new();
    let mut out = Vec::new();
    let joined = |open: &[(String, bool)]| {
        open.iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join("/")
    };
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => {
                if let Some(parent) = open.last_mut() {
                    parent.1 = true;
                }
                open.push((e.local_name().as_ref().to_owned(), false));
                current.clear();
            }
            Event::Empty(e) => {
                if let Some(parent) = open.last_mut() {
                    parent.1 = true;
                }
                open.push((e.local_name().as_ref().to_owned(), false));
                out.push((joined(&open), String::new()));
                open.pop();
            }
            Event::Text(e) => current.push_str(&e.xml10_content()),
            Event::CData(e) => current.push_str(&e.xml10_content()),
            Event::GeneralRef(e) => {
                let entity = format!("&{};", e.xml10_content());
                current.push_str(&quick_xml::escape::unescape(&entity).expect("known entity"));
            }
            Event::End(_) => {
                if open.last().is_some_and(|(_, has_child)| !has_child) {
                    out.push((joined(&open), std::mem::take(&mut current)));
                }
                current.clear();
                open.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(open.is_empty(), "unclosed elements {open:?}");
    out
}

/// The text of the first element at `path` (for example `Error/Code`).
pub(crate) fn text(doc: &[u8], path: &str) -> Option<String> {
    elements(doc)
        .into_iter()
        .find(|(p, _)| p == path)
        .map(|(_, t)| t)
}
