//! Properties of the whole response check ([`check_head`], then [`Receipt::finish`] after a
//! simulated driver received the body), over any status, headers, body length and ending.
//!
//! The object is a known function of position: the body byte a response states to be at
//! position `p` is modelled as the label `p` itself, and a byte the response states no
//! position for (beyond its `Content-Range`, a 206 without one, an error page) as [`NOWHERE`].
//! What a response states is computed here from the generated parts, independently of the
//! parser under test. Then, for every verdict:
//!
//! - no delivered byte is anywhere but at its stated position (`dst[i] == first + i`);
//! - an `Ok` delivers every requested byte (all of a closed range; the last `min(len, size)`
//!   bytes of a suffix);
//! - an end of object is reported only where the response states a size at or below the
//!   range's end (and the prefix ends exactly there), or by a `416`;
//! - a condition or an encoding the response fails is never received.

use proptest::prelude::*;

use super::{Delivered, Expectation, Receipt, ResponseHead, Verdict, check_head};
use crate::sdk::{RangeSpec, Rejection};

/// The label of a body byte whose position the response does not state.
const NOWHERE: u64 = u64::MAX;

/// A generated `Content-Range`, rendered to a header by [`Cr::render`].
#[derive(Debug, Clone)]
enum Cr {
    /// `bytes a-b/t` (`*` for `None`); a valid header only when `a <= b < t`.
    Bytes { a: u64, b: u64, t: Option<u64> },
    /// `bytes */n`.
    Unsatisfied(u64),
    /// Something that is not a `Content-Range` (never starts with `bytes `).
    Garbage(String),
}

impl Cr {
    fn render(&self) -> String {
        match self {
            Cr::Bytes { a, b, t } => match t {
                Some(t) => format!("bytes {a}-{b}/{t}"),
                None => format!("bytes {a}-{b}/*"),
            },
            Cr::Unsatisfied(n) => format!("bytes */{n}"),
            Cr::Garbage(g) => g.clone(),
        }
    }

    /// What the header states, by the RFC's grammar (not by the parser under test).
    fn statement(&self) -> Statement {
        match *self {
            Cr::Bytes { a, b, t } if a <= b && t.is_none_or(|t| b < t) => {
                Statement::Range { a, b, t }
            }
            Cr::Unsatisfied(n) => Statement::Unsatisfied(n),
            _ => Statement::Nothing,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Statement {
    Range { a: u64, b: u64, t: Option<u64> },
    Unsatisfied(u64),
    Nothing,
}

/// How long the body really is, relative to the length its head implies.
#[derive(Debug, Clone, Copy)]
enum BodyLen {
    Implied,
    Shorter(u64),
    Longer(u64),
    Exactly(u64),
}

/// One response to one request, and how the driver ended its body.
#[derive(Debug, Clone)]
struct Case {
    range: RangeSpec,
    /// The size of the object the values were generated around.
    size: u64,
    fallback_limit: u64,
    accepts_gzip: bool,
    if_match: Option<&'static str>,
    status: u16,
    cr: Option<Cr>,
    /// `None`: no header; `Some(None)`: the length the `Content-Range` implies (else the
    /// object's size); `Some(Some(n))`: `n`.
    cl: Option<Option<u64>>,
    encoding: Option<&'static str>,
    transformed: bool,
    etag: Option<&'static str>,
    body: BodyLen,
    /// Whether the body ended cleanly (else by an error where it stopped).
    complete: bool,
    /// The driver abandons the body this many bytes after it held every wanted byte.
    abandon: Option<u64>,
}

/// Values near `x`, which the interesting boundaries are, and anything.
fn near(x: u64) -> BoxedStrategy<u64> {
    prop_oneof![
        4 => Just(x),
        1 => Just(x.saturating_sub(1)),
        1 => Just(x + 1),
        1 => 0u64..400,
    ]
    .boxed()
}

fn arb_range() -> impl Strategy<Value = RangeSpec> {
    prop_oneof![
        3 => (0u64..300, 1u64..64).prop_map(|(first, n)| RangeSpec::Closed {
            first,
            last: first + n - 1,
        }),
        1 => (1u64..64).prop_map(|len| RangeSpec::Suffix { len }),
    ]
}

fn arb_cr(range: RangeSpec, size: u64) -> BoxedStrategy<Option<Cr>> {
    // The honest answer's bounds, to generate headers near them.
    let (first, last, want_last) = match range {
        RangeSpec::Closed { first, last } => {
            (first, last.min(size.saturating_sub(1)).max(first), last)
        }
        RangeSpec::Suffix { len } => (
            size.saturating_sub(len),
            size.saturating_sub(1),
            size.saturating_sub(1),
        ),
    };
    let total = prop_oneof![
        3 => Just(Some(size)),
        1 => Just(None),
        1 => near(last + 1).prop_map(Some),
        1 => near(want_last + 1).prop_map(Some),
    ];
    let garbage = prop_oneof![
        Just("bytes 0-9".to_string()),
        Just("bytes=0-9/100".to_string()),
        Just("bytes */*".to_string()),
        Just("items 0-9/100".to_string()),
        Just("bytes 0-99999999999999999999/*".to_string()),
        "[a-z0-9 */-]{0,12}".prop_map(|s| format!("x{s}")),
    ];
    prop_oneof![
        2 => Just(None),
        6 => (near(first), prop_oneof![near(last), near(want_last)], total)
            .prop_map(|(a, b, t)| Some(Cr::Bytes { a, b, t })),
        1 => prop_oneof![Just(size), near(first)].prop_map(|n| Some(Cr::Unsatisfied(n))),
        1 => garbage.prop_map(|g| Some(Cr::Garbage(g))),
    ]
    .boxed()
}

fn arb_case() -> impl Strategy<Value = Case> {
    (arb_range(), 0u64..400).prop_flat_map(|(range, size)| {
        let head = (
            prop_oneof![Just(0u64), Just(50), Just(1000)],
            any::<bool>(),
            prop_oneof![
                4 => Just(None),
                1 => Just(Some("\"a\"")),
                1 => Just(Some("*")),
                1 => Just(Some("\"a\", \"b\"")),
            ],
            prop_oneof![4 => Just(206u16), 3 => Just(200), 2 => Just(416), 1 => 100u16..600],
            arb_cr(range, size),
            prop_oneof![
                2 => Just(None),
                3 => Just(Some(None)),
                1 => near(size).prop_map(|n| Some(Some(n))),
            ],
        );
        let rest = (
            prop_oneof![
                8 => Just(None),
                1 => Just(Some("gzip")),
                1 => Just(Some("identity")),
                1 => Just(Some("br")),
            ],
            prop::bool::weighted(0.05),
            prop_oneof![
                2 => Just(None),
                2 => Just(Some("\"a\"")),
                1 => Just(Some("\"b\"")),
                1 => Just(Some("W/\"a\"")),
            ],
            prop_oneof![
                5 => Just(BodyLen::Implied),
                1 => (1u64..50).prop_map(BodyLen::Shorter),
                1 => (1u64..50).prop_map(BodyLen::Longer),
                1 => (0u64..500).prop_map(BodyLen::Exactly),
            ],
            any::<bool>(),
            prop::option::of(0u64..100),
        );
        (Just(range), Just(size), head, rest).prop_map(
            |(
                range,
                size,
                (fallback_limit, accepts_gzip, if_match, status, cr, cl),
                (encoding, transformed, etag, body, complete, abandon),
            )| Case {
                range,
                size,
                fallback_limit,
                accepts_gzip,
                if_match,
                status,
                cr,
                cl,
                encoding,
                transformed,
                etag,
                body,
                complete,
                abandon,
            },
        )
    })
}

/// `If-Match` with strong comparison, written out independently of the code under test.
fn condition_holds(condition: &str, etag: &str) -> bool {
    condition == "*"
        || (!etag.starts_with("W/") && condition.split(", ").any(|member| member == etag))
}

/// What the driver made of a body the head accepted: the bytes kept (as position labels),
/// the body bytes seen, and whether the body ended cleanly.
struct Received {
    dst: Vec<u64>,
    seen: u64,
    complete: bool,
}

/// Receive `body` (labels) as the exchange driver does: skip, keep up to `keep`, count, and
/// maybe abandon the rest once everything wanted arrived.
fn drive(r: &Receipt, body: &[u64], complete: bool, abandon: Option<u64>) -> Received {
    let arrived = body.len() as u64;
    let kept = r.keep.min(arrived.saturating_sub(r.skip));
    let start = r.skip.min(arrived) as usize;
    let dst = body[start..start + kept as usize].to_vec();
    match abandon {
        Some(extra) if kept == r.keep => {
            let seen = (r.skip + r.keep + extra).min(arrived);
            Received {
                dst,
                seen,
                complete: seen == arrived && complete,
            }
        }
        _ => Received {
            dst,
            seen: arrived,
            complete,
        },
    }
}

fn check_case(case: &Case) -> Result<(), TestCaseError> {
    let rendered = case.cr.as_ref().map(Cr::render);
    let statement = case.cr.as_ref().map_or(Statement::Nothing, Cr::statement);
    let implied_by_range = match statement {
        Statement::Range { a, b, .. } => Some(b - a + 1),
        _ => None,
    };
    let cl = case
        .cl
        .map(|cl| cl.or(implied_by_range).unwrap_or(case.size));
    let expect = Expectation {
        range: case.range,
        if_match: case.if_match,
        fallback_limit: case.fallback_limit,
        accepts_stored_gzip: case.accepts_gzip,
    };
    let head = ResponseHead {
        status: case.status,
        content_range: rendered.as_deref(),
        content_length: cl,
        content_encoding: case.encoding,
        etag: case.etag,
        transformed: case.transformed,
    };
    let ranged = matches!(case.status, 200 | 206) && case.cr.is_some();
    let whole = case.status == 200 && case.cr.is_none();
    // The size the response states, and the position it states for body byte `j`.
    let stated_total = match statement {
        Statement::Range { t, .. } if ranged => t,
        Statement::Unsatisfied(n) if case.status == 416 => Some(n),
        _ if whole => cl,
        _ => None,
    };
    let position = |j: u64| match statement {
        Statement::Range { a, b, .. } if ranged && j <= b - a => a + j,
        _ if whole && cl.is_none_or(|cl| j < cl) => j,
        _ => NOWHERE,
    };
    let implied = cl.or(implied_by_range).unwrap_or(64);
    let body_len = match case.body {
        BodyLen::Implied => implied,
        BodyLen::Shorter(k) => implied.saturating_sub(k),
        BodyLen::Longer(k) => implied + k,
        BodyLen::Exactly(n) => n,
    };
    let body: Vec<u64> = (0..body_len).map(position).collect();

    match check_head(&expect, &head) {
        Verdict::Receive(r) => {
            prop_assert!(matches!(case.status, 200 | 206));
            prop_assert!(!case.transformed, "a transformed answer was received");
            prop_assert!(
                case.encoding
                    .is_none_or(|e| e == "identity" || (e == "gzip" && case.accepts_gzip)),
                "an encoded answer was received"
            );
            if let (Some(condition), Some(etag)) = (case.if_match, case.etag) {
                prop_assert!(condition_holds(condition, etag), "another version received");
            }
            let got = drive(&r, &body, case.complete, case.abandon);
            let kept = got.dst.len() as u64;
            let Ok(Delivered {
                available,
                ends_early,
            }) = r.finish(kept, got.seen, got.complete)
            else {
                return Ok(());
            };
            prop_assert!(available <= kept, "{available} proven, {kept} kept");
            for (i, &label) in got.dst.iter().take(available as usize).enumerate() {
                prop_assert_eq!(label, r.first + i as u64, "byte {} misplaced", i);
            }
            match case.range {
                RangeSpec::Closed { first, last } => {
                    prop_assert_eq!(r.first, first);
                    if ends_early {
                        prop_assert_eq!(stated_total, Some(first + available));
                        prop_assert!(first + available <= last);
                    } else {
                        prop_assert_eq!(available, last - first + 1, "Ok with fewer bytes");
                    }
                }
                RangeSpec::Suffix { len } => {
                    prop_assert!(!ends_early);
                    let Some(total) = stated_total else {
                        return Err(TestCaseError::fail("a suffix of unknown size"));
                    };
                    prop_assert_eq!(available, len.min(total));
                    prop_assert_eq!(r.first + available, total);
                }
            }
        }
        Verdict::Unsatisfiable { size, .. } => {
            // Azurite's no bytes at the end of an object (see `end_of_object_range`).
            let at_the_end = rendered
                .as_deref()
                .and_then(super::range::end_of_object_range);
            prop_assert!(
                case.status == 416 || whole || at_the_end.is_some(),
                "an end of object from a {}",
                case.status
            );
            if at_the_end.is_some() {
                prop_assert_eq!(size, at_the_end);
                return Ok(());
            }
            if case.status == 416 {
                prop_assert!(
                    case.cr.is_none() || matches!(statement, Statement::Unsatisfied(_)),
                    "a 416 with a malformed Content-Range believed"
                );
            }
            // A 416 says nothing exists at the first byte: from byte 0, the object is empty
            // whether it says so or not.
            let from_byte_0 = matches!(case.range, RangeSpec::Closed { first: 0, .. });
            match size {
                Some(0) if case.status == 416 && stated_total.is_none() && from_byte_0 => {}
                Some(size) => prop_assert_eq!(Some(size), stated_total),
                None => prop_assert!(case.status != 416 || !from_byte_0 || stated_total.is_some()),
            }
            match case.range {
                RangeSpec::Closed { first, .. } => {
                    prop_assert!(stated_total.is_none_or(|t| t <= first));
                    prop_assert!(case.status == 416 || stated_total.is_some());
                }
                RangeSpec::Suffix { .. } => {
                    prop_assert_eq!(case.status, 416);
                    prop_assert!(stated_total.is_none_or(|t| t == 0));
                }
            }
        }
        Verdict::ErrorStatus(code) => {
            prop_assert_eq!(code, case.status);
            prop_assert!(!matches!(code, 200 | 206 | 416));
        }
        Verdict::Reject(_) => {}
    }
    Ok(())
}

/// An honest server's answer for `range` on an object of `size` bytes: 206 (or 200 with the
/// same `Content-Range`) with the right bytes, a whole-object 200, or a 416. Every one is
/// believed, but a whole-object 200 that cannot be told from the range's bytes alone.
fn honest(range: RangeSpec, size: u64, form: u8) -> (u16, Option<String>, Option<u64>, Vec<u64>) {
    let (first, last) = match range {
        RangeSpec::Closed { first, last } => (first, last.min(size.saturating_sub(1))),
        RangeSpec::Suffix { len } => (size.saturating_sub(len), size.saturating_sub(1)),
    };
    let satisfiable = size > 0 && first < size;
    if !satisfiable {
        return (416, Some(format!("bytes */{size}")), None, Vec::new());
    }
    let status = match form % 3 {
        0 => 206,
        1 => 200,
        _ => return (200, None, Some(size), (0..size).collect()),
    };
    (
        status,
        Some(format!("bytes {first}-{last}/{size}")),
        Some(last - first + 1),
        (first..=last).collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn no_response_places_a_byte_away_from_its_stated_position_or_ends_an_object_unstated(
        case in arb_case()
    ) {
        check_case(&case)?;
    }

    #[test]
    fn an_honest_answer_is_always_believed(
        range in arb_range(),
        size in 0u64..400,
        form in any::<u8>(),
        abandon in prop::option::of(0u64..100),
    ) {
        let (status, cr, cl, body) = honest(range, size, form);
        let expect = Expectation {
            range,
            if_match: None,
            fallback_limit: u64::MAX,
            accepts_stored_gzip: false,
        };
        let head = ResponseHead {
            status,
            content_range: cr.as_deref(),
            content_length: cl,
            ..ResponseHead::default()
        };
        // The exceptions: a whole-object 200 no longer than a range past byte 0 (or exactly as
        // long as a suffix) could be the range's bytes alone without their Content-Range, and
        // is refused (not believed); from byte 0 its bytes are believed, its size only if the
        // body is not exactly as long as the range.
        let whole = status == 200 && cr.is_none();
        let unproven = whole
            && match range {
                RangeSpec::Closed { first, last } => first > 0 && size <= last - first + 1,
                RangeSpec::Suffix { len } => size == len,
            };
        // From byte 0, a whole body exactly as long as the range states no size.
        let sizeless = whole && matches!(range, RangeSpec::Closed { first: 0, last } if size == last + 1);
        if unproven {
            let verdict = check_head(&expect, &head);
            prop_assert!(
                matches!(verdict, Verdict::Reject(Rejection::UnprovenWhole { .. })),
                "{:?}",
                verdict
            );
            return Ok(());
        }
        match check_head(&expect, &head) {
            Verdict::Receive(r) => {
                let got = drive(&r, &body, true, abandon);
                let d = r.finish(got.dst.len() as u64, got.seen, got.complete);
                let d = d.map_err(|e| TestCaseError::fail(e.to_string()))?;
                let (want_first, want) = match range {
                    RangeSpec::Closed { first, last } => (first, last - first + 1),
                    RangeSpec::Suffix { len } => (size - len.min(size), len.min(size)),
                };
                let exists = want.min(size - want_first);
                prop_assert_eq!(d.available, exists);
                prop_assert_eq!(d.ends_early, exists < want);
                prop_assert_eq!(r.total, (!sizeless).then_some(size));
                let expected: Vec<u64> = (want_first..want_first + exists).collect();
                prop_assert_eq!(&got.dst[..exists as usize], &expected[..]);
            }
            Verdict::Unsatisfiable { size: stated, .. } => {
                prop_assert_eq!(stated, Some(size));
                let first = match range {
                    RangeSpec::Closed { first, .. } => first,
                    RangeSpec::Suffix { .. } => 0,
                };
                prop_assert!(size <= first);
            }
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
    }
}
