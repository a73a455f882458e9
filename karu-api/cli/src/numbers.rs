//! Numbers on the command line: byte offsets and lengths in decimal, `0x` hexadecimal or with
//! a unit (`4KiB`, `1 MiB`), and counts that must be positive.

use karu_config::ByteSize;

/// A number of bytes: `4096`, `0x1000`, `4KiB`.
pub(crate) fn bytes(text: &str) -> Result<u64, String> {
    text.parse::<ByteSize>().map(|size| size.0).map_err(|_| {
        format!("{text:?} is not a number of bytes (decimal, 0x hex, or with a unit such as 4KiB)")
    })
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

/// `OFFSET:LENGTH`.
pub(crate) fn range(text: &str) -> Result<(u64, u64), String> {
    let (offset, length) = text
        .split_once(':')
        .ok_or_else(|| format!("range {text:?}: expected OFFSET:LENGTH"))?;
    Ok((
        bytes(offset).map_err(|e| format!("range {text:?}: {e}"))?,
        bytes(length).map_err(|e| format!("range {text:?}: {e}"))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_numbers_take_hex_and_units() {
        assert_eq!(bytes("4096"), Ok(4096));
        assert_eq!(bytes("0x1000"), Ok(4096));
        assert_eq!(bytes("4KiB"), Ok(4096));
        assert_eq!(bytes("1 MiB"), Ok(1 << 20));
        assert_eq!(bytes("18446744073709551615"), Ok(u64::MAX));
        assert!(bytes("x").unwrap_err().contains("is not a number of bytes"));
        assert!(bytes("-1").is_err());
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
    fn ranges() {
        assert_eq!(range("10:5"), Ok((10, 5)));
        assert_eq!(range("0x100:1KiB"), Ok((256, 1024)));
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
    }
}
