//! `karu-bench local`: reads of a local file in the page cache, Karu against a plain `pread`
//! loop (one thread, and one thread per core) and object_store's
//! `LocalFileSystem::get_ranges`, every method in the same run on the same reads.
//!
//! Three shapes (scattered small reads, adjacent small reads, large reads), each twice: into
//! buffers the reader allocates (Karu's `Read::new`; the loops allocate one exact `Vec` per
//! read, unzeroed) and into the caller's buffers (Karu's `Read::borrowed` in a scope; the
//! loops fill slices of one buffer; object_store's bytes are copied there). Every byte every
//! method returns is checked against the file's pattern.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use karu::{BatchOptions, Client, Locator, Read};

use crate::report::{Align, Table, bytes, count};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Options of `karu-bench local`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LocalArgs {
    /// Size of the file, in MiB.
    #[arg(long, default_value_t = 200)]
    pub(crate) file_mib: u64,
    /// Small reads per batch (scattered and adjacent).
    #[arg(long, default_value_t = 50_000)]
    pub(crate) reads: usize,
    /// Large reads (1–4 MiB) per batch.
    #[arg(long, default_value_t = 64)]
    pub(crate) large_reads: usize,
    /// Steady batches per method after the cold one (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub(crate) runs: usize,
    /// Seed of the random offsets and lengths.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Directory of the file (default: the system's temporary directory).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// Only these shapes (`scattered`, `adjacent`, `large`), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// Karu alone, without its peers and targets (for profiling Karu's path).
    #[arg(long)]
    pub(crate) no_peers: bool,
}

impl LocalArgs {
    /// The command line's defaults (for `all`).
    pub(crate) fn defaults() -> LocalArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            args: LocalArgs,
        }
        <Defaults as clap::Parser>::parse_from(["local"]).args
    }
}

/// The byte at `offset` of the file: position-dependent, so a misplaced range is caught.
fn pattern(offset: u64) -> u8 {
    let x = offset.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8 ^ (offset as u8)
}

/// The benchmark's file, removed when dropped.
struct TestFile {
    path: PathBuf,
    size: u64,
}

impl TestFile {
    fn create(dir: &Path, size: u64) -> Result<TestFile, String> {
        let path = dir.join(format!("karu-bench-local-{}.bin", std::process::id()));
        let file = TestFile { path, size };
        let mut out = File::create(&file.path)
            .map_err(|e| format!("cannot create {}: {e}", file.path.display()))?;
        let mut chunk = vec![0u8; MIB as usize];
        let mut at = 0;
        while at < size {
            let n = (size - at).min(MIB) as usize;
            for (i, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(at + i as u64);
            }
            out.write_all(&chunk[..n])
                .map_err(|e| format!("cannot write {}: {e}", file.path.display()))?;
            at += n as u64;
        }
        out.sync_all().map_err(|e| e.to_string())?;
        // Into the page cache: read it once.
        std::fs::read(&file.path).map_err(|e| e.to_string())?;
        Ok(file)
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One read: `length` bytes at `offset`.
#[derive(Debug, Clone, Copy)]
struct Piece {
    offset: u64,
    length: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Scattered,
    Adjacent,
    Large,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Scattered => "scattered",
            Shape::Adjacent => "adjacent",
            Shape::Large => "large",
        }
    }

    fn pieces(self, args: &LocalArgs, size: u64) -> Vec<Piece> {
        let mut rng = fastrand::Rng::with_seed(args.seed);
        match self {
            Shape::Scattered => (0..args.reads)
                .map(|_| {
                    let length = rng.u64(1..=4 * KIB);
                    Piece {
                        offset: rng.u64(0..=size - length),
                        length,
                    }
                })
                .collect(),
            Shape::Adjacent => {
                let mut offset = 0;
                let mut out = Vec::with_capacity(args.reads);
                for _ in 0..args.reads {
                    let length = rng.u64(1..=4 * KIB).min(size - offset);
                    if length == 0 {
                        break;
                    }
                    out.push(Piece { offset, length });
                    offset += length;
                }
                out
            }
            Shape::Large => (0..args.large_reads)
                .map(|_| {
                    let length = rng.u64(MIB..=4 * MIB).min(size);
                    Piece {
                        offset: rng.u64(0..=size - length),
                        length,
                    }
                })
                .collect(),
        }
    }
}

/// Where the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buffers {
    /// The reader allocates each read's buffer.
    Allocated,
    /// One caller buffer, a slice per read.
    Caller,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Karu,
    Pread { threads: usize },
    ObjectStore,
}

impl Method {
    fn label(self) -> String {
        match self {
            Method::Karu => "Karu (defaults)".into(),
            Method::Pread { threads: 1 } => "pread loop, 1 thread".into(),
            Method::Pread { threads } => format!("pread loop, {threads} threads"),
            Method::ObjectStore => "object_store LocalFileSystem::get_ranges".into(),
        }
    }
}

/// The bytes a method delivered: one buffer per read, or one caller buffer holding them all
/// back to back.
enum Delivered {
    PerRead(Vec<Vec<u8>>),
    Caller(Vec<u8>),
}

struct Bench<'a> {
    file: &'a TestFile,
    runtime: tokio::runtime::Runtime,
    store: object_store::local::LocalFileSystem,
    store_path: object_store::path::Path,
}

pub(crate) fn run(args: &LocalArgs) -> Result<(), String> {
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let file = TestFile::create(&dir, args.file_mib * MIB)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let store = object_store::local::LocalFileSystem::new();
    let store_path = object_store::path::Path::from_filesystem_path(&file.path)
        .map_err(|e| format!("object_store path: {e}"))?;
    let bench = Bench {
        file: &file,
        runtime,
        store,
        store_path,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let all = [
        Method::Karu,
        Method::Pread { threads: 1 },
        Method::Pread { threads: cores },
        Method::ObjectStore,
    ];
    let methods = if args.no_peers { &all[..1] } else { &all[..] };
    println!(
        "local: a file of {} in the page cache ({}), {cores} cores; wall from submit to the last \
         completion; cold = first batch of a new client, steady = median of {}",
        bytes(file.size),
        file.path.display(),
        args.runs
    );
    let mut targets = Vec::new();
    for shape in [Shape::Scattered, Shape::Adjacent, Shape::Large] {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == shape.name()) {
            continue;
        }
        let pieces = shape.pieces(args, file.size);
        let total: u64 = pieces.iter().map(|p| p.length).sum();
        for buffers in [Buffers::Allocated, Buffers::Caller] {
            let name = format!(
                "{} ({})",
                shape.name(),
                match buffers {
                    Buffers::Allocated => "allocated buffers",
                    Buffers::Caller => "caller buffers",
                }
            );
            println!(
                "\n{name}: {} reads, {} in all",
                count(pieces.len() as u64),
                bytes(total)
            );
            let mut table = Table::new(&[
                ("method", Align::Left),
                ("cold ms", Align::Right),
                ("steady ms", Align::Right),
                ("steady / Karu", Align::Right),
                ("us per read", Align::Right),
            ]);
            let steady = bench.measure_all(methods, buffers, &pieces, args.runs)?;
            let karu = steady[0].2;
            for (method, cold, median) in &steady {
                table.row(vec![
                    method.label(),
                    ms(*cold),
                    ms(*median),
                    format!("{:.2}x", median.as_secs_f64() / karu.as_secs_f64()),
                    format!("{:.2}", median.as_secs_f64() * 1e6 / pieces.len() as f64),
                ]);
            }
            table.print();
            for (method, cold, median) in &steady {
                if matches!(method, Method::Pread { threads } if *threads > 1) {
                    continue; // a reference, not a peer of the targets
                }
                for (phase, wall) in [("cold", *cold), ("steady", *median)] {
                    crate::all::record(crate::all::Row {
                        workload: format!("local-{name}"),
                        scenario: "local".into(),
                        phase,
                        method: method.label(),
                        wall,
                        requests: pieces.len() as u64,
                        bytes_sent: total,
                        requested: total,
                        client_cpu: None,
                        ideal: None,
                        failed: false,
                    });
                }
            }
            for (method, _, median) in &steady[1..] {
                if matches!(method, Method::Pread { threads } if *threads > 1) {
                    continue; // a reference, not a target
                }
                let met = karu <= *median;
                targets.push(format!(
                    "{name}: Karu {} ms {} {} {} ms ({:.2}x): {}",
                    ms(karu),
                    if method == &Method::ObjectStore {
                        "<"
                    } else {
                        "<="
                    },
                    method.label(),
                    ms(*median),
                    karu.as_secs_f64() / median.as_secs_f64(),
                    if met { "met" } else { "missed" }
                ));
            }
        }
    }
    println!("\ntargets (steady walls, same run):");
    for line in targets {
        println!("  {line}");
    }
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

impl Bench<'_> {
    /// The cold wall and the median steady wall of each of `methods`, every batch's bytes
    /// checked: first each one's cold batch (Karu's on a new client), then rounds of steady
    /// batches, one per method, every other round in reverse order, so that a host whose speed
    /// drifts during the run moves every method's median alike (see `run::Bench::measure_all`).
    fn measure_all(
        &self,
        methods: &[Method],
        buffers: Buffers,
        pieces: &[Piece],
        runs: usize,
    ) -> Result<Vec<(Method, Duration, Duration)>, String> {
        let client = if methods.contains(&Method::Karu) {
            let client = crate::methods::karu_client()?;
            let locator = client
                .locate(self.file.path.to_str().ok_or("the path is not UTF-8")?)
                .map_err(|e| e.to_string())?;
            Some((client, locator))
        } else {
            None
        };
        let batch = |method: Method| -> Result<Duration, String> {
            let (wall, delivered) = match (method, &client) {
                (Method::Karu, Some((client, locator))) => karu(client, locator, buffers, pieces)?,
                (Method::Pread { threads }, _) => self.pread(threads, buffers, pieces)?,
                (Method::ObjectStore, _) => self.object_store(buffers, pieces)?,
                _ => return Err("no client".into()),
            };
            check(&method.label(), pieces, &delivered)?;
            // Every batch's allocated destinations are fresh memory, whichever method's freed
            // buffers glibc would otherwise recycle (see `run::give_back_freed_memory`).
            drop(delivered);
            crate::run::give_back_freed_memory();
            Ok(wall)
        };
        let cold = methods
            .iter()
            .map(|&m| batch(m))
            .collect::<Result<Vec<_>, _>>()?;
        let mut steady = vec![Vec::with_capacity(runs); methods.len()];
        for round in 0..runs {
            for i in crate::run::round_order(round, methods.len()) {
                steady[i].push(batch(methods[i])?);
            }
        }
        Ok(methods
            .iter()
            .zip(cold)
            .zip(steady)
            .map(|((&method, cold), mut walls)| {
                walls.sort();
                let median = walls.get(walls.len() / 2).copied().unwrap_or(cold);
                (method, cold, median)
            })
            .collect())
    }

    fn pread(
        &self,
        threads: usize,
        buffers: Buffers,
        pieces: &[Piece],
    ) -> Result<(Duration, Delivered), String> {
        let open = || File::open(&self.file.path).map_err(|e| e.to_string());
        let per_thread = pieces.len().div_ceil(threads.max(1)).max(1);
        match buffers {
            Buffers::Allocated => {
                let started = Instant::now();
                let parts: Vec<Result<Vec<Vec<u8>>, String>> = std::thread::scope(|s| {
                    let handles: Vec<_> = pieces
                        .chunks(per_thread)
                        .map(|chunk| {
                            s.spawn(move || {
                                let file = open()?;
                                chunk
                                    .iter()
                                    .map(|p| pread_owned(&file, p))
                                    .collect::<Result<Vec<_>, String>>()
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
                        .collect()
                });
                let wall = started.elapsed();
                let mut all = Vec::with_capacity(pieces.len());
                for part in parts {
                    all.extend(part?);
                }
                Ok((wall, Delivered::PerRead(all)))
            }
            Buffers::Caller => {
                let mut buffer = caller_buffer(pieces);
                let started = Instant::now();
                let slices = split(&mut buffer, pieces);
                let results: Vec<Result<(), String>> = std::thread::scope(|s| {
                    let mut slices = slices;
                    let mut handles = Vec::new();
                    let mut rest = pieces;
                    while !rest.is_empty() {
                        let n = per_thread.min(rest.len());
                        let (chunk, tail) = rest.split_at(n);
                        rest = tail;
                        let mine: Vec<&mut [u8]> = slices.drain(..n).collect();
                        handles.push(s.spawn(move || {
                            let file = open()?;
                            for (p, dst) in chunk.iter().zip(mine) {
                                pread_into(&file, p.offset, dst)?;
                            }
                            Ok(())
                        }));
                    }
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
                        .collect()
                });
                let wall = started.elapsed();
                results.into_iter().collect::<Result<(), String>>()?;
                Ok((wall, Delivered::Caller(buffer)))
            }
        }
    }

    fn object_store(
        &self,
        buffers: Buffers,
        pieces: &[Piece],
    ) -> Result<(Duration, Delivered), String> {
        use object_store::ObjectStore;
        let ranges: Vec<std::ops::Range<u64>> = pieces
            .iter()
            .map(|p| p.offset..p.offset + p.length)
            .collect();
        let mut buffer = match buffers {
            Buffers::Caller => caller_buffer(pieces),
            Buffers::Allocated => Vec::new(),
        };
        let started = Instant::now();
        let got = self
            .runtime
            .block_on(self.store.get_ranges(&self.store_path, &ranges))
            .map_err(|e| format!("object_store: {e}"))?;
        if buffers == Buffers::Allocated {
            // `Bytes` are its buffers: handed over as they are (copied after the clock).
            let wall = started.elapsed();
            let all = got.into_iter().map(|b| b.to_vec()).collect();
            return Ok((wall, Delivered::PerRead(all)));
        }
        for (dst, b) in split(&mut buffer, pieces).into_iter().zip(&got) {
            if dst.len() != b.len() {
                return Err("object_store: a short range".into());
            }
            dst.copy_from_slice(b);
        }
        let wall = started.elapsed();
        Ok((wall, Delivered::Caller(buffer)))
    }
}

fn karu(
    client: &Client,
    locator: &Locator,
    buffers: Buffers,
    pieces: &[Piece],
) -> Result<(Duration, Delivered), String> {
    let failed = |c: &karu::Completion| {
        c.error().map(|e| {
            format!(
                "Karu: read {} failed: {}: {}",
                c.index(),
                e.status().name(),
                e.message()
            )
        })
    };
    match buffers {
        Buffers::Allocated => {
            let started = Instant::now();
            let batch = client.submit(
                pieces
                    .iter()
                    .map(|p| Read::new(locator, p.offset, p.length)),
            );
            let completions = batch.wait();
            let wall = started.elapsed();
            let mut all = Vec::with_capacity(completions.len());
            for c in completions {
                if let Some(e) = failed(&c) {
                    return Err(e);
                }
                all.push(c.into_buffer().unwrap_or_default());
            }
            Ok((wall, Delivered::PerRead(all)))
        }
        Buffers::Caller => {
            let mut buffer = caller_buffer(pieces);
            let started = Instant::now();
            let slices = split(&mut buffer, pieces);
            let outcome = client.scope(|scope| {
                let batch = scope.submit(
                    pieces
                        .iter()
                        .zip(slices)
                        .map(|(p, dst)| Read::borrowed(locator, p.offset, dst)),
                    &BatchOptions::new(),
                );
                batch.wait().iter().find_map(failed)
            });
            let wall = started.elapsed();
            if let Some(e) = outcome {
                return Err(e);
            }
            Ok((wall, Delivered::Caller(buffer)))
        }
    }
}

/// One caller buffer for every read, back to back (written once, so its pages are mapped
/// before the clock starts, as a reused buffer's would be).
fn caller_buffer(pieces: &[Piece]) -> Vec<u8> {
    let total: u64 = pieces.iter().map(|p| p.length).sum();
    vec![0xA5; total as usize]
}

fn split<'b>(buffer: &'b mut [u8], pieces: &[Piece]) -> Vec<&'b mut [u8]> {
    split_lengths(buffer, pieces.iter().map(|p| p.length))
}

/// `buffer` cut into consecutive slices of `lengths` (one caller buffer, a slice per read).
pub(crate) fn split_lengths(
    mut buffer: &mut [u8],
    lengths: impl ExactSizeIterator<Item = u64>,
) -> Vec<&mut [u8]> {
    let mut out = Vec::with_capacity(lengths.len());
    for length in lengths {
        let (head, tail) = std::mem::take(&mut buffer).split_at_mut(length as usize);
        out.push(head);
        buffer = tail;
    }
    out
}

/// A read into a new, exact, unzeroed buffer (what a careful caller writes).
fn pread_owned(file: &File, p: &Piece) -> Result<Vec<u8>, String> {
    let mut v = Vec::with_capacity(p.length as usize);
    while (v.len() as u64) < p.length {
        let at = p.offset + v.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut v), at) {
            Ok(0) => return Err(format!("pread: end of file at {at}")),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("pread: {e}")),
        }
    }
    Ok(v)
}

fn pread_into(file: &File, offset: u64, dst: &mut [u8]) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(dst, offset)
        .map_err(|e| format!("pread: {e}"))
}

/// Every read's bytes are the file's.
fn check(label: &str, pieces: &[Piece], delivered: &Delivered) -> Result<(), String> {
    let mismatch = |i: usize| format!("{label}: read {i} delivered wrong bytes");
    match delivered {
        Delivered::PerRead(all) => {
            if all.len() != pieces.len() {
                return Err(format!("{label}: {} of {} reads", all.len(), pieces.len()));
            }
            for (i, (p, got)) in pieces.iter().zip(all).enumerate() {
                if !matches(p, got) {
                    return Err(mismatch(i));
                }
            }
        }
        Delivered::Caller(buffer) => {
            let mut at = 0usize;
            for (i, p) in pieces.iter().enumerate() {
                let end = at + p.length as usize;
                if !matches(p, &buffer[at..end]) {
                    return Err(mismatch(i));
                }
                at = end;
            }
        }
    }
    Ok(())
}

fn matches(p: &Piece, got: &[u8]) -> bool {
    got.len() as u64 == p.length
        && got
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(p.offset + i as u64))
}
