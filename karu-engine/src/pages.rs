//! The room of a destination Karu owns is made present a step ahead of the bytes.
//!
//! A large destination Karu allocates is fresh memory from the kernel until glibc starts
//! recycling freed buffers (in a new process, the first batches of large reads), and copying
//! the bytes into fresh memory faults its 4 KiB pages in one at a time. On Linux the room just
//! ahead of the bytes is made present in steps of [`STEP`] instead, one
//! `madvise(MADV_POPULATE_WRITE)` per step (Linux 5.14 and later; an older kernel refuses it
//! once and the pages fault in as before): fewer, cheaper faults, less client CPU and wall.
//!
//! Room that is already resident is left as it is: once glibc recycles the freed buffers of
//! earlier reads, advising them again would only walk their page tables. One `mincore` of the
//! range's last page tells the two apart. With that check, both response bodies
//! (`http::landing`) and local reads (`file::reads`, before each `pread` into a vector) use
//! the advice: for recycled memory the check costs less than advising again, and large local
//! reads into Karu's buffers take less wall with the advice than without it.
//!
//! A caller's destination (a slice, filled in place) gets the same advice
//! ([`before_slice_write`]): a slice that was allocated and never written (a `vec![0; n]`, a
//! `malloc`, `numpy.empty`) is fresh memory as well, and its pages faulted in one at a time
//! cost more than the copy of the bytes into them. A large read fetched in parts fills a slice
//! at several places at once, so for a slice each write at the start of a step makes that
//! step and the next present, as the first write into a vector does. The advice only
//! prefaults: it changes no byte of the caller's memory, nor its mapping or protection.
//!
//! Memory still follows the data: a step is made present only once the bytes before it have
//! arrived, so a body that stops early leaves at most two steps it did not fill resident.
//! Destinations smaller than [`FROM`] are left to fault as they fill.

/// The least capacity worth the system calls.
const FROM: usize = 1 << 20;

/// How much room is made present at a time, ahead of the bytes.
const STEP: usize = 2 << 20;

/// Before `buf` grows to `to` bytes (at most its capacity): make its room up to the step
/// after `to`'s present, if it is not yet.
pub(crate) fn before_write(buf: &Vec<u8>, to: usize) {
    if let Some((lo, hi)) = room(buf.as_ptr() as usize, buf.capacity(), buf.len(), to) {
        populate(lo, hi, Memory::Karus);
    }
}

/// Before bytes land in `[at, to)` of `buf`'s capacity (`at` past `buf.len()` for a piece of
/// a split transfer that lands ahead of the bytes before it): make its room up to the step
/// after `to`'s present, as [`before_slice_write`] does for a slice.
pub(crate) fn before_write_at(buf: &Vec<u8>, at: usize, to: usize) {
    if let Some((lo, hi)) = room(buf.as_ptr() as usize, buf.capacity(), at, to) {
        populate(lo, hi, Memory::Karus);
    }
}

/// Before bytes land in `[at, to)` of `slice`, a caller's destination: make its room up to the
/// step after `to`'s present, if it is not yet (the steps from `at`'s too, when `at` starts
/// a step: the first write of a part).
pub(crate) fn before_slice_write(slice: &[u8], at: usize, to: usize) {
    if let Some((lo, hi)) = room(slice.as_ptr() as usize, slice.len(), at, to) {
        populate(lo, hi, Memory::Callers);
    }
}

/// Whose memory is advised: a vector Karu allocated is ordinary anonymous memory, so the
/// kernel refusing the advice there means it does not know it; a caller's slice may lie in
/// any mapping (a device's, whose pages cannot be prefaulted), so a refusal there says
/// nothing of the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memory {
    Karus,
    Callers,
}

/// The addresses `[lo, hi)` to make present before bytes land in `[from, to)` of a buffer at
/// `base` of `capacity` bytes, whole pages of [`PAGE_ALIGN`] only; `None` when nothing is
/// needed. After a write ending at `to`, the steps up to the one after `to`'s are present:
/// the ones up to the step after `from`'s already were, unless `from` starts a step (the
/// first write into a vector, or of a part into a slice): then from `from`'s step on.
fn room(base: usize, capacity: usize, from: usize, to: usize) -> Option<(usize, usize)> {
    if capacity < FROM || to <= from {
        return None;
    }
    let start = if from.is_multiple_of(STEP) {
        from
    } else {
        (from / STEP + 2) * STEP
    };
    let end = (to / STEP + 2).saturating_mul(STEP).min(capacity);
    let lo = base
        .checked_add(start)?
        .checked_next_multiple_of(PAGE_ALIGN)?;
    let hi = base.checked_add(end)? / PAGE_ALIGN * PAGE_ALIGN;
    (lo < hi).then_some((lo, hi))
}

/// A multiple of every page size Linux uses (4, 16 and 64 KiB), so advised ranges start and
/// end on page boundaries on every platform; the partial pages at the ends fault as before.
const PAGE_ALIGN: usize = 64 << 10;

/// Elsewhere the pages fault in as they fill; so they do under Miri, which has no page tables
/// to ask about (nor `madvise` and `mincore`).
#[cfg(any(not(target_os = "linux"), miri))]
fn populate(_lo: usize, _hi: usize, _memory: Memory) {}

#[cfg(all(target_os = "linux", not(miri)))]
use linux::populate;

#[cfg(all(target_os = "linux", not(miri)))]
mod linux {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Set when the kernel does not know `MADV_POPULATE_WRITE`.
    static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

    /// Make the whole pages `[lo, hi)` present, if the kernel can and they are not yet.
    pub(super) fn populate(lo: usize, hi: usize, memory: super::Memory) {
        if UNSUPPORTED.load(Ordering::Relaxed) || present(hi - super::PAGE_ALIGN) {
            return;
        }
        #[cfg(test)]
        ADVISED.with(|n| n.set(n.get() + 1));
        // SAFETY: `[lo, hi)` is whole pages inside a vector's allocation or a caller's
        // destination slice (see `room`), which the transfer writing it holds mutably.
        // Populating for write changes no byte, no mapping and no protection: it only faults
        // the pages in now instead of on their first write. Every failure (an old kernel, a
        // mapping that cannot be prefaulted, no memory left) leaves them to fault in on that
        // write, as without the advice.
        let rc =
            unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_POPULATE_WRITE) };
        if rc != 0
            && memory == super::Memory::Karus
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
        {
            UNSUPPORTED.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the page at `at` (page-aligned, inside a destination) is resident.
    ///
    /// The last page of a range stands for all of it: memory glibc recycled from freed
    /// buffers is resident throughout, and advising it again would only walk its page tables
    /// (14 % of a `tensors` batch's client CPU once glibc recycles the batches' buffers); fresh
    /// memory, from the kernel or from a heap that grew, is not, and it grows upwards. A
    /// page only ever read maps the shared zero page and counts as resident: it then faults
    /// on its first write, as without the advice.
    fn present(at: usize) -> bool {
        let mut flag = 0u8;
        // SAFETY: `at` is page-aligned inside a live allocation (see `room`); mincore only
        // reads the page tables and writes one byte for the one page of a 1-byte range.
        let rc = unsafe { libc::mincore(at as *mut libc::c_void, 1, &mut flag) };
        rc == 0 && flag & 1 == 1
    }

    #[cfg(test)]
    thread_local! {
        /// How many ranges this thread advised.
        pub(super) static ADVISED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[cfg(test)]
    pub(super) fn is_unsupported() -> bool {
        UNSUPPORTED.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn room_is_made_present_a_step_ahead_once_per_step() {
        let base = 1 << 40;
        // The first write makes its step and the next present.
        assert_eq!(
            room(base, 64 * MIB, 0, 16 << 10),
            Some((base, base + 2 * STEP))
        );
        // Writes inside the first step need nothing more.
        assert_eq!(room(base, 64 * MIB, 16 << 10, MIB), None);
        assert_eq!(room(base, 64 * MIB, MIB, STEP - 1), None);
        // Crossing into the second step makes the third present.
        assert_eq!(
            room(base, 64 * MIB, STEP - 1, STEP + 5),
            Some((base + 2 * STEP, base + 3 * STEP))
        );
        // A write across several steps makes the rest of them present, and the step after
        // its end's.
        assert_eq!(
            room(base, 64 * MIB, STEP + 5, 5 * STEP),
            Some((base + 3 * STEP, base + 7 * STEP))
        );
        // Never beyond the capacity: in a 5 MiB buffer the first write makes two steps
        // present, and the crossing into the second step the last MiB.
        assert_eq!(room(base, 5 * MIB, 0, 1), Some((base, base + 4 * MIB)));
        assert_eq!(
            room(base, 5 * MIB, 1, STEP),
            Some((base + 4 * MIB, base + 5 * MIB))
        );
        assert_eq!(room(base, 5 * MIB, 3 * MIB, 5 * MIB), None);
        // Nothing for small buffers or empty writes.
        assert_eq!(room(base, FROM - 1, 0, 1000), None);
        assert_eq!(room(base, 64 * MIB, 7, 7), None);
    }

    #[test]
    fn a_part_that_starts_a_step_makes_its_own_room_present() {
        let base = 1 << 40;
        // The first write of a part at 8 MiB makes its step and the next present (before
        // the slices' advice, nothing was: each part faulted its first two steps in page by
        // page).
        assert_eq!(
            room(base, 64 * MIB, 8 * MIB, 8 * MIB + (16 << 10)),
            Some((base + 8 * MIB, base + 8 * MIB + 2 * STEP))
        );
        // Its later writes go on as in a vector: the step after the one they cross into.
        assert_eq!(room(base, 64 * MIB, 8 * MIB + (16 << 10), 9 * MIB), None);
        assert_eq!(
            room(base, 64 * MIB, 8 * MIB + STEP - 1, 8 * MIB + STEP + 5),
            Some((base + 8 * MIB + 2 * STEP, base + 8 * MIB + 3 * STEP))
        );
        // Never beyond the slice.
        assert_eq!(
            room(base, 9 * MIB, 8 * MIB, 8 * MIB + 1),
            Some((base + 8 * MIB, base + 9 * MIB))
        );
    }

    #[test]
    fn advised_ranges_are_whole_pages_inside_the_buffer() {
        // glibc's large chunks start 16 bytes into a page.
        let base = (1 << 40) + 16;
        let (lo, hi) = room(base, 8 * MIB, 0, 100).unwrap();
        assert_eq!(lo % PAGE_ALIGN, 0);
        assert_eq!(hi % PAGE_ALIGN, 0);
        assert!(lo >= base && hi <= base + 8 * MIB, "{lo:x}..{hi:x}");
        assert_eq!(hi, (base + 2 * STEP) / PAGE_ALIGN * PAGE_ALIGN);
        assert_eq!(room(usize::MAX - 10, 8 * MIB, 0, 100), None);
    }

    /// How many of the whole pages in `[from, to)` of `buf`'s allocation are resident, and
    /// how many there are.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn resident(buf: &[u8], from: usize, to: usize) -> (usize, usize) {
        let page = 4096;
        let start = (buf.as_ptr() as usize + from).next_multiple_of(page);
        let end = (buf.as_ptr() as usize + to) / page * page;
        let pages = (end - start) / page;
        let mut flags = vec![0u8; pages];
        // SAFETY: the range lies inside `buf`'s allocation; mincore only reads the page
        // tables and writes one byte per page into `flags`.
        let rc = unsafe {
            libc::mincore(
                start as *mut libc::c_void,
                pages * page,
                flags.as_mut_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        (flags.iter().filter(|b| *b & 1 == 1).count(), pages)
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn fresh_room_becomes_resident_a_step_ahead_of_the_bytes() {
        // 64 MiB is above glibc's largest mmap threshold: fresh pages from the kernel.
        let mut buf: Vec<u8> = Vec::with_capacity(64 * MIB);
        assert_eq!(resident(&buf, 0, 8 * MIB).0, 0, "fresh memory");
        before_write(&buf, 4096);
        buf.resize(4096, 7);
        if linux::is_unsupported() {
            return; // a kernel before 5.14: nothing to observe
        }
        let (ready, pages) = resident(&buf, PAGE_ALIGN, 2 * STEP - PAGE_ALIGN);
        assert_eq!(ready, pages, "the first two steps");
        let (ready, _) = resident(&buf, 2 * STEP + PAGE_ALIGN, 8 * MIB);
        assert_eq!(ready, 0, "nothing beyond the next step");
        // Bytes arriving into the second step make the third present.
        before_write(&buf, STEP + 10);
        buf.resize(STEP + 10, 7);
        let (ready, pages) = resident(&buf, 2 * STEP + PAGE_ALIGN, 3 * STEP - PAGE_ALIGN);
        assert_eq!(ready, pages, "the third step");
        let (ready, _) = resident(&buf, 3 * STEP + PAGE_ALIGN, 8 * MIB);
        assert_eq!(ready, 0, "nothing beyond it");
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn a_fresh_slice_becomes_resident_a_step_ahead_of_each_part() {
        // A caller's buffer allocated and never written (calloc: fresh pages from the kernel).
        let slice = vec![0u8; 64 * MIB];
        assert_eq!(resident(&slice, 0, 64 * MIB).0, 0, "fresh memory");
        // The first bytes of a part at 8 MiB.
        before_slice_write(&slice, 8 * MIB, 8 * MIB + 4096);
        if linux::is_unsupported() {
            return; // a kernel before 5.14: nothing to observe
        }
        let (ready, pages) = resident(
            &slice,
            8 * MIB + PAGE_ALIGN,
            8 * MIB + 2 * STEP - PAGE_ALIGN,
        );
        assert_eq!(ready, pages, "the part's first two steps");
        assert_eq!(resident(&slice, 0, 8 * MIB).0, 0, "nothing before the part");
        let (ready, _) = resident(&slice, 8 * MIB + 2 * STEP + PAGE_ALIGN, 64 * MIB);
        assert_eq!(ready, 0, "nothing beyond its next step");
        // The bytes themselves are the caller's: the advice changed none.
        assert!(slice.iter().all(|&b| b == 0));
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn recycled_room_is_not_advised_again() {
        let advised = || linux::ADVISED.with(|n| n.get());
        // Every page written once, as in a buffer glibc hands out again after a free.
        let mut buf = vec![1u8; 8 * MIB];
        buf.clear();
        let before = advised();
        before_write(&buf, 4096);
        buf.resize(4096, 7);
        before_write(&buf, STEP + 10);
        assert_eq!(advised(), before, "resident room is left as it is");
        // Fresh room is advised (unless the kernel cannot).
        let fresh: Vec<u8> = Vec::with_capacity(64 * MIB);
        before_write(&fresh, 4096);
        if !linux::is_unsupported() {
            assert_eq!(advised(), before + 1, "fresh room is made present");
        }
    }
}
