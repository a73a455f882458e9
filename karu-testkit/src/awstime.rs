//! The timestamp formats of AWS protocols: SigV4's `20150830T123600Z` and the RFC 3339
//! `2015-08-30T12:36:00Z` of credential documents, in UTC, without a date library.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (negative before it).
fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day count since 1970-01-01 of a proleptic Gregorian date (`days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month, day, hour, minute, second)` in UTC.
fn fields(t: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = unix_seconds(t);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let in_day = secs.rem_euclid(86_400) as u32;
    (
        year,
        month,
        day,
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60,
    )
}

/// SigV4's `x-amz-date` form: `20150830T123600Z`.
pub(crate) fn amz_date(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = fields(t);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// RFC 3339 in UTC with whole seconds: `2015-08-30T12:36:00Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = fields(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u32, |n, d| {
        n.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

/// Parses `20150830T123600Z` (exactly that shape, a valid calendar time).
pub(crate) fn parse_amz_date(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let year = number(&b[0..4])?;
    let month = number(&b[4..6])?;
    let day = number(&b[6..8])?;
    let (hour, minute, second) = (number(&b[9..11])?, number(&b[11..13])?, number(&b[13..15])?);
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    // Rejects 31 February and the like: the day must survive the round trip.
    if civil_from_days(days) != (i64::from(year), month, day) {
        return None;
    }
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Parses the UTC forms of ISO 8601 that Azure accepts in a SAS's `st` and `se`:
/// `2015-08-30`, `2015-08-30T12:36Z`, `2015-08-30T12:36:00Z` and `2015-08-30T12:36:00.1234567Z`
/// (one to seven digits of fraction); nothing else (no offsets, no other shapes).
pub(crate) fn parse_iso8601_utc(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (number(&b[0..4])?, number(&b[5..7])?, number(&b[8..10])?);
    let (mut hour, mut minute, mut second, mut nanos) = (0, 0, 0, 0u32);
    let rest = &b[10..];
    if !rest.is_empty() {
        let time = rest.strip_prefix(b"T")?.strip_suffix(b"Z")?;
        let (hm, tail) = (time.get(..5)?, &time[5..]);
        if hm[2] != b':' {
            return None;
        }
        hour = number(&hm[0..2])?;
        minute = number(&hm[3..5])?;
        if !tail.is_empty() {
            let (secs, fraction) = (tail.get(..3)?, &tail[3..]);
            if secs[0] != b':' {
                return None;
            }
            second = number(&secs[1..3])?;
            if !fraction.is_empty() {
                let digits = fraction.strip_prefix(b".")?;
                if digits.len() > 7 {
                    return None;
                }
                nanos = number(digits)? * 10u32.pow(9 - digits.len() as u32);
            }
        }
    }
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    if civil_from_days(days) != (i64::from(year), month, day) {
        return None;
    }
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// How far apart two instants are, whichever comes first.
pub(crate) fn distance(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b)
        .or_else(|_| b.duration_since(a))
        .unwrap_or_default()
}

/// `t` moved by `offset_secs` (either way; unchanged if the result cannot be represented).
pub(crate) fn shifted(t: SystemTime, offset_secs: i64) -> SystemTime {
    let by = Duration::from_secs(offset_secs.unsigned_abs());
    if offset_secs >= 0 {
        t + by
    } else {
        t.checked_sub(by).unwrap_or(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        // The instant of the SigV4 examples in the AWS documentation.
        let t = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        assert_eq!(amz_date(t), "20150830T123600Z");
        assert_eq!(rfc3339(t), "2015-08-30T12:36:00Z");
        assert_eq!(amz_date(UNIX_EPOCH), "19700101T000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn parses_what_it_formats_and_nothing_else() {
        for secs in [
            0u64,
            951_782_400,
            1_440_938_160,
            4_102_444_799,
            1_234_567_890,
        ] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_amz_date(&amz_date(t)), Some(t), "{secs}");
        }
        for bad in [
            "20150830T123600",
            "2015-08-30T12:36:00Z",
            "20150230T000000Z",
            "20151301T000000Z",
            "20150830T246000Z",
            "2015083OT123600Z",
            "",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_the_iso8601_forms_of_sas_times_and_nothing_else() {
        let t = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        assert_eq!(parse_iso8601_utc("2015-08-30T12:36:00Z"), Some(t));
        assert_eq!(parse_iso8601_utc(&rfc3339(t)), Some(t));
        assert_eq!(parse_iso8601_utc("2015-08-30T12:36Z"), Some(t));
        assert_eq!(
            parse_iso8601_utc("2015-08-30"),
            Some(UNIX_EPOCH + Duration::from_secs(1_440_892_800))
        );
        assert_eq!(
            parse_iso8601_utc("2015-08-30T12:36:00.25Z"),
            Some(t + Duration::from_millis(250))
        );
        assert_eq!(
            parse_iso8601_utc("2015-08-30T12:36:00.0000001Z"),
            Some(t + Duration::from_nanos(100))
        );
        for bad in [
            "2015-08-30T12:36:00",
            "2015-08-30T12:36:00+01:00",
            "2015-08-30T12:36:00.00000001Z",
            "2015-08-30T12:36:00.Z",
            "2015-08-30T12Z",
            "2015-02-30",
            "2015-13-01",
            "2015-08-30T24:00:00Z",
            "20150830T123600Z",
            "2015-08-30 12:36:00Z",
            "2015-08-3",
            "",
        ] {
            assert_eq!(parse_iso8601_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn distance_and_shift() {
        let t = UNIX_EPOCH + Duration::from_secs(1000);
        assert_eq!(distance(t, shifted(t, -30)), Duration::from_secs(30));
        assert_eq!(distance(shifted(t, 30), t), Duration::from_secs(30));
    }
}
