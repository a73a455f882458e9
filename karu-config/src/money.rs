//! Amounts of money as people write them in configuration (`0.0004`, `"$0.09"`), and the
//! list prices of reads from the object stores that bill them (`planner.prices`).

use std::fmt;

use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An amount of US dollars, kept in billionths of a dollar (nanodollars), so a price of
/// $0.0004 per 1,000 requests is exact.
///
/// Accepted forms:
///
/// - a number: `0.09`, `0` (never negative, never above a million dollars);
/// - a string holding a decimal number, with an optional `$` before it: `"0.0004"`,
///   `"$0.09"`; at most nine decimals (a billionth of a dollar).
///
/// `Display` and `Serialize` write `$` and the shortest exact decimal (`"$0.0004"`), which
/// deserializes to the same value.
///
/// ```
/// use karu_config::Dollars;
///
/// assert_eq!("$0.0004".parse::<Dollars>(), Ok(Dollars(400_000)));
/// assert_eq!("0.09".parse::<Dollars>(), Ok(Dollars(90_000_000)));
/// assert_eq!(Dollars(90_000_000).to_string(), "$0.09");
/// assert!("-1".parse::<Dollars>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dollars(pub u64);

impl Dollars {
    /// Nanodollars in one dollar.
    pub const ONE: u64 = 1_000_000_000;
    /// The largest amount accepted: a million dollars.
    pub const MAX: Dollars = Dollars(1_000_000 * Self::ONE);

    /// The amount as a floating-point number of dollars (for reports).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / Self::ONE as f64
    }
}

/// What a [`Dollars`] expects, used in every message about a malformed one.
const DOLLARS_EXPECTED: &str =
    "an amount of US dollars such as 0.09 or \"$0.0004\" (at most 9 decimals, up to $1000000)";

/// Parses `text` (digits, at most one `.`, at most nine decimals) into nanodollars.
fn parse_dollars(text: &str) -> Option<Dollars> {
    let text = text.trim();
    let number = text.strip_prefix('$').unwrap_or(text).trim_start();
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return None;
    }
    if number.ends_with('.') {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let mut nanos: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    for _ in fraction.len()..9 {
        nanos *= 10;
    }
    let total = whole.checked_mul(Dollars::ONE)?.checked_add(nanos)?;
    (total <= Dollars::MAX.0).then_some(Dollars(total))
}

/// The amount `dollars` in nanodollars, if it is one (finite, 0 to a million, rounded to
/// the nearest billionth).
fn dollars_of(dollars: f64) -> Option<Dollars> {
    (dollars.is_finite() && (0.0..=Dollars::MAX.as_f64()).contains(&dollars))
        .then(|| Dollars((dollars * Dollars::ONE as f64).round() as u64))
}

impl fmt::Display for Dollars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, rest) = (self.0 / Self::ONE, self.0 % Self::ONE);
        if rest == 0 {
            return write!(f, "${whole}");
        }
        let decimals = format!("{rest:09}");
        write!(f, "${whole}.{}", decimals.trim_end_matches('0'))
    }
}

/// A malformed amount, from [`FromStr`](std::str::FromStr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDollarsError(String);

impl fmt::Display for ParseDollarsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {DOLLARS_EXPECTED}, found {:?}", self.0)
    }
}

impl std::error::Error for ParseDollarsError {}

impl std::str::FromStr for Dollars {
    type Err = ParseDollarsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_dollars(text).ok_or_else(|| ParseDollarsError(text.to_owned()))
    }
}

impl Serialize for Dollars {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dollars {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DollarsVisitor)
    }
}

/// Accepts the forms documented on [`Dollars`].
struct DollarsVisitor;

impl Visitor<'_> for DollarsVisitor {
    type Value = Dollars;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DOLLARS_EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dollars, E> {
        v.checked_mul(Dollars::ONE)
            .filter(|&n| n <= Dollars::MAX.0)
            .map(Dollars)
            .ok_or_else(|| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dollars, E> {
        u64::try_from(v)
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            .and_then(|v| self.visit_u64(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dollars, E> {
        dollars_of(v).ok_or_else(|| E::invalid_value(Unexpected::Float(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Dollars, E> {
        parse_dollars(v).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

/// What one provider charges for reading: per request and per byte sent out of its region
/// (`planner.prices.<provider>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct PriceList {
    /// The price of 1,000 GET requests (`requests_per_1000`).
    pub requests_per_1000: Dollars,
    /// The price of a GiB (2^30 bytes) sent out of the store's region to the internet
    /// (`egress_per_gib`); 0 where the reader is in the store's region and egress is free.
    pub egress_per_gib: Dollars,
}

impl PriceList {
    /// A price list of `requests_per_1000` per 1,000 requests and `egress_per_gib` per GiB.
    pub const fn new(requests_per_1000: Dollars, egress_per_gib: Dollars) -> PriceList {
        PriceList {
            requests_per_1000,
            egress_per_gib,
        }
    }

    /// What `requests` requests bringing `bytes` bytes cost, in nanodollars (fractions of a
    /// nanodollar rounded to the nearest).
    pub fn cost(&self, requests: u64, bytes: u64) -> u128 {
        let requests = u128::from(requests) * u128::from(self.requests_per_1000.0);
        let bytes = u128::from(bytes) * u128::from(self.egress_per_gib.0);
        (requests + 500) / 1000 + ((bytes + (1 << 29)) >> 30)
    }

    /// The largest gap worth fetching instead of a request of its own, in money: the bytes
    /// whose egress costs what one request costs. `None` when neither costs anything (money
    /// does not choose); `u64::MAX` when bytes are free and requests are not.
    pub fn break_even_gap(&self) -> Option<u64> {
        let request = u128::from(self.requests_per_1000.0);
        let byte = u128::from(self.egress_per_gib.0);
        match (request, byte) {
            (0, 0) => None,
            (_, 0) => Some(u64::MAX),
            // request / 1000 dollars over byte / 2^30 dollars a byte.
            (request, byte) => {
                Some(u64::try_from(request * (1 << 30) / (byte * 1000)).unwrap_or(u64::MAX))
            }
        }
    }
}

impl Default for PriceList {
    fn default() -> Self {
        PriceList::new(Dollars(0), Dollars(0))
    }
}

/// The price lists of the object stores that bill reads (`planner.prices`), one per
/// provider, by its name (`s3`, `gcs`, `azure`). The defaults are the list prices published
/// for the standard storage class in a US region, with egress to the internet at the first
/// tier (see `xtask/bench/README.md` for where and when they were read); set
/// `egress_per_gib = 0` for a reader in the store's region, where egress is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Prices {
    /// Amazon S3 Standard (`planner.prices.s3`; default $0.0004 per 1,000 GETs, $0.09 per GiB
    /// out to the internet).
    pub s3: PriceList,
    /// Google Cloud Storage Standard, Class B operations (`planner.prices.gcs`; default
    /// $0.0004 per 1,000, $0.12 per GiB out to the internet).
    pub gcs: PriceList,
    /// Azure Blob Storage, hot tier (`planner.prices.azure`; default $0.00044 per 1,000 read
    /// operations, $0.087 per GiB out to the internet).
    pub azure: PriceList,
}

impl Prices {
    /// The providers priced, by the name their backend reports.
    pub const PROVIDERS: [&'static str; 3] = ["s3", "gcs", "azure"];

    /// The price list of the provider named `name` (a backend's name), if it is priced.
    pub fn of(&self, name: &str) -> Option<&PriceList> {
        match name {
            "s3" => Some(&self.s3),
            "gcs" => Some(&self.gcs),
            "azure" => Some(&self.azure),
            _ => None,
        }
    }
}

impl Default for Prices {
    fn default() -> Self {
        // Nanodollars: $0.0004 is 400,000.
        Prices {
            s3: PriceList::new(Dollars(400_000), Dollars(90_000_000)),
            gcs: PriceList::new(Dollars(400_000), Dollars(120_000_000)),
            azure: PriceList::new(Dollars(440_000), Dollars(87_000_000)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde::de::value::{
        Error as PlainError, F64Deserializer, I64Deserializer, U64Deserializer,
    };

    fn dollars(text: &str) -> Result<u64, String> {
        let de: de::value::StrDeserializer<'_, PlainError> = text.into_deserializer();
        Dollars::deserialize(de)
            .map(|d| d.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn amounts_in_every_documented_form() {
        assert_eq!(dollars("0.0004"), Ok(400_000));
        assert_eq!(dollars("$0.09"), Ok(90_000_000));
        assert_eq!(dollars(" $ 1.5 "), Ok(1_500_000_000));
        assert_eq!(dollars("0"), Ok(0));
        assert_eq!(dollars("0.000000001"), Ok(1));
        assert_eq!(dollars("1000000"), Ok(Dollars::MAX.0));
        for bad in [
            "",
            "$",
            "-1",
            "1.",
            ".5",
            "1.2.3",
            "0.0000000001",
            "1000000.000000001",
            "cheap",
            "1e-3",
        ] {
            assert_eq!(
                dollars(bad),
                Err(format!(
                    "invalid value: string {bad:?}, expected {DOLLARS_EXPECTED}"
                )),
                "{bad:?}"
            );
        }
        let from_f64 = |v: f64| Dollars::deserialize(F64Deserializer::<PlainError>::new(v));
        assert_eq!(from_f64(0.0004), Ok(Dollars(400_000)));
        assert_eq!(from_f64(0.12), Ok(Dollars(120_000_000)));
        assert!(from_f64(-0.01).is_err());
        assert!(from_f64(f64::NAN).is_err());
        assert!(from_f64(f64::INFINITY).is_err());
        assert!(from_f64(2e6).is_err());
        let from_u64 = |v: u64| Dollars::deserialize(U64Deserializer::<PlainError>::new(v));
        assert_eq!(from_u64(2), Ok(Dollars(2 * Dollars::ONE)));
        assert!(from_u64(u64::MAX).is_err());
        assert!(Dollars::deserialize(I64Deserializer::<PlainError>::new(-1)).is_err());
    }

    #[test]
    fn display_is_the_shortest_exact_decimal_and_round_trips() {
        for (nanos, text) in [
            (0, "$0"),
            (1, "$0.000000001"),
            (400_000, "$0.0004"),
            (90_000_000, "$0.09"),
            (2 * Dollars::ONE, "$2"),
            (Dollars::MAX.0, "$1000000"),
        ] {
            assert_eq!(Dollars(nanos).to_string(), text);
            assert_eq!(dollars(text), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn a_bill_is_requests_and_bytes_at_their_prices() {
        let s3 = Prices::default().s3;
        // 1,000 GETs: $0.0004; one GiB out: $0.09.
        assert_eq!(s3.cost(1000, 0), 400_000);
        assert_eq!(s3.cost(0, 1 << 30), 90_000_000);
        assert_eq!(s3.cost(1000, 1 << 30), 90_400_000);
        // One request: 400 nanodollars; 4 KiB out: 343.3 rounded to 343.
        assert_eq!(s3.cost(1, 0), 400);
        assert_eq!(s3.cost(0, 4096), 343);
        assert_eq!(PriceList::default().cost(u64::MAX, u64::MAX), 0);
        // No overflow at the extremes.
        let dear = PriceList::new(Dollars::MAX, Dollars::MAX);
        assert!(dear.cost(u64::MAX, u64::MAX) > 0);
    }

    #[test]
    fn money_breaks_even_where_a_gaps_egress_costs_a_request() {
        let prices = Prices::default();
        // S3: $0.0004 / 1,000 against $0.09 / GiB: 4,772 bytes.
        assert_eq!(prices.s3.break_even_gap(), Some(4_772));
        assert_eq!(prices.gcs.break_even_gap(), Some(3_579));
        assert_eq!(prices.azure.break_even_gap(), Some(5_430));
        let s3 = prices.s3;
        let gap = s3.break_even_gap().unwrap();
        // A thousand gaps of the break-even size cost no more than a thousand requests; a
        // thousand of one byte more do.
        assert!(s3.cost(0, gap * 1000) <= s3.cost(1000, 0));
        assert!(s3.cost(0, (gap + 1) * 1000) > s3.cost(1000, 0));
        // Free egress: every gap is cheaper than a request; nothing costs: money is silent.
        let in_region = PriceList::new(Dollars(400_000), Dollars(0));
        assert_eq!(in_region.break_even_gap(), Some(u64::MAX));
        assert_eq!(PriceList::default().break_even_gap(), None);
        let free_requests = PriceList::new(Dollars(0), Dollars(90_000_000));
        assert_eq!(free_requests.break_even_gap(), Some(0));
    }

    #[test]
    fn the_price_lists_are_found_by_provider_name() {
        let prices = Prices::default();
        assert_eq!(prices.of("s3"), Some(&prices.s3));
        assert_eq!(prices.of("gcs"), Some(&prices.gcs));
        assert_eq!(prices.of("azure"), Some(&prices.azure));
        assert_eq!(prices.of("http"), None);
        assert_eq!(prices.of("local"), None);
        for name in Prices::PROVIDERS {
            assert!(prices.of(name).is_some());
        }
    }
}
