//! Judging a case: each read against the versions its object can be of, the requests counted
//! on a well-behaved server, the probes and readers after the batches.

use super::*;

/// What is wrong with `c`, the completion of `ask` that delivered `bytes`, if it is of version
/// `v`. `exact`: the case's faults are all ridden out, so the read must end as on a
/// well-behaved server. `told_end`: a bare 416 may have told the client that the object ends
/// before the read, and nothing refuted it (the bytes delivered must still be right).
pub(super) fn judge(
    ask: &Ask,
    v: Version,
    c: &Completion,
    bytes: &[u8],
    exact: bool,
    told_end: bool,
) -> Option<String> {
    let size = v.size;
    let end = ask.offset + ask.length;
    let exists = size.saturating_sub(ask.offset).min(ask.length);
    let wrong_byte = |n: u64| {
        if bytes.len() as u64 != n {
            return Some(format!("{} bytes delivered, not {n}", bytes.len()));
        }
        (0..bytes.len())
            .find(|&i| bytes[i] != object_byte(v.salt, ask.offset + i as u64))
            .map(|i| format!("byte {i} of the read is wrong"))
    };
    match c.status() {
        Status::Ok => {
            if end > size {
                return Some(format!(
                    "OK for a read past the end of a {size}-byte object"
                ));
            }
            if c.bytes_received() != ask.length {
                return Some(format!("OK with {} bytes received", c.bytes_received()));
            }
            wrong_byte(ask.length)
        }
        Status::RangeNotSatisfiable if told_end && c.bytes_received() < exists => {
            wrong_byte(c.bytes_received())
        }
        Status::RangeNotSatisfiable => {
            if end <= size {
                return Some(format!(
                    "a false end of object: the object has {size} bytes"
                ));
            }
            if c.bytes_received() != exists {
                return Some(format!(
                    "{} bytes received before the end, not {exists}",
                    c.bytes_received()
                ));
            }
            // The size the end was proven with: the object's own on a server that tells the
            // truth about it; at least one that agrees with the bytes delivered on any other.
            if let Some(Evidence::EndOfObject {
                size: Some(stated), ..
            }) = c.error().and_then(karu::Error::evidence)
            {
                let agrees = if exists > 0 {
                    *stated == ask.offset + exists
                } else {
                    *stated <= ask.offset
                };
                if (exact && *stated != size) || !agrees {
                    return Some(format!("an end of object stating size {stated}"));
                }
            }
            (0..exists as usize)
                .find(|&i| bytes.get(i) != Some(&object_byte(v.salt, ask.offset + i as u64)))
                .map(|i| format!("byte {i} of the prefix is wrong"))
        }
        status => {
            if exact {
                return Some(format!("{status:?} although every fault is ridden out"));
            }
            (c.bytes_received() != 0)
                .then(|| format!("{status:?} with {} bytes received", c.bytes_received()))
        }
    }
}

/// Judge every read a case's batches delivered (see the module's rules), noting what is wrong
/// in `wrong`.
pub(super) fn judge_reads(case: &Case, delivered: &Delivered, wrong: &mut String) {
    let Delivered { done, buffers, .. } = delivered;
    // The versions of the changing object each read of it can be of (all, for a read that
    // delivered nothing), with the read's batch and index.
    let mut seen_versions: Vec<(usize, usize, Vec<Version>)> = Vec::new();
    for (batch, index, c) in done {
        let (batch, index) = (*batch, *index);
        let Some(ask) = case.reads.get(index) else {
            continue;
        };
        // A local file has no versions: a read requiring one is rejected on its own (if it also
        // leaves its window, for either reason).
        if !case.remote && ask.if_match.is_some() {
            let refused = c.status() == Status::InvalidArgument
                || ask.leaves_window() && c.status() == Status::InvalidRange;
            if !refused || c.bytes_received() != 0 {
                let _ = writeln!(
                    wrong,
                    "read {index} {ask:?} of a file requires a version: {c:?}"
                );
            }
            continue;
        }
        if ask.leaves_window() {
            if c.status() != Status::InvalidRange || c.bytes_received() != 0 {
                let _ = writeln!(wrong, "read {index} {ask:?} leaves its window: {c:?}");
            }
            continue;
        }
        // On a real server, a read requiring a version the object never had fails.
        if case.plain && ask.if_match == Some(1) {
            if c.status() != Status::PreconditionFailed || c.bytes_received() != 0 {
                let _ = writeln!(
                    wrong,
                    "read {index} {ask:?} requires {NO_SUCH_VERSION}: {c:?}"
                );
            }
            continue;
        }
        let name = name_of(ask.object);
        let told_end = case.faults.iter().any(|f| f.may_end_early(name));
        // A replaced object may fail reads (its parts, or its version, changed under them), and
        // a read that requires a version fails where another is served (or no strong tag); on
        // a real server, one that requires the object's own tag reads as any other.
        let exact = case.ridden_out
            && !(name == CHANGING && case.change_after.is_some())
            && (ask.if_match.is_none() || case.plain);
        // A read that requires a version gets that one, where Karu can tell (strong tags) or
        // the server enforces the condition (no fault makes it ignore `If-Match`).
        let enforced =
            strong(case.changing_etags[0]) || !case.faults.iter().any(|f| f.ignores_if_match(name));
        let candidates: Vec<Version> = case
            .versions(ask.object)
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| !enforced || ask.if_match.is_none_or(|v| v == i))
            .map(|(_, v)| v)
            .collect();
        let bytes = if case.borrowed {
            let received = (c.bytes_received() as usize).min(ask.length as usize);
            &buffers[index][..received]
        } else {
            c.bytes()
        };
        let fits: Vec<Version> = candidates
            .iter()
            .copied()
            .filter(|&v| judge(ask, v, c, bytes, exact, told_end).is_none())
            .collect();
        if fits.is_empty() {
            for &v in &candidates {
                let why = judge(ask, v, c, bytes, exact, told_end).unwrap_or_default();
                let _ = writeln!(wrong, "read {index} {ask:?} of {v:?}: {why}; {c:?}");
            }
        } else if name == CHANGING && c.bytes_received() > 0 {
            seen_versions.push((batch, index, fits));
        }
    }
    // Keeping to one version, the reads of a batch that delivered bytes of the changing object
    // did so from one version (which only strong ETags that differ can tell).
    let [a, b] = case.changing_etags;
    if case.one_version && strong(a) && a != b {
        for batch in 0..case.batches {
            let seen: Vec<_> = seen_versions.iter().filter(|s| s.0 == batch).collect();
            let common = VERSIONS.iter().any(|&(_, size, salt)| {
                let v = Version { salt, size };
                seen.iter().all(|(_, _, fits)| fits.contains(&v))
            });
            if !common {
                let _ = writeln!(
                    wrong,
                    "batch {batch}, keeping to one version, read two of {CHANGING}: {seen:?}"
                );
            }
        }
    }
}

/// On a well-behaved server, whether a case asked for any byte of an object more often than
/// it may (noted in `wrong`), beside the `hedges` duplicates its batches sent of requests
/// still waiting (each asks for its request's bytes once more).
pub(super) fn judge_requests(
    case: &Case,
    mock: &dyn MockControl,
    log: &[RequestRecord],
    hedges: u64,
    wrong: &mut String,
) {
    // On a well-behaved server no byte is asked for twice, except where merging is off (a
    // gap of zero disables it, overlaps included) and, for an object without a strong ETag,
    // the first part of a read in parts (then fetched in one request: parts could not be
    // proven to be one version). Parts of 64 KiB split these reads; of 8 MiB, none. Batches
    // do not share transfers: each may ask for a byte once.
    let setting = |key: &str| {
        case.settings
            .iter()
            .find(|&&(k, _)| k == key)
            .map(|&(_, v)| v)
    };
    let merging = setting("planner.max_gap") != Some("0");
    let split = setting("http.part_size") == Some("64KiB");
    let counted = case.faults.is_empty() && merging && !case.shared;
    if counted {
        // The changing object, unless it was replaced (then requests may repeat) or a read
        // requires a version (reads of different conditions never merge).
        let conditions = case.reads.iter().any(|a| a.if_match.is_some());
        let changing = (case.change_after.is_none() && !conditions).then_some((
            CHANGING,
            0,
            case.changing_etags[0],
        ));
        for (name, _, etag) in OBJECTS.into_iter().chain(changing) {
            let most = case.batches * if split && !strong(etag) { 2 } else { 1 }
                + usize::try_from(hedges).unwrap_or(usize::MAX);
            if let Some(why) = requested_too_often(log, &mock.path_of(name), most) {
                let _ = writeln!(wrong, "{name}: {why}");
            }
        }
    }
}

/// The probes of a case, after its batches: `stat` and `read_ends` of random objects, each of
/// one version (noted in `wrong`); `Err` is a hang.
pub(super) fn judge_probes(
    case: &Case,
    client: &Client,
    objects: &[Locator],
    timer: &Timer,
    wrong: &mut String,
) -> Result<(), String> {
    // The probes, after the batches (their requests are not the batches').
    for probe in &case.probes {
        let object = &objects[probe.object];
        let name = name_of(probe.object);
        let told_end = case.faults.iter().any(|f| f.may_end_early(name));
        let exact = case.ridden_out && !(name == CHANGING && case.change_after.is_some());
        let candidates = case.versions(probe.object);
        if case.dropped_futures {
            start_and_drop(client.read_ends_async(object, probe.head, probe.tail));
        }
        let stat = match case.asynchronous {
            true => within(timer, "stat_async", client.stat_async(object))?,
            false => client.stat(object),
        };
        match stat {
            Ok(info) => {
                // A version's size, and on a truthful mock its strong tag.
                let size_fits = |(i, v): (usize, &Version)| {
                    let size = match info.size {
                        Some(size) => size == v.size || (told_end && size < v.size),
                        None => !exact,
                    };
                    let tag = case.plain
                        || !exact
                        || info.etag.as_deref() == case.strong_tag(probe.object, i);
                    size && tag
                };
                if !candidates.iter().enumerate().any(size_fits) {
                    let _ = writeln!(wrong, "stat of {name}: {info:?}, of none of {candidates:?}");
                }
            }
            Err(e) if exact => {
                let _ = writeln!(
                    wrong,
                    "stat of {name} failed although every fault is ridden out: {e}"
                );
            }
            Err(_) => {}
        }
        let ends = match case.asynchronous {
            true => within(
                timer,
                "read_ends_async",
                client.read_ends_async(object, probe.head, probe.tail),
            )?,
            false => client.read_ends(object, probe.head, probe.tail),
        };
        match ends {
            Ok(ends) => {
                // The size, the head and the tail of one version (or, where a bare 416 may have
                // told of an earlier end, of that version as if it ended there).
                let fits = |v: &Version| {
                    let size = ends.size;
                    let bytes = |from: u64, n: u64| -> Vec<u8> {
                        (from..from + n).map(|i| object_byte(v.salt, i)).collect()
                    };
                    (size == v.size || (told_end && size < v.size))
                        && ends.head == bytes(0, probe.head.min(size))
                        && ends.tail == bytes(size - probe.tail.min(size), probe.tail.min(size))
                };
                if !candidates.iter().any(fits) {
                    let _ = writeln!(
                        wrong,
                        "read_ends({}, {}) of {name}: size {}, {} head and {} tail bytes, of none of {candidates:?}",
                        probe.head,
                        probe.tail,
                        ends.size,
                        ends.head.len(),
                        ends.tail.len()
                    );
                }
            }
            Err(e) if exact => {
                let _ = writeln!(
                    wrong,
                    "read_ends of {name} failed although every fault is ridden out: {e}"
                );
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// Bytes of `path` that more than `most` requests of `log` asked for, if any (or a request
/// without one closed range).
pub(super) fn requested_too_often(
    log: &[RequestRecord],
    path: &str,
    most: usize,
) -> Option<String> {
    // +1 where a range starts, -1 after it ends; sorted, a start after an end at one byte.
    let mut edges = Vec::new();
    for r in log.iter().filter(|r| r.path == path) {
        match r.byte_range {
            Some((a, b)) => edges.extend([(a, 1i64), (b + 1, -1)]),
            None => return Some(format!("a request without one closed range: {:?}", r.range)),
        }
    }
    edges.sort_unstable_by_key(|&(at, step)| (at, step));
    let mut depth = 0;
    for (at, step) in edges {
        depth += step;
        if depth > most as i64 {
            return Some(format!("byte {at} was requested {depth} times"));
        }
    }
    None
}

/// Open an [`ObjectReader`] on `object` and read `probe`'s ranges through it (through its
/// futures in an asynchronous case); anything wrong goes to `wrong`, and `Err` is a hang. A
/// reader stands for one version: opened with a strong ETag, every read through it holds bytes
/// of the version its size describes, or fails.
pub(super) fn read_through_a_reader(
    client: &Client,
    object: &Locator,
    probe: &ReaderProbe,
    case: &Case,
    wrong: &mut String,
    timer: &Timer,
) -> Result<(), String> {
    let name = name_of(probe.object);
    let told_end = case.faults.iter().any(|f| f.may_end_early(name));
    let exact = case.ridden_out && !(name == CHANGING && case.change_after.is_some());
    let candidates = case.versions(probe.object);
    let opened = match case.asynchronous {
        true => within(
            timer,
            "open_async",
            ObjectReader::open_async(client, object),
        )?,
        false => ObjectReader::open(client, object),
    };
    let reader = match opened {
        Ok(reader) => reader,
        Err(e) => {
            if exact {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} failed to open although every fault is ridden out: {e}"
                );
            }
            return Ok(());
        }
    };
    if case.dropped_futures {
        start_and_drop(reader.read_many_async(&probe.ranges));
    }
    let size = reader.size();
    if !candidates
        .iter()
        .any(|v| v.size == size || (told_end && size < v.size))
    {
        let _ = writeln!(
            wrong,
            "a reader of {name} has size {size}, of none of {candidates:?}"
        );
        return Ok(());
    }
    // Pinned to a tag that tells the versions apart, the reader reads the version of its size;
    // else each read follows the object as it is when it runs.
    let [a, b] = case.changing_etags;
    let distinct = name != CHANGING || (strong(a) && a != b);
    let eligible: Vec<Version> = candidates
        .iter()
        .copied()
        .filter(|v| told_end || reader.etag().is_none() || !distinct || v.size == size)
        .collect();
    let holds = |v: &Version, offset: u64, bytes: &[u8]| {
        bytes.is_empty()
            || offset + bytes.len() as u64 <= v.size
                && bytes
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == object_byte(v.salt, offset + i as u64))
    };
    let past_end =
        |offset: u64, length: u64| told_end || eligible.iter().any(|v| offset + length > v.size);
    let (offset, length) = probe.at;
    let mut buffer = vec![UNWRITTEN; length as usize];
    let (many, read) = match (case.asynchronous, case.threaded) {
        (true, _) => (
            within(
                timer,
                "read_many_async",
                reader.read_many_async(&probe.ranges),
            )?,
            within(
                timer,
                "read_at_async",
                reader.read_at_async(offset, &mut buffer),
            )?,
        ),
        // Two threads read through the reader at once.
        (false, true) => std::thread::scope(|s| {
            let at = s.spawn(|| reader.read_at(offset, &mut buffer));
            let many = reader.read_many(&probe.ranges);
            let read = at.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            (many, read)
        }),
        (false, false) => (
            reader.read_many(&probe.ranges),
            reader.read_at(offset, &mut buffer),
        ),
    };
    match many {
        Ok(all) => {
            let fits = eligible.iter().any(|v| {
                all.len() == probe.ranges.len()
                    && all
                        .iter()
                        .zip(&probe.ranges)
                        .all(|(bytes, &(offset, length))| {
                            bytes.len() as u64 == length && holds(v, offset, bytes)
                        })
            }) || (!distinct || reader.etag().is_none())
                && all
                    .iter()
                    .zip(&probe.ranges)
                    .all(|(bytes, &(offset, length))| {
                        bytes.len() as u64 == length
                            && eligible.iter().any(|v| holds(v, offset, bytes))
                    });
            if !fits {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_many {:?}: bytes of none of {eligible:?}",
                    probe.ranges
                );
            }
        }
        Err(e) if e.status() == Status::RangeNotSatisfiable => {
            // The error is a range's own: one that reaches past the end.
            let ended = match e.evidence() {
                Some(&Evidence::EndOfObject {
                    offset, requested, ..
                }) => probe.ranges.contains(&(offset, requested)) && past_end(offset, requested),
                _ => false,
            };
            if !ended {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_many {:?}: a false end: {e}",
                    probe.ranges
                );
            }
        }
        Err(e) if exact => {
            let _ = writeln!(
                wrong,
                "a reader of {name} read_many {:?} failed although every fault is ridden out: {e}",
                probe.ranges
            );
        }
        Err(_) => {}
    }
    match read {
        Ok(()) => {
            if !eligible.iter().any(|v| holds(v, offset, &buffer)) {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_at({offset}, {length}): bytes of none of {eligible:?}"
                );
            }
        }
        Err(e) if e.status() == Status::RangeNotSatisfiable => {
            let Some(&Evidence::EndOfObject {
                offset: at,
                requested,
                received,
                size: stated,
            }) = e.evidence()
            else {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} read_at({offset}, {length}): an end without its evidence: {e}"
                );
                return Ok(());
            };
            let prefix = &buffer[..(received as usize).min(buffer.len())];
            // The prefix of one version, which ends inside the read (unless a bare 416 told an
            // earlier end); a size stated that agrees with it, and is that version's where the
            // server tells the truth (a fault may state another a client cannot refute).
            let agrees = stated.is_none_or(|s| match received {
                0 => s <= offset,
                _ => s == offset + received,
            });
            let fits = eligible.iter().any(|v| {
                holds(v, offset, prefix)
                    && (told_end
                        || offset + received == v.size.max(offset)
                            && offset + length > v.size
                            && agrees
                            && (!exact || stated.is_none_or(|s| s == v.size)))
            });
            if (at, requested) != (offset, length) || !fits {
                let _ = writeln!(
                    wrong,
                    "a reader of {name} (size {size}) read_at({offset}, {length}): an end after {received} bytes fits none of {eligible:?}: {e}"
                );
            }
        }
        Err(e) if exact => {
            let _ = writeln!(
                wrong,
                "a reader of {name} read_at({offset}, {length}) failed although every fault is ridden out: {e}"
            );
        }
        Err(_) => {}
    }
    Ok(())
}
