//! Reading command arguments as Redis does: integers and floats strictly
//! (no blanks, no `+`, no leading zeros), option names in any case, and
//! the error replies for each mistake.
//!
//! Invariants: every parse failure is an error reply with Redis's
//! wording, never a panic.

use crate::resp::Reply;

/// A command's outcome: its reply, or an error reply.
pub type CmdResult = Result<Reply, Reply>;

/// `ERR value is not an integer or out of range`.
pub fn not_int() -> Reply {
    Reply::err("value is not an integer or out of range")
}

/// `ERR syntax error`.
pub fn syntax() -> Reply {
    Reply::err("syntax error")
}

/// A signed 64-bit integer written as Redis writes one.
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    if arg.is_empty() || arg.len() > 20 || arg[0] == b'+' {
        return None;
    }
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    if digits.is_empty() || (digits[0] == b'0' && arg.len() > 1) {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// [`parse_i64`], as an error reply when it is not one.
pub fn int(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(not_int)
}

/// A finite float written without blanks.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    f.is_finite().then_some(f)
}

/// Whether `arg` is `name`, in any case.
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// An argument shown in a message, lossily as text.
pub fn show(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_redis_reads_them() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b"1 ",
            b" 1",
            b"1a",
            b"-",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", show(bad));
        }
        assert_eq!(parse_f64(b"1.5e3"), Some(1500.0));
        assert_eq!(parse_f64(b"inf"), None);
        assert_eq!(parse_f64(b" 1"), None);
    }
}
