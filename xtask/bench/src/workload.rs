//! The workloads of the benchmark protocol (`xtask/bench/README.md`): objects (virtual on the mock server) and the reads of a
//! batch, generated from a seed so that every method reads the same ranges.

use std::ops::Range;

use crate::report::bytes;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `reads` × 4 KiB at uniform random offsets of a 1 GiB object.
    Scattered { reads: usize },
    /// 200 runs of 8 × 64 KiB reads, 4–64 KiB apart, in a 1 GiB object.
    Clustered,
    /// 300 reads of 1–32 MiB in 30 groups of 10 adjacent reads, in a 4 GiB object.
    Tensors,
    /// 500 objects of 64 MiB, 5 × 64 KiB random reads in each.
    ManyObjects,
    /// `read_ends(64 KiB, 64 KiB)` on 1,000 objects of 64 MiB.
    Ends,
}

/// An object of a workload, served as a virtual object by the mock server.
#[derive(Debug, Clone)]
pub(crate) struct Object {
    /// Path on the server (starts with `/`).
    pub(crate) path: String,
    /// Size in bytes.
    pub(crate) size: u64,
}

/// One read (or, for `ends`, one end of an object): `length` bytes at `offset` of `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Index into [`Workload::objects`].
    pub(crate) object: usize,
    pub(crate) offset: u64,
    pub(crate) length: u64,
}

impl Piece {
    pub(crate) fn range(&self) -> Range<u64> {
        self.offset..self.offset + self.length
    }
}

/// What a batch of the workload asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Plain reads: [`Workload::pieces`] are the reads, in submission order.
    Reads,
    /// `read_ends(head, tail)` on every object: the pieces are each object's head then its
    /// tail.
    Ends { head: u64, tail: u64 },
}

/// A workload: objects and the pieces every method must deliver.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    /// The name of the `karu-bench` subcommand.
    pub(crate) name: &'static str,
    /// One line saying what is read.
    pub(crate) description: String,
    pub(crate) objects: Vec<Object>,
    pub(crate) kind: Kind,
    pub(crate) pieces: Vec<Piece>,
}

impl Workload {
    pub(crate) fn new(shape: Shape, seed: u64) -> Workload {
        let mut rng = fastrand::Rng::with_seed(seed);
        match shape {
            Shape::Scattered { reads } => scattered(&mut rng, reads),
            Shape::Clustered => clustered(&mut rng),
            Shape::Tensors => tensors(&mut rng),
            Shape::ManyObjects => many_objects(&mut rng),
            Shape::Ends => ends(),
        }
    }

    /// Bytes the pieces ask for (overlaps counted once per piece).
    pub(crate) fn requested_bytes(&self) -> u64 {
        self.pieces.iter().map(|p| p.length).sum()
    }

    /// The pieces of each object, as (object, indices into `pieces`), objects in order.
    pub(crate) fn by_object(&self) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.objects.len()];
        for (i, p) in self.pieces.iter().enumerate() {
            groups[p.object].push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .collect()
    }
}

fn scattered(rng: &mut fastrand::Rng, reads: usize) -> Workload {
    let size = GIB;
    let length = 4 * KIB;
    let pieces = (0..reads)
        .map(|_| Piece {
            object: 0,
            offset: rng.u64(0..=size - length),
            length,
        })
        .collect();
    Workload {
        name: if reads == 1_000 {
            "scattered"
        } else {
            "scattered-10k"
        },
        description: format!(
            "{reads} reads of 4 KiB at uniform random offsets of one {} object",
            bytes(size)
        ),
        objects: vec![Object {
            path: "/scattered.bin".into(),
            size,
        }],
        kind: Kind::Reads,
        pieces,
    }
}

fn clustered(rng: &mut fastrand::Rng) -> Workload {
    let size = GIB;
    let (runs, per_run, length) = (200, 8, 64 * KIB);
    let longest_run = per_run * length + (per_run - 1) * 64 * KIB;
    let mut pieces = Vec::with_capacity((runs * per_run) as usize);
    for _ in 0..runs {
        let mut offset = rng.u64(0..=size - longest_run);
        for _ in 0..per_run {
            pieces.push(Piece {
                object: 0,
                offset,
                length,
            });
            offset += length + rng.u64(4 * KIB..=64 * KIB);
        }
    }
    Workload {
        name: "clustered",
        description: format!(
            "{runs} runs of {per_run} reads of 64 KiB, 4-64 KiB apart, at random places in one {} object",
            bytes(size)
        ),
        objects: vec![Object {
            path: "/clustered.bin".into(),
            size,
        }],
        kind: Kind::Reads,
        pieces,
    }
}

fn tensors(rng: &mut fastrand::Rng) -> Workload {
    let size = 4 * GIB;
    let (groups, per_group) = (30u64, 10u64);
    // Log-uniform sizes between 1 and 32 MiB: many small tensors, a few large ones.
    let lengths: Vec<u64> = (0..groups * per_group)
        .map(|_| {
            let exponent = rng.f64() * 5.0; // 2^0 .. 2^5 MiB
            ((MIB as f64) * exponent.exp2()) as u64
        })
        .collect();
    let free = size - lengths.iter().sum::<u64>();
    let mut offset = 0;
    let mut pieces = Vec::with_capacity(lengths.len());
    for group in lengths.chunks(per_group as usize) {
        offset += rng.u64(0..=free / groups);
        for &length in group {
            pieces.push(Piece {
                object: 0,
                offset,
                length,
            });
            offset += length;
        }
    }
    Workload {
        name: "tensors",
        description: format!(
            "{} reads of 1-32 MiB (log-uniform) in {groups} groups of {per_group} adjacent reads, random gaps between groups, in one {} object",
            groups * per_group,
            bytes(size)
        ),
        objects: vec![Object {
            path: "/tensors.bin".into(),
            size,
        }],
        kind: Kind::Reads,
        pieces,
    }
}

fn many_objects(rng: &mut fastrand::Rng) -> Workload {
    let (count, size, per_object, length) = (500, 64 * MIB, 5, 64 * KIB);
    let objects: Vec<Object> = (0..count)
        .map(|i| Object {
            path: format!("/many/{i:03}.bin"),
            size,
        })
        .collect();
    let pieces = (0..count)
        .flat_map(|object| (0..per_object).map(move |_| object))
        .map(|object| Piece {
            object,
            offset: rng.u64(0..=size - length),
            length,
        })
        .collect();
    Workload {
        name: "many-objects",
        description: format!(
            "{count} objects of {}, {per_object} reads of 64 KiB at random offsets in each",
            bytes(size)
        ),
        objects,
        kind: Kind::Reads,
        pieces,
    }
}

fn ends() -> Workload {
    let (count, size, head, tail) = (1_000, 64 * MIB, 64 * KIB, 64 * KIB);
    let objects: Vec<Object> = (0..count)
        .map(|i| Object {
            path: format!("/ends/{i:04}.bin"),
            size,
        })
        .collect();
    let pieces = (0..count)
        .flat_map(|object| {
            [
                Piece {
                    object,
                    offset: 0,
                    length: head.min(size),
                },
                Piece {
                    object,
                    offset: size - tail.min(size),
                    length: tail.min(size),
                },
            ]
        })
        .collect();
    Workload {
        name: "ends",
        description: format!(
            "read_ends(64 KiB, 64 KiB) on {count} objects of {}",
            bytes(size)
        ),
        objects,
        kind: Kind::Ends { head, tail },
        pieces,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_stay_inside_their_objects() {
        for shape in [
            Shape::Scattered { reads: 1_000 },
            Shape::Clustered,
            Shape::Tensors,
            Shape::ManyObjects,
            Shape::Ends,
        ] {
            let w = Workload::new(shape, 7);
            for p in &w.pieces {
                assert!(p.length > 0);
                assert!(p.offset + p.length <= w.objects[p.object].size, "{shape:?}");
            }
        }
    }

    #[test]
    fn tensors_are_adjacent_in_groups() {
        let w = Workload::new(Shape::Tensors, 1);
        assert_eq!(w.pieces.len(), 300);
        for group in w.pieces.chunks(10) {
            for pair in group.windows(2) {
                assert_eq!(pair[0].offset + pair[0].length, pair[1].offset);
            }
        }
        assert!(
            w.pieces
                .iter()
                .all(|p| (MIB..=32 * MIB).contains(&p.length))
        );
    }
}
