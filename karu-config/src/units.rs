//! Byte sizes, durations and shares as people write them in configuration: `"64KiB"`,
//! `1048576`, `"30s"`, `2.5`, `"5%"`.
//!
//! Each type serializes to one canonical string ([`ByteSize`] as `"1MiB"`, [`Seconds`] as
//! `"1m 30s"`, [`Share`] as `"5%"`) that deserializes back to the same value, and prints that
//! string with `Display`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number of bytes, written as an integer or as a string with an optional unit.
///
/// Accepted forms:
///
/// - an integer: `1048576` (bytes);
/// - a string holding a number and an optional unit, with optional spaces between them:
///   `"1048576"`, `"64KiB"`, `"1 MiB"`, `"16KB"`;
/// - a string holding a hexadecimal number of bytes: `"0x100000"`.
///
/// Units are case-insensitive. Binary units are powers of 1,024: `KiB`, `MiB`, `GiB`, `TiB`,
/// `PiB`, `EiB`; decimal units are powers of 1,000: `KB`, `MB`, `GB`, `TB`, `PB`, `EB` (so
/// `"16KB"` is 16,000 bytes); `B` is one byte. A decimal fraction is accepted when the result is
/// a whole number of bytes (`"1.5MiB"` is 1,572,864; `"0.1KiB"` is rejected). The largest size
/// is `u64::MAX` bytes; anything larger is rejected, never wrapped or saturated.
///
/// `Display` and `Serialize` write the shortest exact form (`"1MiB"`, `"16KB"`, `"1000B"`), which
/// deserializes to the same value. [`FromStr`](std::str::FromStr) accepts the string forms, for
/// command-line options.
///
/// ```
/// use karu_config::ByteSize;
///
/// assert_eq!(ByteSize(1 << 20).to_string(), "1MiB");
/// assert_eq!(ByteSize(16_000).to_string(), "16KB");
/// assert_eq!(ByteSize(1023).to_string(), "1023B");
/// assert_eq!("1 MiB".parse::<ByteSize>(), Ok(ByteSize(1 << 20)));
/// assert_eq!("0x400".parse::<ByteSize>(), Ok(ByteSize(1024)));
/// assert!("lots".parse::<ByteSize>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// A span of time, written as a number of seconds or as a [`humantime`] string.
///
/// Accepted forms:
///
/// - an integer or a float: `30`, `2.5` (seconds, never negative);
/// - a string holding a plain number, also in seconds: `"30"`, `"0.25"`;
/// - a humantime string: `"30s"`, `"250ms"`, `"2m"`, `"1h 30m"`.
///
/// Any number of seconds a `u64` holds is accepted; Karu counts a span past 100 years (more
/// than a clock can add to "now") as 100 years, so `18446744073709551615` means "no practical
/// limit".
///
/// `Display` and `Serialize` write the humantime form (`"250ms"`, `"1m 30s"`), which deserializes
/// to the same value. [`FromStr`](std::str::FromStr) accepts the string forms.
///
/// ```
/// use std::time::Duration;
/// use karu_config::Seconds;
///
/// assert_eq!(Seconds(Duration::from_millis(90_250)).to_string(), "1m 30s 250ms");
/// assert_eq!("2.5".parse::<Seconds>(), Ok(Seconds(Duration::from_millis(2500))));
/// assert_eq!("250ms".parse::<Seconds>(), Ok(Seconds(Duration::from_millis(250))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seconds(pub Duration);

/// A share of a whole, such as the extra requests hedging may add (`hedge.budget`), written as
/// a percentage or as a fraction.
///
/// Accepted forms:
///
/// - a string holding a percentage, with or without a space before the sign: `"5%"`,
///   `"2.5 %"`, `"100%"`;
/// - a fraction from 0 to 1, as a number or a string: `0.05`, `"0.05"`, `1`.
///
/// The value is kept in millionths (`Share(50_000)` is 5 %), so a share finer than 0.0001 %
/// is rounded to the nearest millionth; anything below 0 or above 100 % is rejected.
/// `Display` and `Serialize` write the percentage (`"5%"`, `"2.5%"`), which deserializes to
/// the same value. [`FromStr`](std::str::FromStr) accepts the string forms.
///
/// ```
/// use karu_config::Share;
///
/// assert_eq!(Share::from_percent(5).to_string(), "5%");
/// assert_eq!("2.5 %".parse::<Share>(), Ok(Share(25_000)));
/// assert_eq!("0.05".parse::<Share>(), Ok(Share(50_000)));
/// assert!("150%".parse::<Share>().is_err());
/// assert_eq!(Share(50_000).fraction(), 0.05);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Share(pub u32);

impl Share {
    /// Millionths in the whole (100 %).
    pub const WHOLE: u32 = 1_000_000;

    /// `percent` % (at most 100).
    pub const fn from_percent(percent: u32) -> Share {
        let percent = if percent > 100 { 100 } else { percent };
        Share(percent * (Self::WHOLE / 100))
    }

    /// The share as a fraction of 1.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / f64::from(Self::WHOLE)
    }
}

/// What a [`Share`] expects, used in every message about a malformed one.
const SHARE_EXPECTED: &str = "a share such as \"5%\" or 0.05 (from 0 to 100 %)";

/// A share of `fraction` of the whole, in millionths, if it is one (0 to 1, not NaN).
fn share_of(fraction: f64) -> Option<Share> {
    (0.0..=1.0)
        .contains(&fraction)
        .then(|| Share((fraction * f64::from(Share::WHOLE)).round() as u32))
}

/// A unit name (lower case) and its number of bytes.
const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("pib", 1 << 50),
    ("eib", 1 << 60),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("pb", 1_000_000_000_000_000),
    ("eb", 1_000_000_000_000_000_000),
];

/// How units are written when displaying a size, in the same order as [`UNITS`].
const UNIT_NAMES: &[&str] = &[
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "KB", "MB", "GB", "TB", "PB", "EB",
];

/// What a [`ByteSize`] expects, used in every message about a malformed one.
const BYTE_SIZE_EXPECTED: &str = "a byte size such as 1048576 or \"1MiB\"";

/// What a [`Seconds`] expects, used in every message about a malformed one.
const SECONDS_EXPECTED: &str = "a duration such as 30 or 2.5 (seconds), or \"250ms\"";

/// Most digits accepted after the decimal point of a byte size (after trailing zeros are
/// dropped); enough for any fraction that can still be a whole number of bytes in practice, and
/// small enough that the arithmetic below cannot overflow a `u128`.
const MAX_FRACTION_DIGITS: usize = 20;

/// Why a string is not a byte size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByteSizeError {
    /// The number part is missing or malformed.
    Malformed,
    /// The unit is not one of [`UNITS`].
    UnknownUnit,
    /// The value has a fraction of a byte, or more decimals than we can check.
    NotWhole,
    /// The value exceeds `u64::MAX` bytes.
    TooLarge,
}

impl ByteSizeError {
    /// Turns this into a deserialization error quoting the rejected text.
    fn into_de<E: de::Error>(self, text: &str) -> E {
        match self {
            Self::Malformed => E::invalid_value(Unexpected::Str(text), &BYTE_SIZE_EXPECTED),
            Self::UnknownUnit => E::custom(format_args!(
                "expected a byte size with a unit of B, KB, MB, GB, TB, PB, EB, KiB, MiB, GiB, \
                 TiB, PiB or EiB, found string {text:?}"
            )),
            Self::NotWhole => E::custom(format_args!(
                "expected a whole number of bytes, found string {text:?}"
            )),
            Self::TooLarge => E::custom(format_args!(
                "expected a byte size of at most 18446744073709551615 bytes (16EiB), \
                 found string {text:?}"
            )),
        }
    }
}

/// Parses the string form of a [`ByteSize`].
fn parse_byte_size(text: &str) -> Result<u64, ByteSizeError> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return parse_hex(hex).ok_or(if hex.chars().all(|c| c.is_ascii_hexdigit()) {
            ByteSizeError::TooLarge
        } else {
            ByteSizeError::Malformed
        });
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = (&text[..split], text[split..].trim_start());

    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let well_formed = !whole.is_empty()
        && (fraction.is_empty() != number.contains('.'))
        && !fraction.contains('.');
    if !well_formed {
        return Err(ByteSizeError::Malformed);
    }
    let multiplier = if unit.is_empty() {
        1
    } else {
        UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(unit))
            .map(|&(_, bytes)| bytes)
            .ok_or(ByteSizeError::UnknownUnit)?
    };
    let multiplier = u128::from(multiplier);

    // Leading zeros cannot overflow anything, so drop them before parsing.
    let whole = whole.trim_start_matches('0');
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| ByteSizeError::TooLarge)?
    };
    let mut total = whole
        .checked_mul(multiplier)
        .ok_or(ByteSizeError::TooLarge)?;

    let fraction = fraction.trim_end_matches('0');
    if !fraction.is_empty() {
        if fraction.len() > MAX_FRACTION_DIGITS {
            return Err(ByteSizeError::NotWhole);
        }
        // Both factors are below 10^20 and 2^60, so the product fits in a u128.
        let numerator: u128 = fraction.parse().map_err(|_| ByteSizeError::Malformed)?;
        let scaled = numerator * multiplier;
        let denominator = 10u128.pow(fraction.len() as u32);
        if !scaled.is_multiple_of(denominator) {
            return Err(ByteSizeError::NotWhole);
        }
        total = total
            .checked_add(scaled / denominator)
            .ok_or(ByteSizeError::TooLarge)?;
    }
    u64::try_from(total).map_err(|_| ByteSizeError::TooLarge)
}

/// The value of hexadecimal digits (after `0x`), if they are digits and fit a `u64`.
pub(crate) fn parse_hex(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// Why a string given to [`ByteSize::from_str`](std::str::FromStr::from_str) or
/// [`Seconds::from_str`](std::str::FromStr::from_str) is not one: the same words as a
/// configuration error about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseUnitError(String);

impl fmt::Display for ParseUnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseUnitError {}

/// The message of a deserialization error, for `FromStr`.
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

impl de::Error for Message {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Message(msg.to_string())
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        match unexpected {
            Unexpected::Str(text) => Message(format!("expected {expected}, found {text:?}")),
            other => Message(format!("expected {expected}, found {other}")),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = ParseUnitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ByteSizeVisitor
            .visit_str::<Message>(text)
            .map_err(|error| ParseUnitError(error.0))
    }
}

impl std::str::FromStr for Seconds {
    type Err = ParseUnitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        SecondsVisitor
            .visit_str::<Message>(text)
            .map_err(|error| ParseUnitError(error.0))
    }
}

impl std::str::FromStr for Share {
    type Err = ParseUnitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ShareVisitor
            .visit_str::<Message>(text)
            .map_err(|error| ParseUnitError(error.0))
    }
}

impl fmt::Display for Share {
    /// Writes the percentage with as many decimals as it needs (`5%`, `2.5%`, `0.0001%`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per_percent = Share::WHOLE / 100;
        let (whole, rest) = (self.0 / per_percent, self.0 % per_percent);
        if rest == 0 {
            return write!(f, "{whole}%");
        }
        let decimals = format!("{rest:04}");
        write!(f, "{whole}.{}%", decimals.trim_end_matches('0'))
    }
}

impl Serialize for Share {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Share {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShareVisitor)
    }
}

/// Accepts the forms documented on [`Share`].
struct ShareVisitor;

impl Visitor<'_> for ShareVisitor {
    type Value = Share;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SHARE_EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Share, E> {
        match v {
            0 => Ok(Share(0)),
            1 => Ok(Share(Share::WHOLE)),
            _ => Err(E::invalid_value(Unexpected::Unsigned(v), &self)),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Share, E> {
        u64::try_from(v)
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            .and_then(|v| self.visit_u64(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Share, E> {
        share_of(v).ok_or_else(|| E::invalid_value(Unexpected::Float(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Share, E> {
        let text = v.trim();
        let (number, scale) = match text.strip_suffix('%') {
            Some(percent) => (percent.trim_end(), 100.0),
            None => (text, 1.0),
        };
        let plain = !number.is_empty()
            && number.chars().all(|c| c.is_ascii_digit() || c == '.')
            && number.matches('.').count() <= 1
            && !number.starts_with('.')
            && !number.ends_with('.');
        plain
            .then(|| number.parse::<f64>().ok())
            .flatten()
            .and_then(|n| share_of(n / scale))
            .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

impl fmt::Display for ByteSize {
    /// Writes the shortest exact form: the unit giving the fewest digits, binary on a tie.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0;
        if bytes == 0 {
            return f.write_str("0B");
        }
        let (count, name) = UNITS
            .iter()
            .zip(UNIT_NAMES)
            .filter(|((_, size), _)| bytes.is_multiple_of(*size))
            .map(|((_, size), name)| (bytes / size, *name))
            .min_by_key(|&(count, _)| count)
            .unwrap_or((bytes, "B"));
        write!(f, "{count}{name}")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByteSizeVisitor)
    }
}

/// Accepts the forms documented on [`ByteSize`].
struct ByteSizeVisitor;

impl Visitor<'_> for ByteSizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(BYTE_SIZE_EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
        Ok(ByteSize(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
        u64::try_from(v)
            .map(ByteSize)
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<ByteSize, E> {
        u64::try_from(v)
            .map(ByteSize)
            .map_err(|_| ByteSizeError::TooLarge.into_de(&v.to_string()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<ByteSize, E> {
        match u128::try_from(v) {
            Ok(v) => self.visit_u128(v),
            Err(_) => Err(E::invalid_value(
                Unexpected::Other("a negative integer"),
                &self,
            )),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
        parse_byte_size(v)
            .map(ByteSize)
            .map_err(|error| error.into_de(v))
    }
}

impl fmt::Display for Seconds {
    /// Writes the humantime form, such as `250ms` or `1m 30s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SecondsVisitor)
    }
}

/// Accepts the forms documented on [`Seconds`].
struct SecondsVisitor;

impl Visitor<'_> for SecondsVisitor {
    type Value = Seconds;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SECONDS_EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
        Ok(Seconds(Duration::from_secs(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
        u64::try_from(v)
            .map(|secs| Seconds(Duration::from_secs(secs)))
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
        Duration::try_from_secs_f64(v)
            .map(Seconds)
            .map_err(|_| E::invalid_value(Unexpected::Float(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
        let text = v.trim();
        let plain_number = !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.');
        let parsed = if plain_number {
            match text.parse::<u64>() {
                Ok(secs) => Some(Duration::from_secs(secs)),
                Err(_) => text
                    .parse::<f64>()
                    .ok()
                    .and_then(|secs| Duration::try_from_secs_f64(secs).ok()),
            }
        } else {
            humantime::parse_duration(text).ok()
        };
        parsed
            .map(Seconds)
            .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde::de::value::Error as PlainError;

    fn size(text: &str) -> Result<u64, String> {
        let de: de::value::StrDeserializer<'_, PlainError> = text.into_deserializer();
        ByteSize::deserialize(de)
            .map(|size| size.0)
            .map_err(|e| e.to_string())
    }

    fn secs(text: &str) -> Result<Duration, String> {
        let de: de::value::StrDeserializer<'_, PlainError> = text.into_deserializer();
        Seconds::deserialize(de)
            .map(|s| s.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn byte_sizes_in_every_documented_form() {
        assert_eq!(size("1048576"), Ok(1_048_576));
        assert_eq!(size("64KiB"), Ok(65_536));
        assert_eq!(size("1 MiB"), Ok(1 << 20));
        assert_eq!(size("8MiB"), Ok(8 << 20));
        assert_eq!(size("1GiB"), Ok(1 << 30));
        assert_eq!(size("16KB"), Ok(16_000));
        assert_eq!(size("16kb"), Ok(16_000));
        assert_eq!(size("  2 mib "), Ok(2 << 20));
        assert_eq!(size("1.5MiB"), Ok(1_572_864));
        assert_eq!(size("0.5KiB"), Ok(512));
        assert_eq!(size("1.000KB"), Ok(1_000));
        assert_eq!(size("0"), Ok(0));
        assert_eq!(size("0B"), Ok(0));
        assert_eq!(size("000012"), Ok(12));
        assert_eq!(size("0x100000"), Ok(1 << 20));
        assert_eq!(size(" 0XfF "), Ok(255));
        assert_eq!(size("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(
            size("0x1ffffffffffffffff"),
            Err(too_large("0x1ffffffffffffffff"))
        );
        assert!(size("0x").is_err());
        assert!(size("0xg").unwrap_err().contains("expected a byte size"));
        assert_eq!(size("16EiB"), Err(too_large("16EiB")));
    }

    #[test]
    fn byte_size_limits() {
        assert_eq!(size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            size("18446744073709551616"),
            Err(too_large("18446744073709551616"))
        );
        assert_eq!(size("20000000PiB"), Err(too_large("20000000PiB")));
        assert_eq!(size("15EiB"), Ok(15 << 60));
        let digits = "9".repeat(60);
        assert_eq!(size(&digits), Err(too_large(&digits)));
    }

    fn too_large(text: &str) -> String {
        format!(
            "expected a byte size of at most 18446744073709551615 bytes (16EiB), found string \
             {text:?}"
        )
    }

    #[test]
    fn malformed_byte_sizes_are_rejected_clearly() {
        let malformed = |text: &str| {
            format!(
                "invalid value: string {text:?}, expected a byte size such as 1048576 or \"1MiB\""
            )
        };
        for text in [
            "lots", "", " ", "-1", "+1", "1..5KiB", ".5KiB", "5.KiB", "KiB", "1 2",
        ] {
            let expected = if text == "1 2" {
                Err(
                    "expected a byte size with a unit of B, KB, MB, GB, TB, PB, EB, KiB, MiB, \
                     GiB, TiB, PiB or EiB, found string \"1 2\""
                        .to_owned(),
                )
            } else {
                Err(malformed(text))
            };
            assert_eq!(size(text), expected, "{text:?}");
        }
        assert_eq!(
            size("0.1KiB"),
            Err("expected a whole number of bytes, found string \"0.1KiB\"".to_owned())
        );
        assert!(size("5XB").unwrap_err().contains("with a unit of B, KB"));
    }

    #[test]
    fn display_is_the_shortest_exact_form_and_round_trips() {
        let cases = [
            (0, "0B"),
            (1, "1B"),
            (1023, "1023B"),
            (1024, "1KiB"),
            (16_000, "16KB"),
            (1 << 20, "1MiB"),
            (1_000_000, "1MB"),
            (1_572_864, "1536KiB"),
            (64 << 20, "64MiB"),
            (u64::MAX, "18446744073709551615B"),
        ];
        for (bytes, text) in cases {
            assert_eq!(ByteSize(bytes).to_string(), text);
            assert_eq!(size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn byte_sizes_from_integers() {
        use serde::de::value::{I64Deserializer, U64Deserializer};
        let from_u64 = |v: u64| ByteSize::deserialize(U64Deserializer::<PlainError>::new(v));
        let from_i64 = |v: i64| ByteSize::deserialize(I64Deserializer::<PlainError>::new(v));
        assert_eq!(from_u64(u64::MAX), Ok(ByteSize(u64::MAX)));
        assert_eq!(from_i64(0), Ok(ByteSize(0)));
        assert_eq!(
            from_i64(-1).unwrap_err().to_string(),
            "invalid value: integer `-1`, expected a byte size such as 1048576 or \"1MiB\""
        );
    }

    #[test]
    fn durations_in_every_documented_form() {
        assert_eq!(secs("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(secs("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(secs("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(secs("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(secs("30"), Ok(Duration::from_secs(30)));
        assert_eq!(secs("0"), Ok(Duration::ZERO));
        assert_eq!(secs("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(
            secs("soon"),
            Err(
                "invalid value: string \"soon\", expected a duration such as 30 or 2.5 \
                 (seconds), or \"250ms\""
                    .to_owned()
            )
        );
        assert!(secs("-5").is_err());
        assert!(secs("").is_err());
        assert!(secs("1.2.3").is_err());
    }

    #[test]
    fn durations_from_numbers() {
        use serde::de::value::{F64Deserializer, I64Deserializer, U64Deserializer};
        let from_f64 = |v: f64| Seconds::deserialize(F64Deserializer::<PlainError>::new(v));
        assert_eq!(from_f64(2.5), Ok(Seconds(Duration::from_millis(2500))));
        assert!(from_f64(-1.0).is_err());
        assert!(from_f64(f64::NAN).is_err());
        assert!(from_f64(f64::INFINITY).is_err());
        assert_eq!(
            Seconds::deserialize(U64Deserializer::<PlainError>::new(u64::MAX)),
            Ok(Seconds(Duration::from_secs(u64::MAX)))
        );
        assert!(Seconds::deserialize(I64Deserializer::<PlainError>::new(-1)).is_err());
    }

    #[test]
    fn from_str_speaks_like_a_configuration_error() {
        use std::str::FromStr;
        assert_eq!(ByteSize::from_str("64KiB"), Ok(ByteSize(64 << 10)));
        assert_eq!(
            ByteSize::from_str("lots").unwrap_err().to_string(),
            "expected a byte size such as 1048576 or \"1MiB\", found \"lots\""
        );
        assert_eq!(
            Seconds::from_str("1m 30s"),
            Ok(Seconds(Duration::from_secs(90)))
        );
        assert_eq!(
            Seconds::from_str("soon").unwrap_err().to_string(),
            "expected a duration such as 30 or 2.5 (seconds), or \"250ms\", found \"soon\""
        );
    }

    fn share(text: &str) -> Result<u32, String> {
        let de: de::value::StrDeserializer<'_, PlainError> = text.into_deserializer();
        Share::deserialize(de)
            .map(|s| s.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn shares_as_percentages_and_fractions() {
        assert_eq!(share("5%"), Ok(50_000));
        assert_eq!(share(" 2.5 % "), Ok(25_000));
        assert_eq!(share("100%"), Ok(1_000_000));
        assert_eq!(share("0%"), Ok(0));
        assert_eq!(share("0.05"), Ok(50_000));
        assert_eq!(share("1"), Ok(1_000_000));
        assert_eq!(share("0.0000004"), Ok(0), "rounded to millionths");
        let malformed = |text: &str| {
            format!(
                "invalid value: string {text:?}, expected a share such as \"5%\" or 0.05 \
                 (from 0 to 100 %)"
            )
        };
        for text in [
            "150%", "1.5", "-5%", "5%%", "%", "", "five", ".5", "5.", "1.2.3%",
        ] {
            assert_eq!(share(text), Err(malformed(text)), "{text:?}");
        }
        use serde::de::value::{F64Deserializer, I64Deserializer, U64Deserializer};
        let from_f64 = |v: f64| Share::deserialize(F64Deserializer::<PlainError>::new(v));
        assert_eq!(from_f64(0.05), Ok(Share(50_000)));
        assert!(from_f64(f64::NAN).is_err());
        assert!(from_f64(1.01).is_err());
        let from_u64 = |v: u64| Share::deserialize(U64Deserializer::<PlainError>::new(v));
        assert_eq!(from_u64(1), Ok(Share(1_000_000)));
        assert!(from_u64(5).is_err(), "5 is not a fraction; \"5%\" is");
        assert!(Share::deserialize(I64Deserializer::<PlainError>::new(-1)).is_err());
    }

    #[test]
    fn share_display_round_trips() {
        for (value, text) in [
            (0, "0%"),
            (50_000, "5%"),
            (25_000, "2.5%"),
            (1, "0.0001%"),
            (123_456, "12.3456%"),
            (1_000_000, "100%"),
        ] {
            assert_eq!(Share(value).to_string(), text);
            assert_eq!(share(text), Ok(value), "{text}");
        }
        assert_eq!(Share::from_percent(250), Share(1_000_000));
    }

    #[test]
    fn seconds_display_round_trips() {
        for duration in [
            Duration::ZERO,
            Duration::from_millis(100),
            Duration::from_secs(90),
            Duration::new(3_600, 5),
            Duration::from_secs(86_400 * 400),
        ] {
            let text = Seconds(duration).to_string();
            assert_eq!(secs(&text), Ok(duration), "{text}");
        }
        assert_eq!(Seconds(Duration::from_millis(250)).to_string(), "250ms");
    }
}
