//! The planner: random batches (duplicates, adjacent, overlapping and invalid reads, windows,
//! several groups, some unmergeable) under random limits.
//!
//! Input: any bytes, read as a batch and four limits. Invariant: `karu_engine::plan::check`,
//! the planner's own property (coverage, positions, hulls, order, all four guards, transfers
//! closed only where a guard says so, determinism); and planning never panics.
use arbitrary::{Result, Unstructured};
use karu_engine::Window;
use karu_engine::plan::{self, Limits, PlanRead};

/// Check one input (any bytes); panics on a broken invariant.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((reads, limits)) = batch(&mut u) else {
        return;
    };
    let planned = plan::plan(&reads, &limits);
    if let Err(why) = plan::check(&reads, &limits, &planned) {
        panic!("{why}\nlimits {limits:?}\nreads {reads:?}\nplan {planned:?}");
    }
}

fn offset(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => u.int_in_range(0u64..=4096)?,
        1 => u.int_in_range(0u64..=64 << 20)?,
        2 => u64::MAX - u.int_in_range(0u64..=4096)?,
        _ => u.arbitrary()?,
    })
}

fn length(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => 0,
        1 => karu_engine::UNBOUNDED,
        2 | 3 => u.int_in_range(1u64..=64)?,
        4 => u.int_in_range(1u64..=2 << 20)?,
        _ => u.arbitrary()?,
    })
}

fn window(u: &mut Unstructured<'_>) -> Result<Option<Window>> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 | 1 => None,
        2 => Some(Window {
            start: u.int_in_range(0u64..=1 << 20)?,
            len: if u.arbitrary()? {
                Some(u.int_in_range(0u64..=1 << 20)?)
            } else {
                None
            },
        }),
        _ => Some(Window {
            start: u.arbitrary()?,
            len: u.arbitrary()?,
        }),
    })
}

fn batch(u: &mut Unstructured<'_>) -> Result<(Vec<PlanRead>, Limits)> {
    let limits = if u.ratio(1u8, 4)? {
        Limits::default()
    } else {
        Limits {
            max_gap: match u.int_in_range(0u8..=3)? {
                0 => 0,
                1 => u.int_in_range(1u64..=100)?,
                2 => 1 << 20,
                _ => u.arbitrary()?,
            },
            max_span: match u.int_in_range(0u8..=2)? {
                0 => u.int_in_range(0u64..=200)?,
                1 => 64 << 20,
                _ => u.arbitrary()?,
            },
            max_parts: u.int_in_range(0u32..=8)?,
            max_amplification: u.int_in_range(0u32..=20)?,
        }
    };
    let mut reads: Vec<PlanRead> = Vec::new();
    let count = u.int_in_range(0usize..=200)?;
    for _ in 0..count {
        if reads.is_empty() || u.ratio(1u8, 2)? {
            let group = u.int_in_range(0u32..=3)?;
            reads.push(PlanRead {
                group,
                // As the engine makes them: a group is mergeable or not (local files).
                mergeable: group != 2,
                offset: offset(u)?,
                length: length(u)?,
                window: window(u)?,
            });
        } else {
            // Derived from an earlier read: a duplicate, its neighbour, or near it.
            let mut read = *u.choose(&reads)?;
            match u.int_in_range(0u8..=3)? {
                0 => {}
                1 => read.offset = read.offset.wrapping_add(read.length),
                2 => read.offset = read.offset.wrapping_add(u.int_in_range(0u64..=5000)?),
                _ => read.length = u.int_in_range(0u64..=5000)?,
            }
            reads.push(read);
        }
    }
    Ok((reads, limits))
}
