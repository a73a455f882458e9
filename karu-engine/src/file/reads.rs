//! The reads of one file, straight into their destinations: one read at a time (the simple
//! path), or a run of adjacent reads with one vectored read (`preadv`) whose pieces are the
//! reads' own destinations, so no byte is read that a read did not ask for.
//!
//! Owned buffers are filled in their spare capacity and never zeroed first: their length grows
//! only by the bytes the kernel says it wrote.

use std::fs::File;
use std::io;
use std::mem::MaybeUninit;

use crate::batch::read::Open;

/// One read of a file: `length` bytes at `offset`, into `dst`.
pub(crate) struct Dest<'s> {
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) dst: Open<'s>,
}

/// The first buffer size for a file whose metadata states no size (a device): doubled as long
/// as reads fill it, so the buffer follows what can be read, not the length asked for.
pub(crate) const UNSIZED_FIRST: u64 = 1 << 20;

/// Most pieces of one vectored read (Linux's `UIO_MAXIOV`).
const MAX_PIECES: usize = 1024;

/// Every read of `reads`, in order, each with the bytes it received (fewer than its length
/// only at the end of the file) or its own error. Adjacent reads that lie inside the file's
/// size (`size`, from its metadata when opened) share vectored reads; the others, and any
/// read a vectored one could not finish, take the simple path ([`read_one`]). The outcome is
/// the simple path's for every read, whatever the file does meanwhile.
pub(crate) fn read_all(
    file: &File,
    size: Option<u64>,
    reads: &mut [Dest<'_>],
) -> Vec<io::Result<u64>> {
    let mut results = Vec::with_capacity(reads.len());
    let mut i = 0;
    while i < reads.len() {
        let run = adjacent_run(size, &reads[i..]);
        if run >= 2 {
            results.extend(read_run(file, size, &mut reads[i..i + run]));
            i += run;
        } else {
            results.push(read_one(file, size, &mut reads[i]));
            i += 1;
        }
    }
    results
}

/// How many reads from the first one form a run a vectored read may serve: each starts where
/// the one before ends, and all end inside the file's size (so each owned buffer's capacity
/// is exactly its length, as on the simple path).
fn adjacent_run(size: Option<u64>, reads: &[Dest<'_>]) -> usize {
    if !cfg!(target_os = "linux") {
        return reads.len().min(1);
    }
    let Some(size) = size else {
        return reads.len().min(1); // a device: memory follows what it gives, one read at a time
    };
    let inside = |r: &Dest<'_>| {
        r.offset
            .checked_add(r.length)
            .is_some_and(|end| end <= size && end <= i64::MAX as u64)
            && usize::try_from(r.length).is_ok()
    };
    let mut n = 0;
    let mut end = None;
    for r in reads {
        if !inside(r) || end.is_some_and(|e| e != r.offset) {
            break;
        }
        end = Some(r.offset + r.length);
        n += 1;
    }
    n
}

/// Read a run of adjacent reads inside the file's size with vectored reads, at most
/// [`MAX_PIECES`] at a time. A vectored read that stops short (the file shrank, or the kernel
/// split it) hands the read it stopped in to the simple path, which continues from the bytes
/// already there; a vectored read that fails leaves its reads to the simple path, so each
/// gets its own error.
fn read_run(file: &File, size: Option<u64>, run: &mut [Dest<'_>]) -> Vec<io::Result<u64>> {
    let mut results = Vec::with_capacity(run.len());
    let mut done = 0;
    while done < run.len() {
        let batch_end = run.len().min(done + MAX_PIECES);
        let Some(n) = prepare_and_read(file, &mut run[done..batch_end]) else {
            // Could not allocate or the vectored read failed: every read on its own.
            for r in &mut run[done..] {
                results.push(read_one(file, size, r));
            }
            return results;
        };
        let mut left = n;
        while done < batch_end {
            let r = &mut run[done];
            let take = left.min(r.length);
            left -= take;
            set_filled(&mut r.dst, take);
            done += 1;
            if take == r.length {
                results.push(Ok(take));
            } else {
                // Stopped inside this read: it continues alone; the next vectored read starts
                // after it.
                results.push(continue_one(file, size, r, take));
                break;
            }
        }
    }
    results
}

/// One vectored read into the destinations of `reads` (owned buffers emptied and reserved to
/// exactly their read's length first). The bytes it read, or `None` if a buffer could not be
/// allocated or the read failed (after retrying interruptions).
fn prepare_and_read(file: &File, reads: &mut [Dest<'_>]) -> Option<u64> {
    let mut pieces: Vec<libc::iovec> = Vec::with_capacity(reads.len());
    for r in reads.iter_mut() {
        let len = usize::try_from(r.length).ok()?;
        let base: *mut u8 = match &mut r.dst {
            Open::Slice(s) => {
                // `Sink::open` gave a slice of exactly the read's length.
                if s.len() != len {
                    return None;
                }
                s.as_mut_ptr()
            }
            Open::Vec(v) => {
                v.clear();
                v.try_reserve_exact(len).ok()?;
                v.spare_capacity_mut().as_mut_ptr().cast()
            }
        };
        pieces.push(libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        });
    }
    let offset = libc::off_t::try_from(reads.first()?.offset).ok()?;
    let count = libc::c_int::try_from(pieces.len()).ok()?;
    preadv(file, &pieces, count, offset)
}

#[cfg(target_os = "linux")]
fn preadv(
    file: &File,
    pieces: &[libc::iovec],
    count: libc::c_int,
    offset: libc::off_t,
) -> Option<u64> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: every piece points into memory this thread may write for its whole length
        // and nothing else references meanwhile: a caller's slice of exactly that length
        // (held through `&mut`), or the spare capacity of a `Vec` reserved to at least that
        // length (held through `&mut`, not touched until the read returns). The kernel writes
        // at most `iov_len` bytes into each piece and reads nothing from them; `count` is
        // `pieces.len()`; the descriptor is open for as long as `file` is borrowed.
        let n = unsafe { libc::preadv(file.as_raw_fd(), pieces.as_ptr(), count, offset) };
        match u64::try_from(n) {
            Ok(n) => return Some(n),
            Err(_) if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn preadv(_: &File, _: &[libc::iovec], _: libc::c_int, _: libc::off_t) -> Option<u64> {
    None // runs are never formed elsewhere (`adjacent_run`)
}

/// After a vectored read wrote `filled` bytes into the start of a destination: an owned
/// buffer's length becomes `filled` (a slice has nothing to record).
fn set_filled(dst: &mut Open<'_>, filled: u64) {
    if let Open::Vec(v) = dst {
        let filled = filled as usize; // at most the read's length, which fits (checked)
        debug_assert!(filled <= v.capacity() && v.is_empty());
        // SAFETY: the vector was emptied and reserved to at least the read's length before the
        // vectored read, whose piece for it began at its spare capacity's start; the kernel
        // reported writing `filled` bytes there in order (`preadv` fills its pieces one after
        // another, and this read's bytes precede the bytes of the reads after it), and
        // `filled <= capacity`. So the first `filled` elements are initialised.
        unsafe { v.set_len(filled) };
    }
}

/// A read on its own (the simple path): a caller's slice is filled in place; an owned buffer
/// holds only what exists.
pub(crate) fn read_one(file: &File, size: Option<u64>, r: &mut Dest<'_>) -> io::Result<u64> {
    match &mut r.dst {
        Open::Slice(dst) => read_at_most(file, r.offset, dst),
        Open::Vec(buffer) => read_owned(file, r.offset, r.length, size, buffer),
    }
}

/// The simple path for a read that already holds its first `filled` bytes (a vectored read
/// stopped inside it).
fn continue_one(file: &File, size: Option<u64>, r: &mut Dest<'_>, filled: u64) -> io::Result<u64> {
    let at = r.offset + filled;
    let more = match &mut r.dst {
        Open::Slice(dst) => read_at_most(file, at, &mut dst[filled as usize..])?,
        Open::Vec(buffer) => fill_owned(file, r.offset, r.length, size, buffer)? - filled,
    };
    Ok(filled + more)
}

/// Read up to `length` bytes at `offset` into an owned buffer (emptied first), sized to what
/// the file held (`size`, from its metadata) and grown, from fresh metadata, if the file grew
/// since; with no size (not a regular file) the buffer starts small and doubles while reads
/// fill it. Memory follows the data: a caller-chosen length is never allocated up front, and
/// nothing is zeroed. Returns the bytes read.
pub(crate) fn read_owned(
    file: &File,
    offset: u64,
    length: u64,
    size: Option<u64>,
    buffer: &mut Vec<u8>,
) -> io::Result<u64> {
    buffer.clear();
    fill_owned(file, offset, length, size, buffer)
}

/// [`read_owned`] for a buffer that may already hold the read's first bytes.
fn fill_owned(
    file: &File,
    offset: u64,
    length: u64,
    size: Option<u64>,
    buffer: &mut Vec<u8>,
) -> io::Result<u64> {
    let too_big = || {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            "cannot allocate the destination",
        )
    };
    let mut want = match size {
        Some(size) => length.min(size.saturating_sub(offset)),
        None => length.min(UNSIZED_FIRST),
    }
    .max(buffer.len() as u64);
    let mut filled = buffer.len() as u64;
    loop {
        let want_len = usize::try_from(want).map_err(|_| too_big())?;
        buffer
            .try_reserve_exact(want_len - buffer.len())
            .map_err(|_| too_big())?;
        crate::pages::before_write(buffer, want_len);
        filled += read_into_spare(file, offset + filled, buffer, want_len)?;
        if filled < want || want == length {
            return Ok(filled);
        }
        want = match size {
            None => length.min(want.saturating_mul(2)),
            Some(_) => {
                // The file may have grown since its size was read: ask again, and read what
                // is new.
                let exists = file.metadata()?.len().saturating_sub(offset);
                if exists <= filled {
                    return Ok(filled);
                }
                length.min(exists)
            }
        };
    }
}

/// Fill `buffer` up to `up_to` bytes (within its capacity) from `offset` with positional reads
/// into its spare capacity, looping over short reads; stops early only at the end of the file.
/// Returns the bytes added.
fn read_into_spare(
    file: &File,
    offset: u64,
    buffer: &mut Vec<u8>,
    up_to: usize,
) -> io::Result<u64> {
    let start = buffer.len();
    while buffer.len() < up_to {
        let at = offset + (buffer.len() - start) as u64;
        // No file extends past i64::MAX, and pread refuses ranges that would: stop there.
        let addressable =
            usize::try_from((i64::MAX as u64).saturating_sub(at)).unwrap_or(usize::MAX);
        let room = (up_to - buffer.len()).min(addressable);
        if room == 0 {
            break;
        }
        let spare: &mut [MaybeUninit<u8>] = &mut buffer.spare_capacity_mut()[..room];
        match rustix::io::pread(file, spare, at) {
            Ok(([], _)) => break,
            Ok((read, _)) => {
                let n = read.len();
                // SAFETY: `pread` initialised the first `n` bytes of the spare capacity (rustix
                // returns them as the initialised part of the slice it was given, which began
                // at the spare capacity's start), and `n <= room <= capacity - len`.
                unsafe { buffer.set_len(buffer.len() + n) };
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok((buffer.len() - start) as u64)
}

/// Fill `dst` from `offset` with positional reads, looping over short reads; stops early only
/// at the end of the file. Returns the bytes read.
pub(crate) fn read_at_most(file: &File, offset: u64, dst: &mut [u8]) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut filled = 0usize;
    while filled < dst.len() {
        let at = offset + filled as u64;
        // No file extends past i64::MAX, and pread refuses ranges that would: stop there.
        let addressable = (i64::MAX as u64).saturating_sub(at);
        let room = (dst.len() - filled).min(usize::try_from(addressable).unwrap_or(usize::MAX));
        if room == 0 {
            break;
        }
        match file.read_at(&mut dst[filled..filled + room], at) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A read of the property: where, how long, and into what.
    #[derive(Debug, Clone)]
    struct Case {
        offset: u64,
        length: u64,
        /// `None`: a caller's slice; `Some(capacity)`: an owned buffer with this capacity and
        /// stale contents.
        owned: Option<usize>,
    }

    fn content(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// The bytes each read delivered and what it returned, read with `read_all` (`vectored`)
    /// or one at a time.
    fn outcome(
        file: &File,
        size: Option<u64>,
        cases: &[Case],
        vectored: bool,
    ) -> Vec<(Result<u64, io::ErrorKind>, Vec<u8>)> {
        let mut slices: Vec<Vec<u8>> = cases
            .iter()
            .map(|c| vec![0xEE; c.length as usize])
            .collect();
        let mut owned: Vec<Vec<u8>> = cases
            .iter()
            .map(|c| {
                let mut v = Vec::with_capacity(c.owned.unwrap_or(0));
                v.extend(std::iter::repeat_n(0xDD, c.owned.unwrap_or(0) / 2));
                v
            })
            .collect();
        let mut dests: Vec<Dest<'_>> = cases
            .iter()
            .zip(slices.iter_mut().zip(owned.iter_mut()))
            .map(|(c, (slice, vec))| Dest {
                offset: c.offset,
                length: c.length,
                dst: match c.owned {
                    None => Open::Slice(slice),
                    Some(_) => Open::Vec(vec),
                },
            })
            .collect();
        let results: Vec<io::Result<u64>> = if vectored {
            read_all(file, size, &mut dests)
        } else {
            dests.iter_mut().map(|d| read_one(file, size, d)).collect()
        };
        drop(dests);
        results
            .into_iter()
            .zip(cases)
            .zip(slices.into_iter().zip(owned))
            .map(|((r, c), (slice, vec))| {
                let r = r.map_err(|e| e.kind());
                let bytes = match (c.owned, &r) {
                    (None, Ok(n)) => slice[..*n as usize].to_vec(),
                    (None, Err(_)) => Vec::new(),
                    (Some(_), _) => vec,
                };
                (r, bytes)
            })
            .collect()
    }

    /// Reads in runs: each run starts anywhere around the file (past its end too) and its
    /// reads follow each other, adjacent, overlapping or apart.
    fn cases() -> impl Strategy<Value = Vec<Case>> {
        let read = (
            0u64..600,
            prop_oneof![Just(None), (0usize..700).prop_map(Some)],
        );
        let run = (
            0u64..2_400,
            prop::collection::vec((prop_oneof![3 => Just(0i64), 1 => -50i64..50], read), 1..12),
        );
        prop::collection::vec(run, 1..6).prop_map(|runs| {
            let mut out = Vec::new();
            for (start, reads) in runs {
                let mut at = start;
                for (step, (length, owned)) in reads {
                    let offset = at.saturating_add_signed(step);
                    out.push(Case {
                        offset,
                        length,
                        owned,
                    });
                    at = offset + length;
                }
            }
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the reads (adjacent runs, overlapping, apart, zero-length, past the end)
        /// and whatever the file did since its size was read (shrunk, grown, unchanged), the
        /// vectored path delivers exactly what the simple path delivers, read by read, and
        /// both deliver the file's bytes: all of them up to its end.
        #[test]
        fn vectored_reads_deliver_what_single_reads_deliver(
            file_len in 0usize..2_000,
            mode in 0u8..3,
            stale in 0u64..2_500,
            cases in cases(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f");
            let data = content(file_len);
            std::fs::write(&path, &data).unwrap();
            let file = File::open(&path).unwrap();
            // The size the file had when opened: its size now, or a stale one (larger than
            // now if it shrank since, smaller if it grew), or none (as for a device).
            let size = match mode {
                0 => None,
                1 => Some(file_len as u64),
                _ => Some(stale),
            };
            let vectored = outcome(&file, size, &cases, true);
            let single = outcome(&file, size, &cases, false);
            prop_assert_eq!(&vectored, &single);
            for (c, (r, bytes)) in cases.iter().zip(&vectored) {
                let from = (c.offset as usize).min(file_len);
                let to = (c.offset.saturating_add(c.length) as usize).min(file_len);
                prop_assert_eq!(r, &Ok((to - from) as u64), "{:?}", c);
                prop_assert_eq!(&bytes[..], &data[from..to], "{:?}", c);
            }
        }
    }

    #[test]
    fn a_run_stopped_by_the_end_of_a_shrunk_file_continues_read_by_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data = content(1_000);
        std::fs::write(&path, &data[..450]).unwrap(); // stated 1,000 bytes, now 450
        let file = File::open(&path).unwrap();
        let cases: Vec<Case> = [(300, 100), (400, 100), (500, 100), (600, 10)]
            .into_iter()
            .enumerate()
            .map(|(i, (offset, length))| Case {
                offset,
                length,
                owned: (i % 2 == 1).then_some(0),
            })
            .collect();
        assert_eq!(adjacent_run(Some(1_000), &dests_of(&cases)), 4);
        let got = outcome(&file, Some(1_000), &cases, true);
        let expected: Vec<(Result<u64, io::ErrorKind>, Vec<u8>)> = vec![
            (Ok(100), data[300..400].to_vec()),
            (Ok(50), data[400..450].to_vec()),
            (Ok(0), Vec::new()),
            (Ok(0), Vec::new()),
        ];
        assert_eq!(got, expected);
    }

    /// Slices standing in for the cases (for `adjacent_run`, which looks only at offsets).
    fn dests_of(cases: &[Case]) -> Vec<Dest<'static>> {
        cases
            .iter()
            .map(|c| Dest {
                offset: c.offset,
                length: c.length,
                dst: Open::Slice(Box::leak(vec![0; c.length as usize].into_boxed_slice())),
            })
            .collect()
    }

    #[test]
    fn runs_are_adjacent_reads_inside_the_stated_size() {
        let cases = |spans: &[(u64, u64)]| -> Vec<Case> {
            spans
                .iter()
                .map(|&(offset, length)| Case {
                    offset,
                    length,
                    owned: None,
                })
                .collect()
        };
        let run = |size, spans: &[(u64, u64)]| adjacent_run(size, &dests_of(&cases(spans)));
        assert_eq!(run(Some(100), &[(0, 10), (10, 5), (15, 85)]), 3);
        assert_eq!(run(Some(100), &[(0, 10), (11, 5)]), 1, "a gap ends a run");
        assert_eq!(
            run(Some(100), &[(0, 10), (9, 5)]),
            1,
            "an overlap ends a run"
        );
        assert_eq!(
            run(Some(100), &[(0, 10), (10, 91)]),
            1,
            "past the stated size"
        );
        assert_eq!(run(Some(100), &[(95, 10), (105, 1)]), 0);
        assert_eq!(
            run(None, &[(0, 10), (10, 5)]),
            1,
            "a device reads one at a time"
        );
    }
}
