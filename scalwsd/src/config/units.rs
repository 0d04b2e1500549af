//! Durations (`250ms`, `5s`, `2m`, `1h`) and sizes (`512KiB`, `64MiB`) as written in the file.

use std::time::Duration;

use serde::{Deserialize, Deserializer, de};

/// A duration: an integer and a unit (`ms`, `s`, `m`, `h`). `0s` is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DurationValue(pub Duration);

/// A size in bytes: an integer and a unit (`B`, `KiB`, `MiB`, `GiB`), or a bare integer of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SizeValue(pub u64);

fn split_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let number = text[..digits].parse().ok()?;
    Some((number, text[digits..].trim_start()))
}

/// Parses `250ms`, `5s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad =
        || format!("invalid duration \"{text}\" (expected a number and a unit: 250ms, 5s, 2m, 1h)");
    let (number, unit) = split_number(text.trim()).ok_or_else(bad)?;
    let millis = match unit {
        "ms" => Some(number),
        "s" => number.checked_mul(1_000),
        "m" => number.checked_mul(60_000),
        "h" => number.checked_mul(3_600_000),
        _ => None,
    };
    match millis {
        Some(ms) if ms <= MAX_DURATION_MS => Ok(Duration::from_millis(ms)),
        Some(_) => Err(format!(
            "duration \"{text}\" is too long (at most 365 days)"
        )),
        None => Err(bad()),
    }
}

/// No timeout needs more than a year; the bound keeps deadline arithmetic far from overflow.
const MAX_DURATION_MS: u64 = 365 * 24 * 3_600_000;

/// Parses `512KiB`, `64MiB`, `1GiB`, `100B`, or a bare number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!("invalid size \"{text}\" (expected a number and a unit: 512B, 64KiB, 16MiB, 1GiB)")
    };
    let (number, unit) = split_number(text.trim()).ok_or_else(bad)?;
    let factor: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(bad()),
    };
    number.checked_mul(factor).ok_or_else(bad)
}

/// Accepts a YAML string or integer, so `max_headers: 100` and `max_request_body: 16MiB` both read naturally.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_duration(&text)
            .map(DurationValue)
            .map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for SizeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Scalar::deserialize(deserializer)? {
            Scalar::Int(bytes) => Ok(SizeValue(bytes)),
            Scalar::Text(text) => parse_size(&text).map(SizeValue).map_err(de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in [
            "",
            "5",
            "s",
            "5x",
            "-1s",
            "1.5s",
            "99999999999999999999h",
            "8761h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("100B"), Ok(100));
        assert_eq!(parse_size("100"), Ok(100));
        for bad in ["", "KiB", "5KB", "5 kib", "-1MiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
