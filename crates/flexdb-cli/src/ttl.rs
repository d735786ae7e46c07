//! `--ttl DURATION`: a time to live for the pairs `put` and `load` write.
//!
//! A duration is a positive whole number with an optional unit: `ms`,
//! `s` (the default), `m`, `h` or `d` (`90`, `1500ms`, `10m`, `2h`,
//! `7d`). Invariant: the parser returns a nonzero duration or an error
//! naming what it could not read; it never panics.

use std::time::Duration;

/// Parses a `--ttl` value (see the module docs).
pub fn parse_ttl(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (a number and a unit: 90s, 10m, 2h, 7d)"))?;
    let ms_per: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => return Err(format!("unknown unit {other:?} in {s:?} (ms, s, m, h, d)")),
    };
    match n.checked_mul(ms_per) {
        Some(0) => Err("a time to live of zero (delete the key instead)".into()),
        Some(ms) => Ok(Duration::from_millis(ms)),
        None => Err(format!("{s:?} is too long a time to live")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bad_ones_are_refused() {
        assert_eq!(parse_ttl("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_ttl("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_ttl("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_ttl("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in [
            "",
            "0",
            "0s",
            "s",
            "-5",
            "5x",
            "1.5h",
            "99999999999999999999d",
        ] {
            assert!(parse_ttl(bad).is_err(), "{bad:?}");
        }
    }
}
