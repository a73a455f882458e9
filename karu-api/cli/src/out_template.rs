//! The file names of `karu read --output DIR` and `--out-template`: a template's placeholders
//! (`{tag}`, `{offset}`, `{length}`, `{name}`) filled for each read, checked before anything
//! is read, and one file for each read.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::cli::ReadArgs;
use crate::numbers::Range;
use crate::outcome::Stop;
use crate::place::Placed;
use crate::requests::{Request, Requests};

/// The default file name of a read under `--output DIR`.
pub(crate) const DEFAULT_TEMPLATE: &str = "{tag}.bin";

/// A template's placeholders are known (checked before anything is read).
pub(crate) fn check_template(template: &str) -> Result<(), Stop> {
    let request = Request {
        address: 0,
        range: Range::Span {
            offset: 0,
            length: 1,
        },
    };
    render(template, 0, &request, Some(0), 1, "x")
        .map(drop)
        .map_err(|e| Stop::Usage(format!("--out-template {template:?}: {e}")))
}

/// The file of each read; every read must get its own.
pub(crate) fn output_files(
    args: &ReadArgs,
    template: &str,
    requests: &Requests,
    placed: &[Placed],
) -> Result<Vec<PathBuf>, Stop> {
    let mut files = Vec::with_capacity(requests.reads.len());
    let mut seen: HashMap<PathBuf, usize> = HashMap::new();
    for (tag, (request, placed)) in requests.reads.iter().zip(placed).enumerate() {
        let name = render(
            template,
            tag,
            request,
            placed.offset,
            placed.length,
            &requests.addresses[request.address],
        )
        .map_err(|e| Stop::Usage(format!("--out-template {template:?}: {e}")))?;
        let path = match &args.output {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        };
        if let Some(first) = seen.insert(path.clone(), tag) {
            return Err(Stop::Usage(format!(
                "--out-template {template:?}: reads {first} and {tag} would both write {}; \
                 put {{tag}} in the template",
                path.display()
            )));
        }
        files.push(path);
    }
    Ok(files)
}

/// One read's file name from a template.
fn render(
    template: &str,
    tag: usize,
    request: &Request,
    offset: Option<u64>,
    length: u64,
    address: &str,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| "a `{` without its `}`".to_owned())?;
        match &after[..close] {
            "tag" => out.push_str(&tag.to_string()),
            "offset" => match offset {
                Some(offset) => out.push_str(&offset.to_string()),
                None => out.push_str(&request.range.to_string()),
            },
            "length" => out.push_str(&length.to_string()),
            "name" => out.push_str(&file_name(address)),
            other => {
                return Err(format!(
                    "unknown placeholder {{{other}}} (use {{tag}}, {{offset}}, {{length}}, \
                     {{name}})"
                ));
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err("the template gives an empty file name".into());
    }
    Ok(out)
}

/// The last segment of an address, safe as a file name.
fn file_name(address: &str) -> String {
    let trimmed = address.split(['?', '#']).next().unwrap_or(address);
    let last = trimmed
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    match last {
        "" | "." | ".." => "object".to_owned(),
        name => name.replace(['\\', '\0'], "_"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_each_read() {
        let request = Request {
            address: 0,
            range: Range::Span {
                offset: 16,
                length: 4,
            },
        };
        assert_eq!(
            render(
                "{name}/{tag}-{offset}+{length}.bin",
                3,
                &request,
                Some(16),
                4,
                "s3://b/dir/obj.bin?x=1"
            ),
            Ok("obj.bin/3-16+4.bin".to_owned())
        );
        assert_eq!(
            render("{tag}", 0, &request, Some(16), 4, "/x/"),
            Ok("0".to_owned())
        );
        assert!(
            render("{nope}", 0, &request, Some(16), 4, "/x")
                .unwrap_err()
                .contains("unknown placeholder")
        );
        assert!(render("{tag", 0, &request, Some(16), 4, "/x").is_err());
        assert_eq!(file_name("https://h/"), "h");
        assert_eq!(file_name("/a/.."), "object");
    }
}
