//! Replies and their encoding in RESP2 or RESP3.
//!
//! Invariants: every reply encodes to one complete, well-formed frame of
//! the protocol version asked for; simple strings and errors never carry
//! `\r` or `\n` (they are replaced by spaces), so a message built from
//! client input cannot split a frame; RESP3-only types degrade to their
//! RESP2 equivalents (maps to flat arrays, doubles to bulk strings, null
//! to the null bulk or null array).

use std::io::Write as _;

/// A reply to one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`-style status.
    Simple(String),
    /// `-ERR ...`-style error: the message with its code (`ERR`,
    /// `WRONGTYPE`, `NOAUTH`...).
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` and bytes.
    Bulk(Vec<u8>),
    /// The null bulk string (RESP3: null).
    Nil,
    /// An array.
    Array(Vec<Reply>),
    /// The null array (RESP3: null).
    NilArray,
    /// A map (RESP2: an array of keys and values).
    Map(Vec<(Reply, Reply)>),
    /// A double (RESP2: a bulk string).
    Double(f64),
    /// Already-encoded bytes for both versions (a reply kept verbatim).
    Raw(Vec<u8>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// An error with code `ERR`.
    pub fn err(msg: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {msg}"))
    }

    /// A bulk string of `s`.
    pub fn bulk(s: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(s.into())
    }

    /// A bulk string, or nil for `None`.
    pub fn opt_bulk(v: Option<Vec<u8>>) -> Reply {
        v.map_or(Reply::Nil, Reply::Bulk)
    }

    /// Whether it is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends its encoding in protocol version `proto` (2 or 3) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>, proto: u8) {
        let resp3 = proto >= 3;
        match self {
            Reply::Simple(s) => line(out, b'+', s),
            Reply::Error(s) => line(out, b'-', s),
            Reply::Int(n) => {
                let _ = write!(out, ":{n}\r\n");
            }
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                let _ = write!(out, "*{}\r\n", items.len());
                for item in items {
                    item.encode(out, proto);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    let _ = write!(out, "%{}\r\n", pairs.len());
                } else {
                    let _ = write!(out, "*{}\r\n", pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(out, proto);
                    v.encode(out, proto);
                }
            }
            Reply::Double(d) if resp3 => {
                let _ = write!(out, ",{}\r\n", format_double(*d));
            }
            Reply::Double(d) => bulk(out, format_double(*d).as_bytes()),
            Reply::Raw(bytes) => out.extend_from_slice(bytes),
        }
    }
}

/// A double as Redis prints one: the shortest decimal that reads back
/// the same, `inf`/`-inf`/`nan` spelled out.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        "nan".into()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{d}")
    }
}

fn line(out: &mut Vec<u8>, kind: u8, s: &str) {
    out.push(kind);
    out.extend(
        s.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    let _ = write!(out, "${}\r\n", b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: u8) -> Vec<u8> {
        let mut out = Vec::new();
        r.encode(&mut out, proto);
        out
    }

    #[test]
    fn encodings() {
        assert_eq!(enc(&Reply::ok(), 2), b"+OK\r\n");
        assert_eq!(enc(&Reply::err("a\r\nb"), 2), b"-ERR a  b\r\n");
        assert_eq!(enc(&Reply::Nil, 2), b"$-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), b"_\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), b"*-1\r\n");
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, 2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(3000.0), 3), b",3000\r\n");
    }
}
