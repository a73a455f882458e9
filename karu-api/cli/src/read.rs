//! `karu read`: the reads of one command, streamed as they complete to stdout (raw bytes, in
//! order), to one file per read, or as JSON lines in completion order.
//!
//! A read longer than a piece (`http.part_size`, 8 MiB by default) is fetched in pieces,
//! written in order as they arrive, with at most the in-flight bound in memory (see
//! [`plan`](crate::plan)); its pieces are pinned to one version of the object by the ETag of a
//! stat made first (remote objects without a strong ETag are read in one piece). Ranges to the
//! end (`7:end`) and suffixes (`-500`) are placed with the same stat, and pinned likewise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_core::Stream;
use karu::{
    Batch, BatchOptions, BatchStats, Client, Completion, CredentialStats, Locator, Read, Status,
    Timing, TransportStats,
};

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::cli::ReadArgs;
use crate::files::{Ending, Finished, OutputFile, check_outputs};
use crate::out_template::{DEFAULT_TEMPLATE, check_template, output_files};
use crate::outcome::{FAILED, OK, Stop};
use crate::output::Stdout;
use crate::place::{FileVersion, Outcome, Placed, place};
use crate::plan::{Fetch, Pacer, Unit};
use crate::report::{Failures, Reporter};
use crate::requests::Requests;
use crate::{interrupt, locate, milliseconds, wait};

/// The piece length when `http.part_size` is 0 (never split by the engine): the CLI still
/// writes long reads as they arrive.
const DEFAULT_PIECE: u64 = 8 << 20;

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
    let started = Instant::now();
    let before = client.transport_stats();
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
    let to_files = args.output.is_some() || args.out_template.is_some();
    let template = args.out_template.as_deref().unwrap_or(DEFAULT_TEMPLATE);
    if to_files {
        check_template(template)?;
    }
    if !json && !to_files && requests.reads.len() > 1 && !args.concat {
        return Err(Stop::Usage(format!(
            "{} ranges would run together on stdout: give --concat to write their bytes one \
             after another in the order given, --output DIR for one file each, or --json",
            requests.reads.len()
        )));
    }
    // A bad address is a usage error: nothing is read.
    let locators: Vec<Locator> = requests
        .addresses
        .iter()
        .map(|address| locate(client, address, window))
        .collect::<Result<_, Stop>>()?;

    let global = client.snapshot().global();
    let piece = match global.http.part_size.0 {
        0 => DEFAULT_PIECE,
        size => size,
    };
    let max_span = args.max_span.unwrap_or(global.planner.max_span.0);
    let bound = max_span.max(2 * piece);
    let placed = place(
        client,
        &requests,
        &locators,
        args.if_match.as_deref(),
        piece,
    );
    let files = if to_files {
        Some(output_files(args, template, &requests, &placed)?)
    } else {
        None
    };
    let mut inputs: Vec<&Path> = locators.iter().filter_map(Locator::file_path).collect();
    if let Some(path) = args.ranges_from.as_deref().filter(|p| *p != "-") {
        inputs.push(Path::new(path));
    }
    check_outputs(
        &inputs,
        files.as_deref().unwrap_or_default(),
        json || !to_files,
    )?;
    if files.is_some() {
        interrupt::protect_output_files();
    }
    if let (Some(dir), Some(_)) = (&args.output, &files) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Stop::Output(format!("cannot create {}: {e}", dir.display())))?;
    }

    let total_bytes = placed.iter().map(|p| p.length).sum();
    let split = placed
        .iter()
        .any(|p| matches!(p.fetch, Fetch::Split { .. }));
    let mut run = Run {
        client,
        piece,
        requests: &requests,
        placed: &placed,
        locators: &locators,
        pacer: Pacer::new(placed.iter().map(|p| p.fetch).collect(), bound, piece),
        options: batch_options(args),
        if_match: args.if_match.as_deref(),
        states: placed.iter().map(|_| ReadState::default()).collect(),
        head: 0,
        raw: !json && files.is_none(),
        json,
        files,
        live: Vec::new(),
        failures: Failures::default(),
        reporter: Reporter::new(requests.reads.len() as u64, total_bytes, split),
        started,
        done: 0,
        delivered: 0,
        arrived: 0,
        stats: BatchStats::default(),
        timings: Timings::default(),
    };
    run.drive(out, failed)?;
    let wall = started.elapsed();
    let after = client.transport_stats();
    out.flush()?;
    for line in run.failures.tail() {
        run.reporter.line(&line);
    }
    if json {
        let line = run.summary(wall, &before, &after, &client.credential_stats());
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

/// One read of the command, as its pieces arrive.
#[derive(Default)]
struct ReadState {
    /// The next piece to process, in order.
    next: u32,
    /// Pieces that arrived before their turn.
    held: BTreeMap<u32, Arrival>,
    /// Bytes delivered so far.
    received: u64,
    /// Set once the read has ended.
    outcome: Option<Outcome>,
    /// Its file, with `--output`, once bytes (or the end) arrived.
    file: Option<OutputFile>,
    /// The hash of its bytes so far, with `--json`.
    hasher: Option<Sha256>,
    timing: ReadTiming,
    /// The live batches carrying its pieces, to cancel when it ends early.
    batches: Vec<u64>,
}

/// What arrived for a piece.
enum Arrival {
    /// A completion, from the batch submitted at `submitted` (after the command started).
    Done {
        completion: Completion,
        submitted: Duration,
    },
    /// A read that needs no request.
    Settled(Outcome),
}

/// A read's timing over its pieces, from the command's start.
#[derive(Debug, Default, Clone, Copy)]
struct ReadTiming {
    first_byte: Option<Duration>,
    done: Duration,
    attempts: u32,
    transfer: Option<u64>,
    transfer_bytes: u64,
    pieces: u32,
}

impl ReadTiming {
    fn add(&mut self, timing: &Timing, submitted: Duration) {
        if let Some(first) = timing.first_byte() {
            let first = submitted + first;
            self.first_byte = Some(self.first_byte.map_or(first, |f| f.min(first)));
        }
        self.done = self.done.max(submitted + timing.done());
        self.attempts += timing.attempts();
        if self.transfer.is_none() {
            self.transfer = timing.transfer();
        }
        self.transfer_bytes += timing.transfer_bytes();
        self.pieces += 1;
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "first_byte_ms": self.first_byte.map(milliseconds),
            "done_ms": milliseconds(self.done),
            "attempts": self.attempts,
            "transfer": self.transfer,
            "transfer_bytes": self.transfer_bytes,
            "pieces": self.pieces,
        })
    }
}

/// A batch in flight.
struct Live {
    id: u64,
    batch: Batch,
    /// For a piece: the read and its index; for a group, `None` (each completion's tag is its
    /// read).
    piece: Option<(usize, u32)>,
    /// When it was submitted, from the command's start.
    submitted: Duration,
}

/// The state of one streamed command.
struct Run<'a> {
    client: &'a Client,
    /// The length of a piece of a split read.
    piece: u64,
    requests: &'a Requests,
    placed: &'a [Placed],
    locators: &'a [Locator],
    pacer: Pacer,
    options: BatchOptions,
    if_match: Option<&'a str>,
    states: Vec<ReadState>,
    /// Raw output: the read whose bytes go to stdout now (every earlier one is written).
    head: usize,
    raw: bool,
    json: bool,
    /// The file of each read, with `--output` or `--out-template`.
    files: Option<Vec<PathBuf>>,
    live: Vec<Live>,
    failures: Failures,
    reporter: Reporter,
    started: Instant,
    done: u64,
    delivered: u64,
    /// Bytes arrived (for the progress bar), in order or not.
    arrived: u64,
    /// The batches' figures, added up as each drains.
    stats: BatchStats,
    timings: Timings,
}

impl Run<'_> {
    /// The JSON line that ends `--json` output: the figures of the command's batches.
    fn summary(
        &mut self,
        wall: Duration,
        before: &TransportStats,
        after: &TransportStats,
        credentials: &CredentialStats,
    ) -> serde_json::Value {
        let stats = self.stats;
        json!({
            "batch": {
                "reads": self.requests.reads.len(),
                "rejected": stats.rejected,
                "failed": self.failures.count,
                "transfers": stats.transfers,
                "requested_bytes": stats.requested_bytes,
                "planned_bytes": stats.planned_bytes,
                "delivered_bytes": self.delivered,
                "fetched_bytes": stats.fetched_bytes,
                "wall_ms": milliseconds(wall),
                "transport": {
                    "requests": after.requests - before.requests,
                    "body_bytes": after.body_bytes - before.body_bytes,
                    "retries": after.retries - before.retries,
                    "hedges": after.hedges - before.hedges,
                    "hedges_won": after.hedges_won - before.hedges_won,
                },
                "timings": self.timings.summary(),
                "counters": {
                    "transport": {
                        "requests": after.requests,
                        "body_bytes": after.body_bytes,
                        "retries": after.retries,
                        "hedges": after.hedges,
                        "hedges_won": after.hedges_won,
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
        })
    }

    /// Submits and drains until every read has ended.
    fn drive(&mut self, out: &mut Stdout, failed: &mut bool) -> Result<(), Stop> {
        let waker = wait::waker();
        let mut cx = Context::from_waker(&waker);
        let mut next_id = 0u64;
        loop {
            while let Some(unit) = self.pacer.poll_unit() {
                if let Unit::Settled(read) = unit {
                    let outcome = self.placed[read]
                        .settled
                        .clone()
                        .unwrap_or_else(|| Outcome::failed(Status::Internal, "no outcome"));
                    self.arrive(read, 0, Arrival::Settled(outcome));
                    self.advance(read, out, failed)?;
                    continue;
                }
                let live = self.submit(unit, next_id);
                self.live.push(live);
                next_id += 1;
            }
            let mut progressed = false;
            let mut at = 0;
            while at < self.live.len() {
                match Pin::new(&mut self.live[at].batch).poll_next(&mut cx) {
                    Poll::Ready(Some(completion)) => {
                        progressed = true;
                        let live = &self.live[at];
                        let (read, index) = live.piece.unwrap_or((completion.tag() as usize, 0));
                        let submitted = live.submitted;
                        self.arrive(
                            read,
                            index,
                            Arrival::Done {
                                completion,
                                submitted,
                            },
                        );
                        self.advance(read, out, failed)?;
                    }
                    Poll::Ready(None) => {
                        progressed = true;
                        let live = self.live.swap_remove(at);
                        add_stats(&mut self.stats, &live.batch.stats());
                    }
                    Poll::Pending => at += 1,
                }
            }
            if self.live.is_empty() && self.pacer.is_done() {
                return Ok(());
            }
            if !progressed {
                // Nothing ready: show what arrived so far, then wait to be woken.
                out.flush()?;
                wait::park(Duration::from_millis(200));
            }
        }
    }

    /// Submits a group or a piece as a batch of its own.
    fn submit(&mut self, unit: Unit, id: u64) -> Live {
        let submitted = self.started.elapsed();
        let (reads, piece): (Vec<Read<'static>>, _) = match unit {
            Unit::Settled(_) => (Vec::new(), None),
            Unit::Group(members) => {
                let reads = members
                    .iter()
                    .map(|&read| {
                        self.states[read].batches.push(id);
                        let placed = &self.placed[read];
                        self.read_of(read, placed.offset.unwrap_or(0), placed.length)
                            .tag(read as u64)
                    })
                    .collect();
                (reads, None)
            }
            Unit::Piece {
                read,
                index,
                offset,
                length,
            } => {
                self.states[read].batches.push(id);
                (
                    vec![self.read_of(read, offset, length)],
                    Some((read, index)),
                )
            }
        };
        Live {
            id,
            batch: self.client.submit_with(reads, &self.options),
            piece,
            submitted,
        }
    }

    /// The read of `length` bytes at `offset` of read `read`'s object, with its condition.
    fn read_of(&self, read: usize, offset: u64, length: u64) -> Read<'static> {
        let placed = &self.placed[read];
        let locator = &self.locators[self.requests.reads[read].address];
        let read = Read::new(locator, offset, length);
        match placed.if_match.as_deref().or(self.if_match) {
            Some(etag) => read.if_match(etag.to_owned()),
            None => read,
        }
    }

    /// Piece `index` of read `read` arrived.
    fn arrive(&mut self, read: usize, index: u32, arrival: Arrival) {
        if let Arrival::Done { completion, .. } = &arrival {
            self.arrived += completion.bytes_received();
        }
        let state = &mut self.states[read];
        if state.outcome.is_some() {
            // A piece of a read that already ended (cancelled, or past its end).
            self.pacer.handle_consumed(self.piece_bytes(read, index));
            return;
        }
        state.held.insert(index, arrival);
    }

    /// The bytes the pacer counted for piece `index` of `read`.
    fn piece_bytes(&self, read: usize, index: u32) -> u64 {
        match self.placed[read].fetch {
            Fetch::Split { length, .. } => {
                let start = u64::from(index) * self.piece;
                self.piece.min(length.saturating_sub(start))
            }
            Fetch::Whole { length } => length,
            Fetch::Settled => 0,
        }
    }

    /// Processes the pieces of `read` that are next in order; with raw output, only for the
    /// read being written, then the reads after it.
    fn advance(&mut self, read: usize, out: &mut Stdout, failed: &mut bool) -> Result<(), Stop> {
        if self.raw && read != self.head {
            return Ok(());
        }
        let mut read = read;
        loop {
            self.process(read, out, failed)?;
            if !self.raw || self.states[read].outcome.is_none() {
                return Ok(());
            }
            // The head ended: the next read's bytes may go now.
            self.head += 1;
            read = self.head;
            if read >= self.states.len() {
                return Ok(());
            }
        }
    }

    fn process(&mut self, read: usize, out: &mut Stdout, failed: &mut bool) -> Result<(), Stop> {
        let pieces = self.pacer.pieces_of(read);
        loop {
            let state = &mut self.states[read];
            if state.outcome.is_some() {
                return Ok(());
            }
            let index = state.next;
            let Some(arrival) = state.held.remove(&index) else {
                return Ok(());
            };
            state.next += 1;
            let split = matches!(self.placed[read].fetch, Fetch::Split { .. });
            let consumed = self.piece_bytes(read, index);
            match arrival {
                Arrival::Settled(outcome) => {
                    self.end(read, outcome, out, failed)?;
                }
                Arrival::Done {
                    completion,
                    submitted,
                } => {
                    self.states[read].timing.add(completion.timing(), submitted);
                    if let Some(changed) = self.local_change(read) {
                        self.pacer.handle_piece(read, false);
                        self.pacer.handle_consumed(consumed);
                        self.end(read, changed, out, failed)?;
                        continue;
                    }
                    let whole = completion.is_ok();
                    self.deliver(read, completion.bytes(), out)?;
                    if split {
                        self.pacer.handle_piece(read, whole);
                    }
                    self.pacer.handle_consumed(consumed);
                    if !whole {
                        let outcome = Outcome {
                            status: completion.status(),
                            message: completion.error().map(|e| e.message().to_owned()),
                        };
                        self.end(read, outcome, out, failed)?;
                    } else if index + 1 >= pieces {
                        self.end(read, Outcome::ok(), out, failed)?;
                    }
                }
            }
        }
    }

    /// For a local file read in pieces, whether the file is still the version the read
    /// began with: the failed outcome if not. A piece is checked when it arrives, so every
    /// piece delivered was read before any change the check did not see.
    fn local_change(&self, read: usize) -> Option<Outcome> {
        let version = self.placed[read].version?;
        let locator = &self.locators[self.requests.reads[read].address];
        let path = locator.file_path()?;
        match FileVersion::of(path) {
            Some(now) if now == version => None,
            _ => Some(version.changed(locator)),
        }
    }

    /// Bytes of `read`, in order: to stdout, its file, its hash.
    fn deliver(&mut self, read: usize, bytes: &[u8], out: &mut Stdout) -> Result<(), Stop> {
        let state = &mut self.states[read];
        state.received += bytes.len() as u64;
        self.delivered += bytes.len() as u64;
        if self.raw {
            out.write(bytes)?;
        }
        if self.json {
            state.hasher.get_or_insert_with(Sha256::new).update(bytes);
        }
        if let Some(files) = &self.files {
            state
                .file
                .get_or_insert_with(|| OutputFile::new(files[read].clone()))
                .write(bytes)?;
        }
        self.reporter
            .progress(self.done, self.arrived, self.failures.count);
        Ok(())
    }

    /// `read` ended with `outcome`: its pieces still in flight are cancelled, then its file, its
    /// error line, its JSON line, the counters.
    fn end(
        &mut self,
        read: usize,
        outcome: Outcome,
        out: &mut Stdout,
        failed: &mut bool,
    ) -> Result<(), Stop> {
        let state = &mut self.states[read];
        state.outcome = Some(outcome.clone());
        let held: Vec<u32> = std::mem::take(&mut state.held).into_keys().collect();
        let received = state.received;
        let timing = (state.timing.pieces > 0).then_some(state.timing);
        let hasher = state.hasher.take();
        let file = state.file.take();
        let batches = std::mem::take(&mut state.batches);
        for live in self.live.iter().filter(|l| batches.contains(&l.id)) {
            if live.piece.is_some() {
                live.batch.cancel();
            }
        }
        for index in held {
            self.pacer.handle_consumed(self.piece_bytes(read, index));
        }
        self.done += 1;
        if let Some(timing) = &timing {
            self.timings.add(timing);
        }
        if outcome.status != Status::Ok {
            *failed = true;
        }
        let finished = match (&self.files, outcome.status) {
            (None, _) => Finished::default(),
            (Some(files), status) => {
                let ending = match status {
                    Status::Ok => Ending::Whole,
                    Status::RangeNotSatisfiable => Ending::Prefix,
                    _ => Ending::Failed,
                };
                let file = file.unwrap_or_else(|| OutputFile::new(files[read].clone()));
                file.finish(ending)?
            }
        };
        if outcome.status != Status::Ok {
            self.report_failure(read, &outcome, received, &finished.note);
        }
        if self.json {
            let line = self.json_line(read, &outcome, received, hasher, finished, timing);
            out.line(&line.to_string())?;
        }
        self.reporter
            .progress(self.done, self.arrived, self.failures.count);
        Ok(())
    }

    /// The stderr line of a failed read, unless one of its kind was printed; `note` says what
    /// it left of its files.
    fn report_failure(&mut self, read: usize, outcome: &Outcome, received: u64, note: &str) {
        let request = self.requests.reads[read];
        let status = outcome.status;
        let message = outcome.message.as_deref().unwrap_or_default();
        if !self.failures.record(status, message) {
            if !note.is_empty() {
                self.failures.notes_unsaid += 1;
            }
            return;
        }
        let place = if self.requests.addresses.len() > 1 {
            let address = &self.requests.addresses[request.address];
            format!("{address} {}", request.range)
        } else {
            request.range.to_string()
        };
        let delivered = if received > 0 || status == Status::RangeNotSatisfiable {
            format!(" ({received} bytes delivered)")
        } else {
            String::new()
        };
        self.reporter.line(&format!(
            "karu: read {read} ({place}): {status}: {message}{delivered}{note}"
        ));
    }

    /// The JSON line of a read that ended.
    fn json_line(
        &self,
        read: usize,
        outcome: &Outcome,
        received: u64,
        hasher: Option<Sha256>,
        finished: Finished,
        timing: Option<ReadTiming>,
    ) -> serde_json::Value {
        let request = self.requests.reads[read];
        let placed = &self.placed[read];
        let status = outcome.status;
        json!({
            "tag": read,
            "address": self.requests.addresses[request.address],
            "range": request.range.to_string(),
            "offset": placed.offset,
            "length": (placed.settled.is_none() || status == Status::Ok).then_some(placed.length),
            "status": status.name(),
            "bytes_received": received,
            "error": outcome.message,
            "sha256": hex::encode(hasher.unwrap_or_default().finalize()),
            "file": finished.file.map(|p| p.display().to_string()),
            "earlier_file": finished.earlier.map(|p| p.display().to_string()),
            "timing": timing.map(|t| t.json()),
        })
    }
}

/// Adds one batch's figures to the command's.
fn add_stats(total: &mut BatchStats, batch: &BatchStats) {
    total.reads += batch.reads;
    total.rejected += batch.rejected;
    total.transfers += batch.transfers;
    total.requested_bytes += batch.requested_bytes;
    total.fetched_bytes += batch.fetched_bytes;
    total.planned_bytes += batch.planned_bytes;
    total.hedges += batch.hedges;
}

/// The reads' timings, in milliseconds from the command's start.
#[derive(Default)]
struct Timings {
    done_ms: Vec<f64>,
    first_byte_ms: Vec<f64>,
    attempts: u64,
}

impl Timings {
    fn add(&mut self, timing: &ReadTiming) {
        self.done_ms.push(milliseconds(timing.done));
        if let Some(first) = timing.first_byte {
            self.first_byte_ms.push(milliseconds(first));
        }
        self.attempts += u64::from(timing.attempts);
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

fn quantiles(values: &mut [f64]) -> serde_json::Value {
    if values.is_empty() {
        return serde_json::Value::Null;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    json!({"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1.0)})
}
