//! Numbers on the command line: byte offsets and lengths in decimal, `0x` hexadecimal or with
//! a binary unit (`4K`, `4KiB`, `1 M`), ranges as people write them (`OFFSET:LENGTH`,
//! `OFFSET:end`, `OFFSET:`, `-SUFFIX`), and counts that must be positive.
//!
//! Units on the command line are binary only: `K`, `k` and `KiB` are all 1,024 bytes, as
//! `head -c 1K` and `dd bs=1K` read them. Decimal units (`KB`, `MB`, …), which configuration
//! files accept as powers of 1,000, are refused here with a message saying what to write, so
//! that `1kb` and `1K` never mean different things without a word.

use karu::config::ByteSize;

/// The binary units, by the letter that starts them.
const BINARY: [char; 6] = ['k', 'm', 'g', 't', 'p', 'e'];

/// A number of bytes: `4096`, `0x1000`, `4K`, `4KiB`, `1.5M`.
pub(crate) fn bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let not_bytes = || {
        format!(
            "{text:?} is not a number of bytes (decimal, 0x hex, or with a binary unit such as \
             4K, 4KiB, 1M or 1MiB)"
        )
    };
    let is_hex = trimmed.starts_with("0x") || trimmed.starts_with("0X");
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(trimmed.len());
    let (number, unit) = (&trimmed[..split], trimmed[split..].trim_start());
    let spelled = if is_hex {
        trimmed.to_owned()
    } else {
        let lower = unit.to_ascii_lowercase();
        let mut letters = lower.chars();
        match (letters.next(), letters.as_str()) {
            (None, _) | (Some('b'), "") => trimmed.to_owned(),
            (Some(letter), "" | "ib") if BINARY.contains(&letter) => {
                format!("{number}{}iB", letter.to_ascii_uppercase())
            }
            (Some(letter), "b") if BINARY.contains(&letter) => {
                return Err(format!(
                    "{text:?}: decimal units are not taken on the command line, so that {unit} \
                     and {} cannot mean different things: write {number}{} or {number}{}iB for \
                     binary units (1K = 1024 bytes), or the number of bytes",
                    letter.to_ascii_uppercase(),
                    letter.to_ascii_uppercase(),
                    letter.to_ascii_uppercase()
                ));
            }
            _ => return Err(not_bytes()),
        }
    };
    spelled
        .parse::<ByteSize>()
        .map(|size| size.0)
        .map_err(|_| not_bytes())
}

/// `--max-gap`, `--max-span`: a size with an optional unit.
pub(crate) fn size(text: &str) -> Result<u64, String> {
    bytes(text)
}

/// `--max-parts`, `--max-amplification`: at least 1, since 0 would fail every read.
pub(crate) fn positive(text: &str) -> Result<u32, String> {
    let trimmed = text.trim();
    let parsed = match trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => trimmed.parse::<u64>(),
    };
    match parsed {
        Ok(0) => Err("expected at least 1, found 0 (no read could be planned)".to_owned()),
        Ok(n) => {
            u32::try_from(n).map_err(|_| format!("out of range (at most {}), found {n}", u32::MAX))
        }
        Err(_) => Err(format!(
            "{text:?} is not a count (a positive integer, decimal or 0x hex)"
        )),
    }
}

/// A range as written on the command line, before the object's size is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    /// `OFFSET:LENGTH`.
    Span { offset: u64, length: u64 },
    /// `OFFSET:end` or `OFFSET:`: from `offset` to the end of the object.
    ToEnd { offset: u64 },
    /// `-N`: the last `N` bytes (all of them when the object is shorter), as `curl -r -N`.
    Suffix { length: u64 },
}

impl Range {
    /// The offset it was written with, if it was.
    pub(crate) fn offset(self) -> Option<u64> {
        match self {
            Range::Span { offset, .. } | Range::ToEnd { offset } => Some(offset),
            Range::Suffix { .. } => None,
        }
    }

    /// The offset and length of the range in an object of `size` bytes; `None` for a range
    /// that starts past the end (the read proves that itself). An empty range (`7:end` of a
    /// 7-byte object, `-5` of an empty one) has length 0.
    pub(crate) fn place(self, size: u64) -> Option<(u64, u64)> {
        match self {
            Range::Span { offset, length } => Some((offset, length)),
            Range::ToEnd { offset } => (offset <= size).then(|| (offset, size - offset)),
            Range::Suffix { length } => {
                let length = length.min(size);
                Some((size - length, length))
            }
        }
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Range::Span { offset, length } => write!(f, "{offset}:{length}"),
            Range::ToEnd { offset } => write!(f, "{offset}:end"),
            Range::Suffix { length } => write!(f, "-{length}"),
        }
    }
}

/// `OFFSET:LENGTH`, `OFFSET:end`, `OFFSET:` or `-SUFFIX`.
pub(crate) fn range(text: &str) -> Result<Range, String> {
    let expected = || {
        format!(
            "range {text:?}: expected OFFSET:LENGTH, OFFSET:end (to the end) or -LENGTH (the \
             last bytes)"
        )
    };
    if let Some(suffix) = text.trim().strip_prefix('-') {
        let length = bytes(suffix).map_err(|e| format!("range {text:?}: {e}"))?;
        if length == 0 {
            return Err(format!(
                "range {text:?}: a suffix of 0 bytes reads nothing (give at least 1)"
            ));
        }
        return Ok(Range::Suffix { length });
    }
    let (offset, length) = text.split_once(':').ok_or_else(expected)?;
    let offset = bytes(offset).map_err(|e| format!("range {text:?}: {e}"))?;
    match length.trim() {
        "" | "end" => Ok(Range::ToEnd { offset }),
        length => Ok(Range::Span {
            offset,
            length: bytes(length).map_err(|e| format!("range {text:?}: {e}"))?,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_numbers_take_hex_and_binary_units() {
        assert_eq!(bytes("4096"), Ok(4096));
        assert_eq!(bytes("0x1000"), Ok(4096));
        assert_eq!(bytes("4KiB"), Ok(4096));
        assert_eq!(bytes("1 MiB"), Ok(1 << 20));
        assert_eq!(bytes("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(bytes("12B"), Ok(12));
        assert!(bytes("x").unwrap_err().contains("is not a number of bytes"));
        assert!(bytes("-1").is_err());
        assert!(bytes("16EiB").is_err(), "too large");
    }

    #[test]
    fn one_letter_units_are_binary_and_decimal_ones_are_refused() {
        for (text, value) in [
            ("1K", 1024),
            ("1k", 1024),
            ("4k", 4096),
            ("1M", 1 << 20),
            ("1m", 1 << 20),
            ("2G", 2 << 30),
            ("1T", 1 << 40),
            ("1.5M", 3 << 19),
            ("1 K", 1024),
            ("1kib", 1024),
        ] {
            assert_eq!(bytes(text), Ok(value), "{text}");
        }
        for text in ["1kb", "1KB", "1kB", "2MB", "1 GB"] {
            let error = bytes(text).unwrap_err();
            assert!(error.contains("decimal units are not taken"), "{error}");
        }
        assert_eq!(
            bytes("1kb").unwrap_err(),
            "\"1kb\": decimal units are not taken on the command line, so that kb and K cannot \
             mean different things: write 1K or 1KiB for binary units (1K = 1024 bytes), or \
             the number of bytes"
        );
        for text in ["1Q", "1kk", "1KiBs", "K", "0x10K"] {
            assert!(
                bytes(text)
                    .unwrap_err()
                    .contains("is not a number of bytes"),
                "{text}"
            );
        }
    }

    #[test]
    fn counts_are_positive() {
        assert_eq!(positive("4"), Ok(4));
        assert_eq!(positive("0x10"), Ok(16));
        assert!(positive("0").unwrap_err().contains("at least 1"));
        assert!(
            positive("4294967296")
                .unwrap_err()
                .contains("at most 4294967295")
        );
        assert!(positive("many").is_err());
    }

    #[test]
    fn ranges_as_people_write_them() {
        assert_eq!(
            range("10:5"),
            Ok(Range::Span {
                offset: 10,
                length: 5
            })
        );
        assert_eq!(
            range("0x100:1KiB"),
            Ok(Range::Span {
                offset: 256,
                length: 1024
            })
        );
        assert_eq!(range("7:end"), Ok(Range::ToEnd { offset: 7 }));
        assert_eq!(range("7:"), Ok(Range::ToEnd { offset: 7 }));
        assert_eq!(range("1K:"), Ok(Range::ToEnd { offset: 1024 }));
        assert_eq!(range("-500"), Ok(Range::Suffix { length: 500 }));
        assert_eq!(range("-4k"), Ok(Range::Suffix { length: 4096 }));
        assert!(range("-0").unwrap_err().contains("a suffix of 0 bytes"));
        assert!(
            range("10-5")
                .unwrap_err()
                .contains("expected OFFSET:LENGTH")
        );
        assert!(
            range("x:5")
                .unwrap_err()
                .starts_with("range \"x:5\": \"x\" is not")
        );
        assert!(range("1:1kb").unwrap_err().contains("decimal units"));
    }

    #[test]
    fn ranges_are_placed_in_an_object() {
        let to_end = Range::ToEnd { offset: 7 };
        assert_eq!(to_end.place(24), Some((7, 17)));
        assert_eq!(to_end.place(7), Some((7, 0)));
        assert_eq!(to_end.place(5), None);
        let suffix = Range::Suffix { length: 500 };
        assert_eq!(suffix.place(24), Some((0, 24)));
        assert_eq!(suffix.place(1000), Some((500, 500)));
        assert_eq!(suffix.place(0), Some((0, 0)));
        let span = Range::Span {
            offset: 3,
            length: 4,
        };
        assert_eq!(span.place(0), Some((3, 4)));
        assert_eq!(
            [span.offset(), to_end.offset(), suffix.offset()],
            [Some(3), Some(7), None]
        );
        assert_eq!(
            [span.to_string(), to_end.to_string(), suffix.to_string()],
            ["3:4", "7:end", "-500"]
        );
    }
}
