//! Integer settings as people write them: `8`, `"8"`, `"0x10"`, with "out of range (at most N)"
//! when a number does not fit.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserializer;
use serde::de::{self, Visitor};

use crate::units::parse_hex;

/// What an integer setting expects, used in every message about a malformed one.
const EXPECTED: &str = "a non-negative integer (decimal, or hexadecimal such as 0x10)";

/// An unsigned integer type a setting may have.
pub(crate) trait Unsigned: Sized + Copy {
    /// The largest value, widened.
    const MAX: u64;
    /// Narrows a value known to be at most [`Self::MAX`].
    fn narrow(value: u64) -> Self;
}

impl Unsigned for u32 {
    const MAX: u64 = u32::MAX as u64;
    fn narrow(value: u64) -> Self {
        u32::try_from(value).unwrap_or(u32::MAX)
    }
}

impl Unsigned for u64 {
    const MAX: u64 = u64::MAX;
    fn narrow(value: u64) -> Self {
        value
    }
}

impl Unsigned for usize {
    const MAX: u64 = usize::MAX as u64;
    fn narrow(value: u64) -> Self {
        usize::try_from(value).unwrap_or(usize::MAX)
    }
}

/// `#[serde(deserialize_with = "integer::deserialize")]` for an unsigned setting: accepts an
/// integer, or a string holding a decimal or `0x` hexadecimal integer (environment variables and
/// `--set` values are strings).
pub(crate) fn deserialize<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Unsigned,
{
    deserializer.deserialize_any(IntegerVisitor(PhantomData))
}

/// Accepts the forms documented on [`deserialize`].
struct IntegerVisitor<T>(PhantomData<T>);

impl<T: Unsigned> IntegerVisitor<T> {
    fn fit<E: de::Error>(value: u64) -> Result<T, E> {
        if value > T::MAX {
            Err(too_large::<E>(T::MAX, &value.to_string()))
        } else {
            Ok(T::narrow(value))
        }
    }
}

/// "out of range (at most N), found X".
fn too_large<E: de::Error>(max: u64, found: &str) -> E {
    E::custom(format_args!("out of range (at most {max}), found {found}"))
}

/// "out of range (at least 0), found X".
fn negative<E: de::Error>(found: &str) -> E {
    E::custom(format_args!("out of range (at least 0), found {found}"))
}

impl<T: Unsigned> Visitor<'_> for IntegerVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Self::fit(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(v) => Self::fit(v),
            Err(_) => Err(negative(&v.to_string())),
        }
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(v) => Self::fit(v),
            Err(_) => Err(too_large(T::MAX, &v.to_string())),
        }
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<T, E> {
        match u128::try_from(v) {
            Ok(v) => self.visit_u128(v),
            Err(_) => Err(negative(&v.to_string())),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Err(E::custom(format_args!(
            "expected {EXPECTED}, found float {v}"
        )))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        let text = v.trim();
        let malformed = || E::custom(format_args!("expected {EXPECTED}, found string {v:?}"));
        if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            return match parse_hex(hex) {
                Some(value) if value > T::MAX => Err(too_large(T::MAX, text)),
                Some(value) => Self::fit(value),
                None if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                    Err(too_large(T::MAX, text))
                }
                None => Err(malformed()),
            };
        }
        let (sign, digits) = match text.strip_prefix('-') {
            Some(digits) => (true, digits),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(malformed());
        }
        if sign && digits.chars().any(|c| c != '0') {
            return Err(negative(text));
        }
        match digits.parse::<u64>() {
            Ok(value) => Self::fit(value),
            Err(_) => Err(too_large(T::MAX, text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde::de::value::{
        Error as PlainError, F64Deserializer, I64Deserializer, StrDeserializer, U64Deserializer,
    };

    fn from_str<T: Unsigned>(text: &str) -> Result<T, String> {
        let de: StrDeserializer<'_, PlainError> = text.into_deserializer();
        deserialize::<_, T>(de).map_err(|e| e.to_string())
    }

    #[test]
    fn decimal_and_hexadecimal_strings() {
        assert_eq!(from_str::<u32>("8"), Ok(8));
        assert_eq!(from_str::<u32>(" 8 "), Ok(8));
        assert_eq!(from_str::<u32>("+8"), Ok(8));
        assert_eq!(from_str::<u32>("0x10"), Ok(16));
        assert_eq!(from_str::<u32>("0XfF"), Ok(255));
        assert_eq!(from_str::<u32>("-0"), Ok(0));
        assert_eq!(from_str::<u64>("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(from_str::<usize>("0xffffffff"), Ok(0xffff_ffff));
    }

    #[test]
    fn numbers_that_do_not_fit_say_out_of_range() {
        assert_eq!(
            from_str::<u32>("5000000000"),
            Err("out of range (at most 4294967295), found 5000000000".to_owned())
        );
        assert_eq!(
            from_str::<u64>("99999999999999999999999"),
            Err(
                "out of range (at most 18446744073709551615), found 99999999999999999999999"
                    .to_owned()
            )
        );
        assert_eq!(
            from_str::<u32>("0x100000000"),
            Err("out of range (at most 4294967295), found 0x100000000".to_owned())
        );
        assert_eq!(
            from_str::<u32>("-1"),
            Err("out of range (at least 0), found -1".to_owned())
        );
        let from_i64 = |v: i64| {
            deserialize::<_, u32>(I64Deserializer::<PlainError>::new(v)).map_err(|e| e.to_string())
        };
        assert_eq!(
            from_i64(-5),
            Err("out of range (at least 0), found -5".to_owned())
        );
        assert_eq!(from_i64(7), Ok(7));
        let from_u64 = |v: u64| {
            deserialize::<_, u32>(U64Deserializer::<PlainError>::new(v)).map_err(|e| e.to_string())
        };
        assert_eq!(
            from_u64(1 << 40),
            Err("out of range (at most 4294967295), found 1099511627776".to_owned())
        );
    }

    #[test]
    fn malformed_integers_say_what_is_expected() {
        for text in ["many", "", "1.5", "0x", "0xg", "1e3", "--1", "1 2"] {
            assert_eq!(
                from_str::<u32>(text),
                Err(format!(
                    "expected a non-negative integer (decimal, or hexadecimal such as 0x10), \
                     found string {text:?}"
                )),
                "{text:?}"
            );
        }
        let float = deserialize::<_, u32>(F64Deserializer::<PlainError>::new(2.5));
        assert_eq!(
            float.unwrap_err().to_string(),
            "expected a non-negative integer (decimal, or hexadecimal such as 0x10), found float \
             2.5"
        );
    }
}
