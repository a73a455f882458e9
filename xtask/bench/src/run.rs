//! Running a workload: one mock server, every method on it (each one's cold batch on a new
//! client, then rounds of steady batches, one per method a round), counting from the server's
//! request log, checking every byte, and printing the tables.

use std::collections::HashSet;
use std::time::Duration;

use karu::BatchOptions;
use karu_testkit::{MockServer, fill_pattern};

use crate::methods::{self, Context, KaruFigures, Method, Server, Session};
use crate::report::{Align, Table, bytes, count};
use crate::workload::{Shape, Workload};
use crate::{Bandwidth, CpuOptions, Options};

/// The link model's bandwidth: 1 Gbit/s.
pub(crate) const LINK: u64 = 125_000_000;

/// Above this estimated time the sequential client runs only when asked (`--sequential`).
const SEQUENTIAL_BUDGET: Duration = Duration::from_secs(30);

/// One batch of one method, as the server saw it.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) wall: Duration,
    /// Requests in the server's log for this batch.
    pub(crate) requests: u64,
    /// Distinct TCP connections that carried them.
    connections: usize,
    /// Connections the server accepted during the batch.
    new_connections: u64,
    /// The most requests the server had in flight at once.
    peak: u64,
    /// Body bytes the server sent for them.
    pub(crate) bytes_sent: u64,
    pub(crate) karu: Option<KaruFigures>,
    pub(crate) check: Check,
    /// When each piece completed, from the batch's start (empty: every piece at the wall).
    pub(crate) done: Vec<Duration>,
    /// CPU time of the client during the batch: of every thread of this process but the
    /// mock's, or of the child process that made the batch (curl).
    pub(crate) client_cpu: Duration,
}

/// Every piece checked against the pattern of the virtual objects.
#[derive(Debug, Default)]
pub(crate) struct Check {
    pub(crate) ok: usize,
    pub(crate) wrong: usize,
    pub(crate) failed: usize,
    pub(crate) first_failure: Option<String>,
    /// The bytes went elsewhere (curl's, to `/dev/null`): each piece was counted in the
    /// server's log ([`counted`]), not checked.
    pub(crate) counted: bool,
}

impl Check {
    pub(crate) fn passed(&self) -> bool {
        self.wrong == 0 && self.failed == 0
    }

    pub(crate) fn text(&self) -> String {
        match (self.wrong, self.failed) {
            (0, 0) if self.counted => "counted".into(),
            (0, 0) => "ok".into(),
            (0, f) => format!("{f} FAILED"),
            (w, 0) => format!("{w} WRONG"),
            (w, f) => format!("{w} WRONG, {f} FAILED"),
        }
    }
}

/// A method's cold batch and its steady ones.
#[derive(Debug)]
pub(crate) struct Measured {
    pub(crate) method: Method,
    pub(crate) cold: Run,
    pub(crate) steady: Vec<Run>,
}

impl Measured {
    /// The steady run of median wall time.
    fn steady(&self) -> Option<&Run> {
        let mut runs: Vec<&Run> = self.steady.iter().collect();
        runs.sort_by_key(|r| r.wall);
        runs.get(runs.len() / 2).copied()
    }

    /// The run reported for `phase`.
    pub(crate) fn pick(&self, phase: Phase) -> Option<&Run> {
        match phase {
            Phase::Cold => Some(&self.cold),
            Phase::Steady => self.steady(),
        }
    }
}

/// A client's first batch, or a later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Cold,
    Steady,
}

impl Phase {
    /// The phase's name in `all`'s record.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Cold => "cold",
            Phase::Steady => "steady",
        }
    }
}

/// What a run in reverse order (`--peers-first`) adds to its scenario's tag in `all`'s record.
pub(crate) const PEERS_FIRST: &str = " peers-first";

/// One network condition.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    latency: Duration,
    bandwidth: Option<u64>,
    /// The methods run in reverse order, the peers first and Karu last (`--peers-first`).
    peers_first: bool,
}

impl Scenario {
    /// The scenario's name in `all`'s record.
    fn tag(&self) -> String {
        let network = match self.bandwidth {
            None => "loopback",
            Some(_) => "link",
        };
        let order = if self.peers_first { PEERS_FIRST } else { "" };
        format!("{network}{}{order}", crate::transport::current().tag())
    }

    fn title(&self) -> String {
        let title = match self.bandwidth {
            None => format!(
                "loopback (latency {} ms, no bandwidth cap)",
                ms(self.latency)
            ),
            Some(b) => format!(
                "link (latency {} ms, {} shared by all connections)",
                ms(self.latency),
                rate(b)
            ),
        };
        if self.peers_first {
            format!("{title}, the peers first and Karu last")
        } else {
            title
        }
    }
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn rate(bytes_per_sec: u64) -> String {
    if bytes_per_sec.is_multiple_of(125_000_000) {
        format!("{} Gbit/s", bytes_per_sec / 125_000_000)
    } else if bytes_per_sec.is_multiple_of(125_000) {
        format!("{} Mbit/s", bytes_per_sec / 125_000)
    } else {
        format!("{} B/s", count(bytes_per_sec))
    }
}

/// The shared set-up of a workload: server with its objects, runtime, Karu's settings.
pub(crate) struct Bench {
    pub(crate) server: MockServer,
    /// Where the sessions find it.
    target: Server,
    pub(crate) workload: Workload,
    runtime: tokio::runtime::Runtime,
    pub(crate) concurrency: usize,
}

impl Bench {
    pub(crate) fn start(workload: Workload, latency: Duration) -> Result<Bench, String> {
        Bench::start_with(workload, latency, false, false)
    }

    fn start_with(
        workload: Workload,
        latency: Duration,
        tls: bool,
        http2: bool,
    ) -> Result<Bench, String> {
        let server = MockServer::builder()
            .latency(latency)
            .tls(tls)
            .http2(http2)
            .start()
            .map_err(|e| format!("cannot start the mock server: {e}"))?;
        crate::transport::set(crate::transport::Transport::for_server(&server, http2)?);
        for o in &workload.objects {
            server.insert_virtual(&o.path, o.size);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-rt")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
        let probe = methods::karu_client()?;
        let g = probe.snapshot().global();
        println!(
            "Karu settings: io_threads {}, concurrency {}, planner max_gap {}, max_span {}, max_parts {}, max_amplification {}, trade {:?}",
            g.io_threads,
            g.concurrency,
            bytes(g.planner.max_gap.0),
            bytes(g.planner.max_span.0),
            g.planner.max_parts,
            g.planner.max_amplification,
            g.planner.trade
        );
        let concurrency = g.concurrency;
        Ok(Bench {
            target: Server::of(&server),
            server,
            workload,
            runtime,
            concurrency,
        })
    }

    fn context(&self, batch_options: BatchOptions) -> Context<'_> {
        Context {
            server: &self.target,
            workload: &self.workload,
            runtime: &self.runtime,
            concurrency: self.concurrency,
            batch_options,
        }
    }

    /// Every method of `plan` on a new client of its own: first each one's cold batch, in the
    /// plan's order, then rounds of steady batches, one per method still due one, every other
    /// round in reverse order. A steady median then comes from batches spread over the same
    /// minutes for every method, so a host that slows down or speeds up midway (these shared
    /// machines do, by tens of percent) moves every method's median alike, where measuring one
    /// method's batches after another's put the whole drift between them.
    ///
    /// With `cold_clients` above 1, each method's cold figure is the median of the first
    /// batches of that many new clients, made in rounds in the plan's order (the last client
    /// goes on to the steady batches); a method measured once (no steady runs) has one.
    pub(crate) fn measure_all(
        &self,
        plan: Vec<(Method, usize, BatchOptions)>,
        cold_clients: usize,
    ) -> Result<Vec<Measured>, String> {
        let clients = |runs: usize| if runs == 0 { 1 } else { cold_clients.max(1) };
        let mut sessions: Vec<Option<Box<dyn Session + '_>>> = plan.iter().map(|_| None).collect();
        let mut colds: Vec<Vec<Run>> = plan.iter().map(|_| Vec::new()).collect();
        for round in 0..plan.iter().map(|p| clients(p.1)).max().unwrap_or(0) {
            for (i, &(method, runs, options)) in plan.iter().enumerate() {
                if round >= clients(runs) {
                    continue;
                }
                // The previous client of this method is dropped before the next one opens.
                sessions[i] = None;
                let mut session = methods::open(method, self.context(options))?;
                colds[i].push(self.one(&mut *session)?);
                sessions[i] = Some(session);
            }
        }
        let mut sessions: Vec<Box<dyn Session + '_>> = sessions
            .into_iter()
            .collect::<Option<_>>()
            .ok_or("a method without a client")?;
        let mut all = Vec::with_capacity(plan.len());
        for (&(method, _, _), cold) in plan.iter().zip(colds) {
            all.push(Measured {
                method,
                cold: reported(cold, |r| !r.check.passed(), |r| r.wall).ok_or("no cold batch")?,
                steady: Vec::new(),
            });
        }
        let rounds = plan.iter().map(|&(_, runs, _)| runs).max().unwrap_or(0);
        for round in 0..rounds {
            for i in round_order(round, plan.len()) {
                if round < plan[i].1 {
                    let run = self.one(&mut *sessions[i])?;
                    all[i].steady.push(run);
                }
            }
        }
        Ok(all)
    }

    fn one(&self, session: &mut dyn Session) -> Result<Run, String> {
        self.server.take_requests();
        self.server.reset_max_in_flight();
        let accepted = self.server.connections_accepted();
        session.prepare();
        let cpu_before = client_cpu();
        let outcome = session.run()?;
        let own_cpu = client_cpu().saturating_sub(cpu_before);
        let log = self.server.take_requests();
        let new_connections = self.server.connections_accepted() - accepted;
        let peak = self.server.max_in_flight();
        let connections: HashSet<u64> = log.iter().map(|r| r.connection).collect();
        let (check, client_cpu) = match &outcome.child {
            None => (verify(&self.workload, &outcome.pieces), own_cpu),
            Some(child) => {
                let mut check = counted(&self.workload, &log);
                if let Some(error) = &child.error {
                    check.first_failure = Some(error.clone());
                }
                (check, child.cpu)
            }
        };
        drop(outcome.pieces);
        if self.workload.requested_bytes() >= LARGE {
            give_back_freed_memory();
        }
        Ok(Run {
            wall: outcome.wall,
            requests: log.len() as u64,
            connections: connections.len(),
            new_connections,
            peak,
            bytes_sent: log.iter().map(|r| r.body_bytes).sum(),
            karu: outcome.karu,
            check,
            client_cpu,
            done: outcome.done,
        })
    }
}

/// New clients (or stores) per method whose first batches make a cold figure (their median,
/// [`reported`]; see [`Bench::measure_all`] and `parquet`'s queries). One first batch swings by
/// more than the 3 % a tie allows (`xtask/bench/README.md` gives the runs that showed it).
/// `tensors` keeps one (each of its cold batches
/// moves 2.8 GiB and its memory is readied instead, see [`LARGE`]), and so do `cpu` and
/// `tail`, whose first batches are compared as the first in the process.
pub(crate) const COLD_CLIENTS: usize = 3;

/// The new clients whose first batches make `workload`'s cold figures.
fn cold_clients(workload: &Workload) -> usize {
    if workload.requested_bytes() >= LARGE {
        1
    } else {
        COLD_CLIENTS
    }
}

/// What a phase reports of its batches (or queries): one that `failed` if any (a median must
/// not hide it), else the median by `wall` (of an even number, the upper one).
pub(crate) fn reported<T>(
    mut batches: Vec<T>,
    failed: impl Fn(&T) -> bool,
    wall: impl Fn(&T) -> Duration,
) -> Option<T> {
    if let Some(i) = batches.iter().position(failed) {
        return Some(batches.swap_remove(i));
    }
    batches.sort_by_key(wall);
    (!batches.is_empty()).then(|| batches.swap_remove(batches.len() / 2))
}

/// The order of `methods` methods in steady round `round`: the plan's order in even rounds,
/// reversed in odd ones, so that no method always runs right after the same other one (the
/// first batch after another method's pays for what that one left behind: caches, memory
/// handed back, the server's state).
pub(crate) fn round_order(round: usize, methods: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..methods).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// CPU time run so far by this process's live threads other than the mock server's
/// (`kmock-*`), from each thread's scheduler statistics (nanoseconds, user and system). Wall
/// time on a shared two-core machine swings with the host; the CPU a client spends swings far
/// less, and on loopback, where client and mock share the cores, it is what the wall follows.
/// A thread that ends within a batch is not counted: every method here keeps its threads for
/// the whole run.
fn client_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut total = 0u64;
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.starts_with("kmock") {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// A workload whose batches hold at least this much has its memory handed back after each
/// batch ([`give_back_freed_memory`]) and readied before the first ([`ready_memory`]). The
/// others keep glibc's recycling: handing back a batch's few megabytes would add the same
/// page faults to every method's batch, and `cpu`'s ratio to plain hyper would drift towards
/// 1 with them.
const LARGE: u64 = 1 << 30;

/// Hands the memory freed by a batch's pieces back to the kernel before the next batch.
///
/// glibc keeps freed memory in the arena of the thread that allocated it, for that thread's
/// next allocations; methods allocate on threads of their own (Karu's I/O threads, the bench's
/// runtime, the main thread), so what one method's batch freed stayed with the process but out
/// of the next method's reach, and that batch took fresh memory on top of it. On `tensors` (2.8
/// GiB a batch) the process then outgrew the memory this VM keeps ready and the batch paid for
/// memory the host had to find (see [`ready_memory`]), and was several times slower than after a
/// batch of its own. Handed back, every batch starts
/// from the same state: its destinations are fresh memory whatever ran before it, as in a
/// process of its own. `local` hands back after every batch too (its allocated-buffer rows
/// measure what allocating costs).
pub(crate) fn give_back_freed_memory() {
    // SAFETY: `malloc_trim` only returns free memory of glibc's arenas to the kernel; no
    // allocation is live in what it returns.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Writes every page of `bytes` of fresh memory once, then gives it back; returns how long it
/// took.
///
/// On this VM, memory the guest has not used lately is several times slower to fault in than
/// memory it just freed (the host has to find it). A workload whose batches fill gigabytes
/// (`tensors`: 2.8 GiB a batch) would otherwise measure, in its first batch, which memory the
/// kernel happened to hand out. Readied, the first batch,
/// like every later one, takes memory just freed (its pages still fault in: it is fresh to
/// the process).
fn ready_memory(bytes: u64) -> Duration {
    const PAGE: usize = 4096;
    let started = std::time::Instant::now();
    let Ok(len) = usize::try_from(bytes) else {
        return Duration::ZERO;
    };
    let mut room: Vec<u8> = Vec::new();
    if room.try_reserve_exact(len).is_err() {
        return Duration::ZERO;
    }
    let base = room.as_mut_ptr();
    for at in (0..len).step_by(PAGE) {
        // SAFETY: `at < len`, the reserved capacity; a byte written and never read as a
        // value of the vector (its length stays 0).
        unsafe { base.add(at).write_volatile(1) };
    }
    drop(room);
    started.elapsed()
}

/// Compares every piece with the pattern of its object.
pub(crate) fn verify(workload: &Workload, pieces: &[Result<bytes::Bytes, String>]) -> Check {
    let mut check = Check::default();
    let mut scratch = vec![0u8; 1 << 20];
    for (piece, got) in workload.pieces.iter().zip(pieces) {
        match got {
            Err(message) => {
                check.failed += 1;
                check.first_failure.get_or_insert_with(|| message.clone());
            }
            Ok(data) => {
                let mut same = data.len() as u64 == piece.length;
                let mut offset = piece.offset;
                for chunk in data.chunks(scratch.len()) {
                    if !same {
                        break;
                    }
                    let expected = &mut scratch[..chunk.len()];
                    fill_pattern(offset, expected);
                    same = expected == chunk;
                    offset += chunk.len() as u64;
                }
                if same {
                    check.ok += 1;
                } else {
                    check.wrong += 1;
                }
            }
        }
    }
    check.failed += workload.pieces.len().saturating_sub(pieces.len());
    check
}

/// Counts every piece of `workload` in the server's `log`, for a client whose bytes went
/// elsewhere (curl's, to `/dev/null`): a piece is counted once a `206` answer to a GET of its
/// object's path, for its exact range, was sent whole (each answer counts for one piece); the
/// others failed. The bytes themselves are not checked.
pub(crate) fn counted(workload: &Workload, log: &[karu_testkit::RequestRecord]) -> Check {
    let mut answered: std::collections::HashMap<(&str, u64, u64), usize> =
        std::collections::HashMap::new();
    for r in log {
        let Some((first, last)) = r.byte_range else {
            continue;
        };
        if r.method == "GET" && r.status == 206 && r.body_bytes == last + 1 - first {
            *answered.entry((r.path.as_str(), first, last)).or_default() += 1;
        }
    }
    let mut check = Check {
        counted: true,
        ..Check::default()
    };
    for piece in &workload.pieces {
        let path = workload.objects[piece.object].path.as_str();
        let last = piece.offset + piece.length - 1;
        match answered.get_mut(&(path, piece.offset, last)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                check.ok += 1;
            }
            _ => {
                check.failed += 1;
                check.first_failure.get_or_insert_with(|| {
                    format!(
                        "no whole 206 answer for bytes={}-{last} of {path} in the server's log",
                        piece.offset
                    )
                });
            }
        }
    }
    check
}

/// Client CPU seconds per GiB of `bytes` (`None` for no bytes).
pub(crate) fn cpu_per_gib(cpu: Duration, bytes: u64) -> Option<f64> {
    (bytes > 0).then(|| cpu.as_secs_f64() * f64::from(1u32 << 30) / bytes as f64)
}

/// [`cpu_per_gib`] as a table's cell: three decimals, or "—".
fn cpu_per_gib_text(cpu: Duration, bytes: u64) -> String {
    cpu_per_gib(cpu, bytes).map_or_else(|| "—".into(), |x| format!("{x:.3}"))
}

/// `cargo xtask bench scattered|scattered-10k|clustered|tensors|many-objects|ends|http`.
pub(crate) fn reads(shape: Shape, options: &Options, link_too: bool) -> Result<(), String> {
    let latency = Duration::from_millis(options.latency_ms);
    let scenarios: Vec<Scenario> = match options.bandwidth {
        Some(Bandwidth::None) => vec![None],
        Some(Bandwidth::Capped(b)) => vec![Some(b)],
        None if link_too => vec![None, Some(LINK)],
        None => vec![None],
    }
    .into_iter()
    .map(|bandwidth| Scenario {
        latency,
        bandwidth,
        peers_first: options.peers_first,
    })
    .collect();
    let workload = Workload::new(shape, options.seed);
    println!(
        "karu-bench {}: {}; requested {} per batch; seed {}",
        workload.name,
        workload.description,
        bytes(workload.requested_bytes()),
        options.seed
    );
    let bench = Bench::start_with(workload, latency, options.tls, options.http2)?;
    println!("Transport: {}", crate::transport::current().describe());
    if bench.workload.requested_bytes() >= LARGE {
        let room = bench.workload.requested_bytes().saturating_mul(2);
        let took = ready_memory(room);
        println!(
            "Memory readied before the first batch: {} touched and given back in {} ms (see \
             `ready_memory`)",
            bytes(room),
            ms(took)
        );
    }
    println!(
        "Columns: requests, conns (distinct connections; in brackets those opened during the batch), \
         peak (most requests in flight at once) and bytes sent come from the server; \
         fetched/requested = bytes sent / bytes the reads asked for; vs Karu = wall / Karu's wall; \
         client CPU = CPU time of every thread but the mock server's during the batch; CPU s/GiB \
         = client CPU seconds per GiB delivered (the {} the reads asked for, whatever the \
         server sent).",
        bytes(bench.workload.requested_bytes())
    );
    let mut failed = false;
    for scenario in &scenarios {
        bench.server.set_latency(scenario.latency);
        bench.server.set_bandwidth(scenario.bandwidth);
        println!();
        println!("== {} · {} ==", bench.workload.name, scenario.title());
        let mut skipped = Vec::new();
        let mut missing = Vec::new();
        let mut plan = methods_for(
            &bench.workload,
            scenario,
            options,
            bench.concurrency,
            &mut skipped,
            &mut missing,
        );
        if options.peers_first {
            plan.reverse();
        }
        let all = bench.measure_all(
            plan.into_iter()
                .map(|(method, runs)| (method, runs, BatchOptions::new()))
                .collect(),
            cold_clients(&bench.workload),
        )?;
        failed |= print_scenario(
            &bench,
            scenario,
            &all,
            options.runs,
            options.all_runs,
            &skipped,
            &missing,
        );
    }
    if failed {
        Err("some reads failed or delivered wrong bytes (see the check column)".into())
    } else {
        Ok(())
    }
}

/// The methods to measure and how many steady runs each gets; notes on the skipped ones, and
/// the methods that cannot be measured here with why (`missing`: rows of their own).
fn methods_for(
    workload: &Workload,
    scenario: &Scenario,
    options: &Options,
    concurrency: usize,
    skipped: &mut Vec<String>,
    missing: &mut Vec<(String, String)>,
) -> Vec<(Method, usize)> {
    let mut plan = vec![(Method::Karu, options.runs)];
    if workload.name == "tensors" {
        // Where destinations are large, what allocating them costs shows beside reading into
        // storage the caller already holds.
        plan.push((Method::KaruCaller, options.runs));
        // The reference a user knows, on the same ranges of the same object.
        let curl = Method::Curl {
            in_flight: concurrency,
        };
        if options.no_curl {
            skipped.push(format!("{}: skipped (--no-curl)", curl.label()));
        } else {
            match methods::curl_version() {
                Ok(version) => {
                    plan.push((curl, options.runs));
                    skipped.push(format!(
                        "{}: {version}; one process per batch (new connections every batch, \
                         steady ones too), its wall and CPU (wait4) the process's, its bytes \
                         to /dev/null counted in the server's log, not checked",
                        curl.label()
                    ));
                }
                Err(why) => missing.push((curl.label(), why)),
            }
        }
    }
    if !options.no_object_store {
        plan.push((Method::ObjectStore, options.runs));
    }
    if !options.no_opendal {
        plan.push((
            Method::OpenDal {
                gap: methods::OPENDAL_GAP,
            },
            options.runs,
        ));
    }
    if options.tls {
        skipped.push("plain hyper clients: cleartext HTTP/1.1 only, left out over TLS".into());
        return plan;
    }
    if !options.no_plain {
        plan.push((
            Method::Plain {
                in_flight: concurrency,
            },
            options.runs,
        ));
    }
    let requests = workload.pieces.len() as u64;
    let transfer = scenario
        .bandwidth
        .map(|b| Duration::from_secs_f64(workload.requested_bytes() as f64 / b as f64))
        .unwrap_or_default();
    let estimate = scenario.latency * requests as u32 + transfer;
    let label = Method::Plain { in_flight: 1 }.label();
    if options.no_sequential {
        skipped.push(format!("{label}: skipped (--no-sequential)"));
    } else if options.sequential || estimate <= SEQUENTIAL_BUDGET {
        // One batch only: it takes ~latency × requests, and a second connection changes
        // nothing worth the wait.
        plan.push((Method::Plain { in_flight: 1 }, 0));
    } else {
        skipped.push(format!(
            "{label}: skipped (about {:.0} s for {} requests; --sequential runs it)",
            estimate.as_secs_f64(),
            count(requests)
        ));
    }
    plan
}

/// The ideal time of a batch: latency × ⌈transfers / concurrency⌉, plus bytes / bandwidth on
/// the link model, from Karu's own plan and bytes.
fn ideal(scenario: &Scenario, karu: &Run, concurrency: usize) -> (Duration, String) {
    let transfers = karu
        .karu
        .and_then(|k| k.transfers)
        .map(|t| t as u64)
        .unwrap_or(karu.requests);
    let rounds = transfers.div_ceil(concurrency.max(1) as u64);
    let mut ideal = scenario.latency * rounds as u32;
    let mut text = format!(
        "{} ms × ⌈{} / {}⌉",
        ms(scenario.latency),
        count(transfers),
        concurrency
    );
    if let Some(b) = scenario.bandwidth {
        ideal += Duration::from_secs_f64(karu.bytes_sent as f64 / b as f64);
        text.push_str(&format!(" + {} / {}", bytes(karu.bytes_sent), rate(b)));
    }
    text.push_str(&format!(" = {:.1} ms", ideal.as_secs_f64() * 1000.0));
    (ideal, text)
}

/// Prints the tables of one scenario; returns whether any piece failed its check.
fn print_scenario(
    bench: &Bench,
    scenario: &Scenario,
    all: &[Measured],
    runs: usize,
    all_runs: bool,
    skipped: &[String],
    missing: &[(String, String)],
) -> bool {
    let requested = bench.workload.requested_bytes();
    let Some(karu) = all.iter().find(|m| m.method == Method::Karu) else {
        return false;
    };
    let mut table = Table::new(&[
        ("method", Align::Left),
        ("wall ms", Align::Right),
        ("requests", Align::Right),
        ("conns (new)", Align::Right),
        ("peak", Align::Right),
        ("bytes sent", Align::Right),
        ("fetched/requested", Align::Right),
        ("wall/ideal", Align::Right),
        ("vs Karu", Align::Right),
        ("client CPU ms", Align::Right),
        ("CPU s/GiB", Align::Right),
        ("check", Align::Left),
    ]);
    let mut ideals = Vec::new();
    for phase in [Phase::Cold, Phase::Steady] {
        let Some(karu_run) = karu.pick(phase) else {
            continue;
        };
        let (ideal, ideal_text) = ideal(scenario, karu_run, bench.concurrency);
        table.heading(match phase {
            Phase::Cold => match cold_clients(&bench.workload) {
                1 => format!("cold: the first batch on a new client; ideal {ideal_text}"),
                n => format!(
                    "cold: the first batch on a new client, median of {n} clients; ideal \
                     {ideal_text}"
                ),
            },
            Phase::Steady => format!(
                "steady: later batches on the same client, median of {runs}; ideal {ideal_text}"
            ),
        });
        ideals.push((phase, ideal));
        for m in all {
            let Some(run) = m.pick(phase) else { continue };
            let label = format!("  {}", m.method.label());
            table.row(cells(label, run, requested, ideal, karu_run.wall));
            if all_runs && phase == Phase::Steady {
                for (i, run) in m.steady.iter().enumerate() {
                    let label = format!("      run {}", i + 1);
                    table.row(cells(label, run, requested, ideal, karu_run.wall));
                }
            }
        }
    }
    for (label, _) in missing {
        table.row(vec![format!("  {label}"), "not measured".into()]);
    }
    let failed = all
        .iter()
        .flat_map(|m| std::iter::once(&m.cold).chain(&m.steady))
        .any(|run| !run.check.passed());
    table.print();
    if scenario.bandwidth.is_none() {
        print_loopback_note(all, &ideals);
    }
    if scenario.bandwidth.is_some() {
        println!(
            "  link model: the ideal adds the transfer time to the latency rounds, as the protocol \
             defines it; a client that overlaps the two can come in under 1.00"
        );
    }
    for note in skipped {
        println!("  {note}");
    }
    for (label, why) in missing {
        println!("  {label}: not measured: {why}");
    }
    if all.iter().any(|m| m.steady.is_empty()) {
        println!("  one request per read, sequential: one batch only (listed under cold)");
    }
    for m in all {
        for run in std::iter::once(&m.cold).chain(&m.steady) {
            if let Some(message) = &run.check.first_failure {
                println!("  {}: first failure: {message}", m.method.label());
                break;
            }
        }
    }
    print_bill(all);
    print_karu_counters(karu);
    print_targets(bench, all, &ideals);
    record(bench, &scenario.tag(), all, &ideals);
    failed
}

/// The bill of each method's cold and steady batch (see [`crate::bill`]).
fn print_bill(all: &[Measured]) {
    let mut lines = Vec::new();
    for phase in [Phase::Cold, Phase::Steady] {
        for m in all {
            let Some(run) = m.pick(phase) else { continue };
            lines.push(crate::bill::Line {
                label: format!("{}, {}", m.method.label(), phase.name()),
                requests: run.requests,
                bytes_sent: run.bytes_sent,
            });
        }
    }
    crate::bill::print("bill", &lines);
}

/// Puts each method's cold and steady batch into `all`'s record.
fn record(bench: &Bench, scenario: &str, all: &[Measured], ideals: &[(Phase, Duration)]) {
    // Karu's own row first, whatever the order of the run: the record finds Karu's by prefix.
    let karu_first = all
        .iter()
        .filter(|m| m.method == Method::Karu)
        .chain(all.iter().filter(|m| m.method != Method::Karu));
    for m in karu_first {
        for phase in [Phase::Cold, Phase::Steady] {
            let Some(run) = m.pick(phase) else { continue };
            crate::all::record(crate::all::Row {
                workload: bench.workload.name.to_string(),
                scenario: scenario.to_string(),
                phase: phase.name(),
                method: m.method.label(),
                wall: run.wall,
                requests: run.requests,
                bytes_sent: run.bytes_sent,
                requested: bench.workload.requested_bytes(),
                client_cpu: Some(run.client_cpu),
                ideal: ideals.iter().find(|(p, _)| *p == phase).map(|(_, i)| *i),
                failed: !run.check.passed(),
            });
        }
    }
}

/// On loopback the ideal has no term for moving bytes: say so where a workload is far above
/// it for that reason.
fn print_loopback_note(all: &[Measured], ideals: &[(Phase, Duration)]) {
    let Some(karu) = all.iter().find(|m| m.method == Method::Karu) else {
        return;
    };
    let far = ideals.iter().any(|&(phase, ideal)| {
        karu.pick(phase)
            .is_some_and(|run| run.wall.as_secs_f64() > 2.0 * ideal.as_secs_f64())
    });
    if far {
        println!(
            "  loopback: the ideal counts round trips only, with no term for moving bytes (Karu \
             moved {} per batch here); `--bandwidth` prices the bytes",
            bytes(karu.cold.bytes_sent)
        );
    }
}

/// The cells of one row of a scenario's table.
fn cells(
    label: String,
    run: &Run,
    requested: u64,
    ideal: Duration,
    karu_wall: Duration,
) -> Vec<String> {
    vec![
        label,
        format!("{:.1}", run.wall.as_secs_f64() * 1000.0),
        count(run.requests),
        connections(run),
        count(run.peak),
        bytes(run.bytes_sent),
        format!("{:.2}", run.bytes_sent as f64 / requested as f64),
        format!("{:.2}", run.wall.as_secs_f64() / ideal.as_secs_f64()),
        format!("{:.2}×", run.wall.as_secs_f64() / karu_wall.as_secs_f64()),
        format!("{:.0}", run.client_cpu.as_secs_f64() * 1000.0),
        cpu_per_gib_text(run.client_cpu, requested),
        run.check.text(),
    ]
}

/// Karu's own counters beside the server's log.
fn print_karu_counters(karu: &Measured) {
    let mut line = String::from("  Karu's transport_stats():");
    for (phase, run) in [("cold", Some(&karu.cold)), ("steady", karu.steady())] {
        let (Some(run), Some(k)) = (run, run.and_then(|r| r.karu)) else {
            continue;
        };
        let agree = k.requests == run.requests && k.body_bytes == run.bytes_sent;
        line.push_str(&format!(
            " {phase} {} requests, {} body bytes, {} retries ({});",
            count(k.requests),
            count(k.body_bytes),
            count(k.retries),
            if agree {
                "= the server's log".to_string()
            } else {
                format!(
                    "server's log: {} requests, {} bytes",
                    count(run.requests),
                    count(run.bytes_sent)
                )
            }
        ));
    }
    println!("{}", line.trim_end_matches(';'));
}

/// The workload's targets from `xtask/bench/README.md` and issue 3, with what was measured.
fn print_targets(bench: &Bench, all: &[Measured], ideals: &[(Phase, Duration)]) {
    let Some(karu) = all.iter().find(|m| m.method == Method::Karu) else {
        return;
    };
    let object_store = all.iter().find(|m| m.method == Method::ObjectStore);
    let requested = bench.workload.requested_bytes() as f64;
    let scattered = bench.workload.name == "scattered";
    for (phase, ideal) in ideals {
        let (name, k, o) = match phase {
            Phase::Cold => ("cold", Some(&karu.cold), object_store.map(|m| &m.cold)),
            Phase::Steady => (
                "steady",
                karu.steady(),
                object_store.and_then(Measured::steady),
            ),
        };
        let Some(k) = k else { continue };
        let ratio = k.wall.as_secs_f64() / ideal.as_secs_f64();
        let mut line = format!("  {name}: Karu wall/ideal {ratio:.2}");
        if scattered {
            line.push_str(&format!(" (target ≤ 1.10: {})", verdict(ratio <= 1.10)));
        }
        if let Some(o) = o {
            let speedup = o.wall.as_secs_f64() / k.wall.as_secs_f64();
            line.push_str(&format!("; object_store/Karu {speedup:.2}×"));
            if scattered {
                line.push_str(&format!(
                    " (target ≥ 2× in issue 3: {}; ≥ 2.5× in the protocol: {})",
                    verdict(speedup >= 2.0),
                    verdict(speedup >= 2.5)
                ));
            } else if bench.workload.name == "scattered-10k" {
                line.push_str(&format!(" (target > 1: {})", verdict(speedup > 1.0)));
            }
        }
        let amplification = k.bytes_sent as f64 / requested;
        line.push_str(&format!("; Karu fetched/requested {amplification:.2}"));
        if scattered {
            line.push_str(&format!(
                " (target ≤ 2.5: {})",
                verdict(amplification <= 2.5)
            ));
        }
        println!("{line}");
        if bench.workload.name == "tensors" {
            println!(
                "  {name}: {}",
                tensors_cpu_line(
                    all,
                    *phase,
                    bench.workload.requested_bytes(),
                    bench.concurrency
                )
            );
        }
    }
}

/// Client CPU seconds per GiB delivered into caller buffers on `tensors` at most this in
/// cleartext (issue 61).
pub(crate) const CALLER_CPU_PER_GIB: f64 = 0.25;
/// The same over TLS (rustls with aws-lc-rs).
pub(crate) const CALLER_CPU_PER_GIB_TLS: f64 = 0.40;

/// `tensors`' CPU per GiB in `phase`, against issue 61's targets: into caller buffers under
/// [`CALLER_CPU_PER_GIB`] (over TLS, [`CALLER_CPU_PER_GIB_TLS`]), into Karu's own buffers at
/// most plain hyper's; curl's beside them.
fn tensors_cpu_line(all: &[Measured], phase: Phase, requested: u64, in_flight: usize) -> String {
    let per_gib = |method: Method| {
        all.iter()
            .find(|m| m.method == method)
            .and_then(|m| m.pick(phase))
            .and_then(|r| Some((cpu_per_gib(r.client_cpu, requested)?, r.check.passed())))
    };
    let tls = crate::transport::current().tls.is_some();
    let bound = if tls {
        CALLER_CPU_PER_GIB_TLS
    } else {
        CALLER_CPU_PER_GIB
    };
    let mut parts = Vec::new();
    if let Some((x, passed)) = per_gib(Method::KaruCaller) {
        parts.push(format!(
            "Karu into caller buffers {x:.3} (target ≤ {bound:.2}: {})",
            verdict(passed && x <= bound)
        ));
    }
    let plain = per_gib(Method::Plain { in_flight });
    if let Some((x, passed)) = per_gib(Method::Karu) {
        match plain {
            Some((p, _)) => parts.push(format!(
                "into Karu's buffers {x:.3} (target ≤ plain hyper's {p:.3}: {})",
                verdict(passed && x <= p)
            )),
            None => parts.push(format!(
                "into Karu's buffers {x:.3} (target ≤ plain hyper's: not measured)"
            )),
        }
    }
    if let Some((c, _)) = per_gib(Method::Curl { in_flight }) {
        parts.push(format!("curl {c:.3}"));
    }
    format!("CPU s/GiB delivered: {}", parts.join("; "))
}

/// Connections that carried a batch, and how many of them were opened for it.
fn connections(run: &Run) -> String {
    format!(
        "{} ({})",
        count(run.connections as u64),
        count(run.new_connections)
    )
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// `cargo xtask bench cpu`: requests per second, no latency, loopback, never merging.
pub(crate) fn cpu(options: &CpuOptions) -> Result<(), String> {
    let mut workload = Workload::new(
        Shape::Scattered {
            reads: options.reads,
        },
        options.seed,
    );
    workload.name = "cpu";
    println!(
        "karu-bench cpu: {}, no latency, no bandwidth cap, never merging (max_gap 0); seed {}",
        workload.description, options.seed
    );
    let bench = Bench::start(workload, Duration::ZERO)?;
    let mut plan = vec![
        (Method::Karu, BatchOptions::new().max_gap(0)),
        (Method::ObjectStoreEach, BatchOptions::new()),
    ];
    if !options.no_opendal {
        plan.push((Method::OpenDal { gap: 0 }, BatchOptions::new()));
    }
    if !options.no_plain {
        let in_flight = bench.concurrency;
        plan.push((Method::Plain { in_flight }, BatchOptions::new()));
    }
    if options.peers_first {
        println!("the peers first and Karu last");
        plan.reverse();
    }
    let all = bench.measure_all(
        plan.into_iter()
            .map(|(method, batch_options)| (method, options.runs, batch_options))
            .collect(),
        1,
    )?;
    let Some(karu) = all.iter().find(|m| m.method == Method::Karu) else {
        return Err("Karu was not measured".into());
    };
    let mut table = Table::new(&[
        ("method", Align::Left),
        ("wall ms", Align::Right),
        ("requests", Align::Right),
        ("conns (new)", Align::Right),
        ("peak", Align::Right),
        ("bytes sent", Align::Right),
        ("requests/s", Align::Right),
        ("client CPU µs/request", Align::Right),
        ("check", Align::Left),
    ]);
    let mut failed = false;
    for phase in [Phase::Cold, Phase::Steady] {
        table.heading(match phase {
            Phase::Cold => "cold: the first batch on a new client".to_string(),
            Phase::Steady => format!(
                "steady: later batches on the same client, median of {}",
                options.runs
            ),
        });
        for m in &all {
            let Some(run) = m.pick(phase) else { continue };
            failed |= !run.check.passed();
            table.row(vec![
                format!("  {}", m.method.label()),
                format!("{:.1}", run.wall.as_secs_f64() * 1000.0),
                count(run.requests),
                connections(run),
                count(run.peak),
                bytes(run.bytes_sent),
                count((run.requests as f64 / run.wall.as_secs_f64()) as u64),
                format!(
                    "{:.1}",
                    run.client_cpu.as_secs_f64() * 1e6 / run.requests.max(1) as f64
                ),
                run.check.text(),
            ]);
        }
    }
    println!();
    table.print();
    let scenario = Scenario {
        latency: Duration::ZERO,
        bandwidth: None,
        peers_first: options.peers_first,
    };
    record(&bench, &scenario.tag(), &all, &[]);
    print_karu_counters(karu);
    if !options.no_callgrind {
        crate::callgrind::measure(&bench, options.seed)?;
    }
    if let Some(run) = karu.steady() {
        let per_sec = run.requests as f64 / run.wall.as_secs_f64();
        println!(
            "  steady: Karu {} requests/s (target ≥ 40,000: {})",
            count(per_sec as u64),
            verdict(per_sec >= 40_000.0)
        );
    }
    if failed {
        Err("some reads failed or delivered wrong bytes (see the check column)".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rounds_alternate_the_order_of_the_methods() {
        assert_eq!(round_order(0, 3), vec![0, 1, 2]);
        assert_eq!(round_order(1, 3), vec![2, 1, 0]);
        assert_eq!(round_order(2, 3), vec![0, 1, 2]);
        assert_eq!(round_order(5, 1), vec![0]);
        assert!(round_order(0, 0).is_empty());
    }

    #[test]
    fn a_phase_reports_its_median_unless_a_batch_failed() {
        // Batches as (wall in ms, failed).
        let wall = |batches: &[(u64, bool)]| {
            reported(batches.to_vec(), |b| b.1, |b| Duration::from_millis(b.0)).map(|b| b.0)
        };
        assert_eq!(wall(&[(30, false), (10, false), (20, false)]), Some(20));
        assert_eq!(wall(&[(30, false), (10, false)]), Some(30));
        assert_eq!(wall(&[(7, false)]), Some(7));
        assert_eq!(wall(&[]), None);
        // The fastest batch failed: it is reported, not hidden behind the median.
        assert_eq!(wall(&[(30, false), (10, true), (20, false)]), Some(10));
    }

    #[test]
    fn rates_read_as_links() {
        assert_eq!(rate(125_000_000), "1 Gbit/s");
        assert_eq!(rate(12_500_000), "100 Mbit/s");
        assert_eq!(rate(1_000), "1,000 B/s");
    }

    #[test]
    fn cpu_per_gib_divides_by_the_bytes_delivered() {
        assert_eq!(cpu_per_gib(Duration::from_millis(500), 2 << 30), Some(0.25));
        assert_eq!(cpu_per_gib(Duration::from_secs(3), 3 << 29), Some(2.0));
        assert_eq!(cpu_per_gib(Duration::from_secs(1), 0), None);
        assert_eq!(
            cpu_per_gib_text(Duration::from_millis(712), 1 << 30),
            "0.712"
        );
        assert_eq!(cpu_per_gib_text(Duration::from_millis(712), 0), "—");
    }

    #[test]
    fn counted_finds_each_piece_answered_whole_in_the_log() {
        let w = Workload::new(Shape::Scattered { reads: 3 }, 1);
        let answer = |p: &crate::workload::Piece, body: u64| karu_testkit::RequestRecord {
            method: "GET".into(),
            path: w.objects[p.object].path.clone(),
            query: None,
            headers: Vec::new(),
            range: None,
            byte_range: Some((p.offset, p.offset + p.length - 1)),
            status: 206,
            body_bytes: body,
            connection: 1,
            fault: None,
            latency: Duration::ZERO,
            paced_bytes: 0,
        };
        let whole: Vec<_> = w.pieces.iter().map(|p| answer(p, p.length)).collect();
        let check = counted(&w, &whole);
        assert_eq!((check.ok, check.wrong, check.failed), (3, 0, 0));
        assert_eq!(check.text(), "counted");
        // A short answer, and one missing: two failures, the first named.
        let mut short = whole.clone();
        short[1].body_bytes -= 1;
        short.pop();
        let check = counted(&w, &short);
        assert_eq!((check.ok, check.failed), (1, 2));
        assert_eq!(check.text(), "2 FAILED");
        let p = w.pieces[1];
        assert_eq!(
            check.first_failure,
            Some(format!(
                "no whole 206 answer for bytes={}-{} of /scattered.bin in the server's log",
                p.offset,
                p.offset + p.length - 1
            ))
        );
        // One answer counts for one piece only.
        let mut twice = w.clone();
        twice.pieces.push(w.pieces[0]);
        assert_eq!(counted(&twice, &whole).failed, 1);
    }

    #[test]
    fn verify_finds_wrong_and_missing_bytes() {
        let w = Workload::new(Shape::Scattered { reads: 3 }, 1);
        let good: Vec<Result<bytes::Bytes, String>> = w
            .pieces
            .iter()
            .map(|p| Ok(karu_testkit::pattern(p.offset, p.length as usize).into()))
            .collect();
        assert!(verify(&w, &good).passed());
        let mut bad = good.clone();
        bad[0] = Ok(karu_testkit::pattern(w.pieces[0].offset + 1, 4096).into());
        bad[1] = Err("boom".into());
        let check = verify(&w, &bad[..2]);
        assert_eq!((check.ok, check.wrong, check.failed), (0, 1, 2));
    }
}
