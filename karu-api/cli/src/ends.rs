//! `karu ends`: both ends of an object in one round trip, as a summary (size, ETag, each end's
//! length and SHA-256), as raw bytes (`--head-only`, `--tail-only`), as files (`--output DIR`)
//! or in a JSON line with the bytes encoded.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use karu::Client;
use serde_json::json;

use crate::cli::{Encoding, EndsArgs};
use crate::files::{Ending, OutputFile, check_outputs};
use crate::interrupt;
use crate::outcome::{OK, Stop, say};
use crate::output::Stdout;
use crate::{locate, operation_failed, sha256};

/// Runs `karu ends`.
pub(crate) fn run(
    client: &Client,
    args: &EndsArgs,
    window: Option<&str>,
    json: bool,
    out: &mut Stdout,
) -> Result<u8, Stop> {
    let locator = locate(client, &args.address, window)?;
    let paths: Vec<PathBuf> = match &args.output {
        Some(dir) => [("head", !args.tail_only), ("tail", !args.head_only)]
            .iter()
            .filter(|(_, wanted)| *wanted)
            .map(|(name, _)| dir.join(format!("{name}.bin")))
            .collect(),
        None => Vec::new(),
    };
    let inputs: Vec<&Path> = locator.file_path().into_iter().collect();
    let raw_only = args.head_only || args.tail_only;
    // Stdout has the summary or the JSON line, or the bytes without --output.
    let to_stdout = !(raw_only && args.output.is_some());
    check_outputs(&inputs, &paths, to_stdout)?;
    if args.output.is_some() {
        interrupt::protect_output_files();
    }
    let ends = match client.read_ends(&locator, args.head, args.tail) {
        Ok(ends) => ends,
        Err(e) => {
            let status = operation_failed(&e);
            for path in paths
                .iter()
                .filter(|p| std::fs::symlink_metadata(p).is_ok())
            {
                say(&format!(
                    "karu: {} is left as it was before this run",
                    path.display()
                ));
            }
            return Ok(status);
        }
    };
    let wanted = [
        ("head", &ends.head, !args.tail_only),
        ("tail", &ends.tail, !args.head_only),
    ];
    let mut files = [None, None];
    if let Some(dir) = &args.output {
        for (at, (name, bytes, wanted)) in wanted.iter().enumerate() {
            if *wanted {
                let mut file = OutputFile::new(dir.join(format!("{name}.bin")));
                file.write(bytes)?;
                files[at] = file.finish(Ending::Whole)?.file;
            }
        }
    }
    if raw_only && args.output.is_none() {
        let bytes = if args.head_only {
            &ends.head
        } else {
            &ends.tail
        };
        out.write(bytes)?;
    } else if json {
        let encode = |bytes: &[u8]| match args.encoding {
            Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(bytes),
            Encoding::Hex => hex::encode(bytes),
        };
        let encoding = match args.encoding {
            Encoding::Base64 => "base64",
            Encoding::Hex => "hex",
        };
        let mut line = json!({
            "size": ends.size,
            "etag": ends.etag,
            "head_bytes": ends.head.len(),
            "head_sha256": sha256(&ends.head),
            "tail_bytes": ends.tail.len(),
            "tail_sha256": sha256(&ends.tail),
            "encoding": encoding,
            "head": encode(&ends.head),
            "tail": encode(&ends.tail),
        });
        if args.output.is_some() {
            line["head_file"] = json!(files[0].as_ref().map(|p| p.display().to_string()));
            line["tail_file"] = json!(files[1].as_ref().map(|p| p.display().to_string()));
        }
        out.line(&line.to_string())?;
    } else if !raw_only {
        out.line(&format!("size\t{}", ends.size))?;
        out.line(&format!("etag\t{}", ends.etag.as_deref().unwrap_or("-")))?;
        for (at, (name, bytes, _)) in wanted.iter().enumerate() {
            let file = match &files[at] {
                Some(path) => format!("\t{}", path.display()),
                None => String::new(),
            };
            out.line(&format!(
                "{name}\t{} bytes\tsha256 {}{file}",
                bytes.len(),
                sha256(bytes)
            ))?;
        }
    }
    out.flush()?;
    Ok(OK)
}
