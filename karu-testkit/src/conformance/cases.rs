//! The basic cases: correct bytes and statuses for every kind of read, on any target.

use karu::{BatchOptions, Client, Completion, Read, Status};

use super::{Ctx, ensure};
use crate::http::pattern;

type Case = fn(&Ctx<'_>) -> Result<String, String>;

/// Every basic case, by name.
pub(crate) const CASES: [(&str, Case); 11] = [
    ("single", single),
    ("names", names),
    ("merged", merged),
    ("overlapping", overlapping),
    ("windowed", windowed),
    ("end_of_object", end_of_object),
    ("stat", stat),
    ("read_ends", read_ends),
    ("if_match", if_match),
    ("not_found", not_found),
    ("empty_object", empty_object),
];

/// Size of the objects the basic cases read.
const SIZE: u64 = 300_000;

fn object(ctx: &Ctx<'_>, name: &str, size: u64) -> Result<String, String> {
    ctx.target
        .put(name, &pattern(0, size as usize))
        .map_err(|e| format!("cannot store {name}: {e}"))?;
    Ok(ctx.target.address(name))
}

fn client(ctx: &Ctx<'_>) -> Result<Client, String> {
    ctx.client(&[])
}

/// The delivered bytes must be exactly the object's bytes at `offset`.
pub(crate) fn exact(c: &Completion, offset: u64, length: u64) -> Result<(), String> {
    ensure!(
        c.is_ok(),
        "read {} ({offset}+{length}) failed: {}",
        c.tag(),
        c.error().map(|e| e.to_string()).unwrap_or_default()
    );
    ensure!(
        c.bytes_received() == length && c.bytes() == pattern(offset, length as usize).as_slice(),
        "read {} ({offset}+{length}) delivered {} wrong or missing bytes",
        c.tag(),
        c.bytes_received()
    );
    Ok(())
}

/// Requests the mock saw for `name` (GETs), as inclusive byte ranges.
pub(crate) fn ranges_seen(ctx: &Ctx<'_>, name: &str) -> Option<Vec<Option<(u64, u64)>>> {
    let mock = ctx.target.mock()?;
    let path = mock.path_of(name);
    Some(
        mock.server()
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path == path)
            .map(|r| r.byte_range)
            .collect(),
    )
}

fn single(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/single.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let done = client.submit([Read::new(&object, 1000, 5000)]).wait();
    exact(&done[0], 1000, 5000)?;
    if let Some(ranges) = ranges_seen(ctx, "conformance/single.bin") {
        ensure!(
            ranges == [Some((1000, 5999))],
            "expected one request for bytes=1000-5999, saw {ranges:?}"
        );
    }
    Ok("5000 exact bytes, one request".into())
}

/// Object names that a provider's addresses, request paths and signatures must carry
/// exactly: spaces, reserved and non-ASCII characters, a literal percent sign, a directory
/// with a space. Each object has its own size, so reading one for another shows.
const NAMES: [&str; 6] = [
    "conformance/names/a b/c d.bin",
    "conformance/names/plus+equals=amp&.bin",
    "conformance/names/percent%41.bin",
    "conformance/names/ünï çødé.bin",
    "conformance/names/tilde~semi;colon:at@comma,.bin",
    "conformance/names/paren(bang)!star*dollar$quote'.bin",
];

fn names(ctx: &Ctx<'_>) -> Result<String, String> {
    let client = client(ctx)?;
    let mut objects = Vec::new();
    for (k, name) in NAMES.iter().enumerate() {
        let size = 1000 + 100 * k as u64;
        let address = object(ctx, name, size)?;
        let object = client
            .locate(&address)
            .map_err(|e| format!("{name}: {e}"))?;
        let info = client
            .stat(&object)
            .map_err(|e| format!("stat of {name}: {e}"))?;
        ensure!(
            info.size == Some(size),
            "{name}: size {:?}, not {size}",
            info.size
        );
        objects.push((object, size));
    }
    // A read inside each object, and one past its end: exactly what exists of it.
    let reads = objects.iter().enumerate().flat_map(|(k, (object, size))| {
        let k = 2 * k as u64;
        [
            Read::new(object, 10, 500).tag(k),
            Read::new(object, size - 50, 100).tag(k + 1),
        ]
    });
    for c in client.submit(reads).wait() {
        let (name, size) = (NAMES[c.tag() as usize / 2], objects[c.tag() as usize / 2].1);
        if c.tag() % 2 == 0 {
            exact(&c, 10, 500).map_err(|e| format!("{name}: {e}"))?;
        } else {
            ensure!(
                c.status() == Status::RangeNotSatisfiable
                    && c.bytes() == pattern(size - 50, 50).as_slice(),
                "{name}: a read past its end got {} with {} bytes",
                c.status(),
                c.bytes_received()
            );
        }
    }
    Ok(format!("{} objects with unusual names, exact", NAMES.len()))
}

fn merged(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/merged.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let reads = [(0u64, 4096u64), (8192, 4096), (20_000, 100)];
    let batch = client.submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)));
    let done = batch.wait();
    for (c, &(o, l)) in done.iter().zip(&reads) {
        exact(c, o, l)?;
    }
    ensure!(
        batch.stats().transfers == 1,
        "expected the three neighbours to merge into one transfer, planned {}",
        batch.stats().transfers
    );
    if let Some(ranges) = ranges_seen(ctx, "conformance/merged.bin") {
        ensure!(
            ranges == [Some((0, 20_099))],
            "expected one request for the hull bytes=0-20099, saw {ranges:?}"
        );
    }
    Ok("3 reads, 1 transfer".into())
}

fn overlapping(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/overlapping.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let reads = [
        (0u64, 1000u64),
        (500, 1000),
        (500, 1000),
        (1500, 10),
        (1499, 2),
    ];
    let done = client
        .submit(reads.iter().map(|&(o, l)| Read::new(&object, o, l)))
        .wait();
    for (c, &(o, l)) in done.iter().zip(&reads) {
        exact(c, o, l)?;
    }
    if let Some(ranges) = ranges_seen(ctx, "conformance/overlapping.bin") {
        ensure!(
            ranges == [Some((0, 1509))],
            "expected one request bytes=0-1509, saw {ranges:?}"
        );
    }
    Ok("overlapping, duplicate and adjacent reads each exact".into())
}

fn windowed(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/windowed.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let window = object
        .with_window(100_000, Some(5000))
        .map_err(|e| e.to_string())?;
    let done = client
        .submit_with(
            [
                Read::new(&window, 0, 100),
                Read::new(&window, 4900, 100),
                Read::new(&window, 4950, 100),
            ],
            &BatchOptions::new().max_gap(0),
        )
        .wait();
    exact(&done[0], 100_000, 100)?;
    exact(&done[1], 104_900, 100)?;
    ensure!(
        done[2].status() == Status::InvalidRange,
        "a read leaving the window got {}",
        done[2].status()
    );
    if let Some(ranges) = ranges_seen(ctx, "conformance/windowed.bin") {
        let mut ranges = ranges;
        ranges.sort();
        ensure!(
            ranges == [Some((100_000, 100_099)), Some((104_900, 104_999))],
            "window offsets must shift on the wire; saw {ranges:?}"
        );
    }
    Ok("window offsets shifted; the read leaving it was refused".into())
}

fn end_of_object(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/end.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let done = client
        .submit_with(
            [
                Read::new(&object, SIZE - 100, 300),
                Read::new(&object, SIZE + 10, 10),
            ],
            &BatchOptions::new().max_gap(0),
        )
        .wait();
    let prefix = &done[0];
    ensure!(
        prefix.status() == Status::RangeNotSatisfiable && prefix.bytes_received() == 100,
        "a read reaching the end: {} with {} bytes",
        prefix.status(),
        prefix.bytes_received()
    );
    ensure!(
        prefix.bytes() == pattern(SIZE - 100, 100).as_slice(),
        "the prefix that exists is not exact"
    );
    let beyond = &done[1];
    ensure!(
        beyond.status() == Status::RangeNotSatisfiable && beyond.bytes_received() == 0,
        "a read beyond the end: {} with {} bytes",
        beyond.status(),
        beyond.bytes_received()
    );
    Ok("valid prefix of 100 bytes, then a range error".into())
}

fn stat(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/stat.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let info = client.stat(&object).map_err(|e| e.to_string())?;
    ensure!(
        info.size == Some(SIZE),
        "size {:?} instead of {SIZE}",
        info.size
    );
    if let Some(ranges) = ranges_seen(ctx, "conformance/stat.bin") {
        ensure!(
            ranges == [Some((0, 0))],
            "stat must be one GET of byte 0, saw {ranges:?}"
        );
    }
    Ok(format!("size {SIZE}, etag {}", info.etag.is_some()))
}

fn read_ends(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/ends.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let ends = client
        .read_ends(&object, 1000, 2000)
        .map_err(|e| e.to_string())?;
    ensure!(ends.size == SIZE, "size {}", ends.size);
    ensure!(ends.head == pattern(0, 1000), "head bytes wrong");
    ensure!(ends.tail == pattern(SIZE - 2000, 2000), "tail bytes wrong");
    if let Some(ranges) = ranges_seen(ctx, "conformance/ends.bin") {
        ensure!(
            ranges.len() == 2 && ranges.contains(&Some((0, 999))),
            "read_ends must take two requests (head and tail), saw {ranges:?}"
        );
    }
    Ok("head and tail exact, sizes agree".into())
}

fn if_match(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/if_match.bin", SIZE)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let etag = client
        .stat(&object)
        .map_err(|e| e.to_string())?
        .etag
        .ok_or("the target sends no strong ETag")?;
    let done = client
        .submit([
            Read::new(&object, 10, 10).if_match(etag.clone()),
            Read::new(&object, 50, 10).if_match("\"karu-wrong-etag\""),
            Read::new(&object, 90, 10),
        ])
        .wait();
    exact(&done[0], 10, 10)?;
    ensure!(
        done[1].status() == Status::PreconditionFailed,
        "a read with a wrong if-match got {}",
        done[1].status()
    );
    exact(&done[2], 90, 10)?;
    Ok("matching ETag read; wrong ETag refused for that read only".into())
}

fn not_found(ctx: &Ctx<'_>) -> Result<String, String> {
    let client = client(ctx)?;
    let object = client
        .locate(&ctx.target.address("conformance/does-not-exist.bin"))
        .map_err(|e| e.to_string())?;
    let done = client.submit([Read::new(&object, 0, 10)]).wait();
    ensure!(
        done[0].status() == Status::NotFound,
        "a missing object got {}",
        done[0].status()
    );
    Ok("NotFound".into())
}

fn empty_object(ctx: &Ctx<'_>) -> Result<String, String> {
    let address = object(ctx, "conformance/empty.bin", 0)?;
    let client = client(ctx)?;
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    let info = client.stat(&object).map_err(|e| e.to_string())?;
    ensure!(
        info.size == Some(0),
        "an empty object has size {:?}",
        info.size
    );
    let done = client.submit([Read::new(&object, 0, 1)]).wait();
    ensure!(
        done[0].status() == Status::RangeNotSatisfiable && done[0].bytes_received() == 0,
        "reading an empty object got {} with {} bytes",
        done[0].status(),
        done[0].bytes_received()
    );
    Ok("size 0; a read is a range error".into())
}
