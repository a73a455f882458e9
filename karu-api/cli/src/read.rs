//! `karu read`: one batch, streamed as it completes to stdout (raw bytes, in order), to one file
//! per read, or as JSON lines in completion order.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use karu::{BatchOptions, Client, Completion, Error, Locator, Next, Read, Status, Timing};
use serde_json::json;

use crate::cli::ReadArgs;
use crate::outcome::{FAILED, OK, Stop};
use crate::output::Stdout;
use crate::report::{Failures, Reporter};
use crate::requests::{Request, Requests};
use crate::{locate, sha256};

/// The default file name of a read under `--output DIR`.
const DEFAULT_TEMPLATE: &str = "{tag}.bin";

/// Runs `karu read`; `failed` is set as soon as a read fails, so that a broken pipe can still
/// end with the right status.
pub(crate) fn run(
    client: &Client,
    args: &ReadArgs,
    window: Option<&str>,
    json: bool,
    out: &mut Stdout,
    failed: &mut bool,
) -> Result<u8, Stop> {
    let requests = Requests::gather(
        args.address.as_deref(),
        &args.ranges,
        args.ranges_from.as_deref(),
    )?;
    if args.concat && json {
        return Err(Stop::Usage(
            "--concat writes raw bytes; --json writes one line per read: give one of them".into(),
        ));
    }
    let files = output_files(args, &requests)?;
    if !json && files.is_none() && requests.reads.len() > 1 && !args.concat {
        return Err(Stop::Usage(format!(
            "{} ranges would run together on stdout: give --concat to write their bytes one \
             after another in the order given, --output DIR for one file each, or --json",
            requests.reads.len()
        )));
    }
    let options = batch_options(args);

    // Addresses that do not resolve fail their reads alone; the others go on.
    let locators: Vec<Result<Locator, Error>> = requests
        .addresses
        .iter()
        .map(|address| locate(client, address, window))
        .collect::<Result<_, Stop>>()?;
    let raw = (!json && files.is_none()).then(RawOrder::default);
    let mut run = Run {
        requests: &requests,
        locators: &locators,
        files,
        json,
        raw,
        failures: Failures::default(),
        reporter: Reporter::new(requests.reads.len() as u64),
        done: 0,
        delivered: 0,
        delivered_locally: 0,
        timings: Timings::default(),
    };
    if run.files.is_some()
        && let Some(dir) = &args.output
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| Stop::Output(format!("cannot create {}: {e}", dir.display())))?;
    }

    let started = Instant::now();
    let before = client.transport_stats();
    let mut unresolved = 0;
    let mut reads = Vec::with_capacity(requests.reads.len());
    for (tag, request) in requests.reads.iter().enumerate() {
        match &locators[request.address] {
            Ok(locator) => {
                let read = Read::new(locator, request.offset, request.length).tag(tag as u64);
                reads.push(match &args.if_match {
                    Some(etag) => read.if_match(etag.clone()),
                    None => read,
                });
            }
            Err(_) => unresolved += 1,
        }
    }
    // Reads of unresolved addresses complete first, before anything is submitted.
    for (tag, request) in requests.reads.iter().enumerate() {
        if let Err(error) = &locators[request.address] {
            *failed = true;
            run.unresolved(tag, error, out)?;
        }
    }
    let batch = client.submit_with(reads, &options);
    loop {
        let next = match batch.try_next() {
            Next::TimedOut => {
                // Nothing ready: show what arrived so far, then wait.
                out.flush()?;
                batch.next_timeout(Duration::from_millis(200))
            }
            next => next,
        };
        match next {
            Next::Completion(completion) => {
                if !completion.is_ok() {
                    *failed = true;
                }
                run.completed(completion, out)?;
            }
            Next::TimedOut => {}
            Next::Drained => break,
        }
    }
    let wall = started.elapsed();
    let after = client.transport_stats();
    out.flush()?;
    for line in run.failures.tail() {
        run.reporter.line(&line);
    }
    if json {
        let stats = batch.stats();
        let credentials = client.credential_stats();
        let fetched = run.delivered_locally + (after.body_bytes - before.body_bytes);
        let line = json!({
            "batch": {
                "reads": requests.reads.len(),
                "rejected": stats.rejected + unresolved,
                "failed": run.failures.count,
                "transfers": stats.transfers,
                "requested_bytes": stats.requested_bytes,
                "planned_bytes": stats.planned_bytes,
                "delivered_bytes": run.delivered,
                "fetched_bytes": fetched,
                "wall_ms": wall.as_secs_f64() * 1000.0,
                "transport": {
                    "requests": after.requests - before.requests,
                    "body_bytes": after.body_bytes - before.body_bytes,
                    "retries": after.retries - before.retries,
                },
                "timings": run.timings.summary(),
                "counters": {
                    "transport": {
                        "requests": after.requests,
                        "body_bytes": after.body_bytes,
                        "retries": after.retries,
                    },
                    "credentials": {
                        "lookups": credentials.lookups,
                        "callback_calls": credentials.callback_calls,
                        "hits": credentials.hits,
                        "failures": credentials.failures,
                        "waits": credentials.waits,
                    },
                },
            }
        });
        out.line(&line.to_string())?;
    }
    out.flush()?;
    run.reporter.finish(
        requests.reads.len() as u64,
        run.delivered,
        run.failures.count,
    );
    Ok(if run.failures.count == 0 { OK } else { FAILED })
}

/// The planner overrides of the command line.
fn batch_options(args: &ReadArgs) -> BatchOptions {
    let mut options = BatchOptions::new();
    if let Some(v) = args.max_gap {
        options = options.max_gap(v);
    }
    if let Some(v) = args.max_span {
        options = options.max_span(v);
    }
    if let Some(v) = args.max_parts {
        options = options.max_parts(v);
    }
    if let Some(v) = args.max_amplification {
        options = options.max_amplification(v);
    }
    options
}

/// The state of one streamed batch.
struct Run<'a> {
    requests: &'a Requests,
    locators: &'a [Result<Locator, Error>],
    /// The file of each read, with `--output` or `--out-template`.
    files: Option<Vec<PathBuf>>,
    json: bool,
    /// Raw bytes on stdout, in submission order.
    raw: Option<RawOrder>,
    failures: Failures,
    reporter: Reporter,
    done: u64,
    delivered: u64,
    /// Bytes delivered by local reads, which the transport does not count.
    delivered_locally: u64,
    /// The completions' timings, for the `--json` summary.
    timings: Timings,
}

/// The completions' timings, in milliseconds from the batch's submission.
#[derive(Default)]
struct Timings {
    done_ms: Vec<f64>,
    first_byte_ms: Vec<f64>,
    attempts: u64,
}

impl Timings {
    fn add(&mut self, timing: &Timing) {
        self.done_ms.push(ms(timing.done()));
        if let Some(first) = timing.first_byte() {
            self.first_byte_ms.push(ms(first));
        }
        self.attempts += u64::from(timing.attempts());
    }

    /// p50, p90, p99 and max of each series (null where it is empty).
    fn summary(&mut self) -> serde_json::Value {
        json!({
            "done_ms": quantiles(&mut self.done_ms),
            "first_byte_ms": quantiles(&mut self.first_byte_ms),
            "attempts": self.attempts,
        })
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn quantiles(values: &mut [f64]) -> serde_json::Value {
    if values.is_empty() {
        return serde_json::Value::Null;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    json!({"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1.0)})
}

/// A completion's timing as a JSON object.
fn timing_json(timing: &Timing) -> serde_json::Value {
    json!({
        "first_byte_ms": timing.first_byte().map(ms),
        "done_ms": ms(timing.done()),
        "attempts": timing.attempts(),
        "transfer": timing.transfer(),
        "transfer_bytes": timing.transfer_bytes(),
    })
}

impl Run<'_> {
    /// A read whose address did not resolve.
    fn unresolved(&mut self, tag: usize, error: &Error, out: &mut Stdout) -> Result<(), Stop> {
        self.finished(
            tag,
            error.status(),
            Some(error.message()),
            (&[], 0),
            None,
            out,
        )?;
        if let Some(raw) = &mut self.raw {
            raw.arrived(tag, None, out)?;
        }
        Ok(())
    }

    /// A completion of the batch.
    fn completed(&mut self, completion: Completion, out: &mut Stdout) -> Result<(), Stop> {
        let tag = completion.tag() as usize;
        let request = self.requests.reads[tag];
        if matches!(&self.locators[request.address], Ok(l) if l.file_path().is_some()) {
            self.delivered_locally += completion.bytes_received();
        }
        self.finished(
            tag,
            completion.status(),
            completion.error().map(Error::message),
            (completion.bytes(), completion.bytes_received()),
            Some(completion.timing()),
            out,
        )?;
        if let Some(raw) = &mut self.raw {
            raw.arrived(tag, Some(completion), out)?;
        }
        Ok(())
    }

    /// What every finished read does: its error line, its file, its JSON line, the counters.
    fn finished(
        &mut self,
        tag: usize,
        status: Status,
        message: Option<&str>,
        (bytes, received): (&[u8], u64),
        timing: Option<&Timing>,
        out: &mut Stdout,
    ) -> Result<(), Stop> {
        let request = self.requests.reads[tag];
        let address = &self.requests.addresses[request.address];
        self.done += 1;
        self.delivered += received;
        if let Some(timing) = timing {
            self.timings.add(timing);
        }
        if status != Status::Ok && self.failures.record(status, message.unwrap_or_default()) {
            let place = if self.requests.addresses.len() > 1 {
                format!("{address} {}:{}", request.offset, request.length)
            } else {
                format!("{}:{}", request.offset, request.length)
            };
            let delivered = if status == Status::RangeNotSatisfiable {
                format!(" ({received} bytes delivered)")
            } else {
                String::new()
            };
            self.reporter.line(&format!(
                "karu: read {tag} ({place}): {status}: {}{delivered}",
                message.unwrap_or_default()
            ));
        }
        let mut file = None;
        if let Some(files) = &self.files
            && (status == Status::Ok || received > 0)
        {
            let path = &files[tag];
            write_file(path, bytes)?;
            file = Some(path.display().to_string());
        }
        if self.json {
            let line = json!({
                "tag": tag,
                "address": address,
                "offset": request.offset,
                "length": request.length,
                "status": status.name(),
                "bytes_received": received,
                "error": message,
                "sha256": sha256(bytes),
                "file": file,
                "timing": timing.map(timing_json),
            });
            out.line(&line.to_string())?;
        }
        self.reporter
            .progress(self.done, self.delivered, self.failures.count);
        Ok(())
    }
}

/// Writes completions' bytes to stdout in submission order, holding those that arrive early.
#[derive(Default)]
struct RawOrder {
    next: usize,
    early: BTreeMap<usize, Option<Completion>>,
}

impl RawOrder {
    fn arrived(
        &mut self,
        tag: usize,
        completion: Option<Completion>,
        out: &mut Stdout,
    ) -> Result<(), Stop> {
        self.early.insert(tag, completion);
        while let Some(ready) = self.early.remove(&self.next) {
            if let Some(completion) = ready {
                out.write(completion.bytes())?;
            }
            self.next += 1;
        }
        Ok(())
    }
}

/// The file of each read, when `--output` or `--out-template` is given; every read must get
/// its own.
fn output_files(args: &ReadArgs, requests: &Requests) -> Result<Option<Vec<PathBuf>>, Stop> {
    if args.output.is_none() && args.out_template.is_none() {
        return Ok(None);
    }
    let template = args.out_template.as_deref().unwrap_or(DEFAULT_TEMPLATE);
    let mut files = Vec::with_capacity(requests.reads.len());
    let mut seen: HashMap<PathBuf, usize> = HashMap::new();
    for (tag, request) in requests.reads.iter().enumerate() {
        let name = render(template, tag, request, &requests.addresses[request.address])
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
    Ok(Some(files))
}

/// One read's file name from a template.
fn render(template: &str, tag: usize, request: &Request, address: &str) -> Result<String, String> {
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
            "offset" => out.push_str(&request.offset.to_string()),
            "length" => out.push_str(&request.length.to_string()),
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

/// Writes one read's file, creating its directory.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Stop> {
    let fail = |e: std::io::Error| Stop::Output(format!("cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    std::fs::write(path, bytes).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_each_read() {
        let request = Request {
            address: 0,
            offset: 16,
            length: 4,
        };
        assert_eq!(
            render(
                "{name}/{tag}-{offset}+{length}.bin",
                3,
                &request,
                "s3://b/dir/obj.bin?x=1"
            ),
            Ok("obj.bin/3-16+4.bin".to_owned())
        );
        assert_eq!(render("{tag}", 0, &request, "/x/"), Ok("0".to_owned()));
        assert!(
            render("{nope}", 0, &request, "/x")
                .unwrap_err()
                .contains("unknown placeholder")
        );
        assert!(render("{tag", 0, &request, "/x").is_err());
        assert_eq!(file_name("https://h/"), "h");
        assert_eq!(file_name("/a/.."), "object");
    }
}
