//! How keys and values are written on the command line and on the screen.
//!
//! Three encodings, chosen with `--hex` / `--base64` (default: text):
//!
//! - text: an argument is taken as its UTF-8 bytes, verbatim. On output,
//!   `get` prints the stored bytes as they are, while `scan` prints
//!   [`escape`]d text so that one pair is always one line.
//! - hex: two digits per byte, either case on input, lower case on output.
//! - base64: the standard alphabet; padding optional on input, written on
//!   output.
//!
//! Invariants: `decode(encode(b)) == b` for every encoding and every byte
//! string; [`escape`] yields valid UTF-8 with no tab, newline, carriage
//! return or other control character, and [`unescape`] inverts it; no
//! function here panics on any input.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

/// Accepts base64 with or without padding.
const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The encoding of keys and values in arguments and output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 text (escaped in `scan` output).
    #[default]
    Text,
    /// Hexadecimal.
    Hex,
    /// Standard base64.
    Base64,
}

impl Encoding {
    /// The encoding selected by the `--hex` and `--base64` flags.
    pub fn from_flags(hex: bool, base64: bool) -> Encoding {
        match (hex, base64) {
            (true, _) => Encoding::Hex,
            (false, true) => Encoding::Base64,
            (false, false) => Encoding::Text,
        }
    }

    /// The name used in messages and by the shell's `encoding` command.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Text => "text",
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
        }
    }

    /// Parses a name given to the shell's `encoding` command.
    pub fn from_name(name: &str) -> Option<Encoding> {
        match name {
            "text" | "utf8" | "utf-8" => Some(Encoding::Text),
            "hex" => Some(Encoding::Hex),
            "base64" => Some(Encoding::Base64),
            _ => None,
        }
    }

    /// The bytes an argument stands for; the error names what is wrong.
    pub fn decode(self, arg: &str) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Text => Ok(arg.as_bytes().to_vec()),
            Encoding::Hex => hex_decode(arg).map_err(|e| format!("invalid hex: {e}")),
            Encoding::Base64 => base64_decode(arg).map_err(|e| format!("invalid base64: {e}")),
        }
    }

    /// One field of `scan` output: never contains a tab or a newline.
    pub fn field(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => escape(bytes),
            Encoding::Hex => hex_encode(bytes),
            Encoding::Base64 => base64_encode(bytes),
        }
    }

    /// A value as `get` prints it: the raw bytes for text, else encoded.
    pub fn value(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Encoding::Text => bytes.to_vec(),
            other => other.field(bytes).into_bytes(),
        }
    }
}

/// Lower-case hexadecimal.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes hexadecimal digits (either case, no prefix, no separators).
pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    if let Some(pos) = bytes.iter().position(|&c| hex_digit(c).is_none()) {
        let c = s[pos..].chars().next().unwrap_or('?');
        return Err(format!("{c:?} is not a hex digit (at position {pos})"));
    }
    if bytes.len() % 2 == 1 {
        return Err(format!("odd number of digits ({})", bytes.len()));
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|p| (hex_digit(p[0]).unwrap_or(0) << 4) | hex_digit(p[1]).unwrap_or(0))
        .collect())
}

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard base64, padded or not.
pub fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    BASE64_LENIENT.decode(s).map_err(|e| e.to_string())
}

/// Escapes bytes into one line of text: `\\`, `\t`, `\n`, `\r`, and
/// `\xHH` (lower case) for other ASCII control characters (0x00-0x1f,
/// 0x7f) and for every byte that is not part of valid UTF-8. Everything
/// else is copied.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => push_hex_escape(&mut out, c as u8),
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            push_hex_escape(&mut out, b);
        }
    }
    out
}

/// A key bound of a damage report (`check`, `repair`) as one line of
/// ASCII (`None`: the store's end).
pub fn shown_bound(key: &Option<Vec<u8>>) -> Option<String> {
    key.as_ref().map(|k| k.escape_ascii().to_string())
}

fn push_hex_escape(out: &mut String, b: u8) {
    out.push_str("\\x");
    out.push_str(&hex_encode(&[b]));
}

/// Inverts [`escape`]; also accepts upper-case hex digits and raw bytes
/// that `escape` would have escaped (except that a field can never hold a
/// raw tab or newline, which separate fields and lines). Fails on an
/// unknown escape or a trailing lone backslash.
pub fn unescape(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&next) = bytes.get(i + 1) else {
            return Err(format!("lone backslash at the end (byte {})", i + 1));
        };
        match next {
            b'\\' => out.push(b'\\'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'x' => {
                let digits = (bytes.get(i + 2).copied().and_then(hex_digit))
                    .zip(bytes.get(i + 3).copied().and_then(hex_digit));
                let Some((hi, lo)) = digits else {
                    return Err(format!(
                        "\\x must be followed by two hex digits (byte {})",
                        i + 1
                    ));
                };
                out.push((hi << 4) | lo);
                i += 4;
                continue;
            }
            other => {
                return Err(format!(
                    "unknown escape \\{} (byte {}); use \\\\ for a backslash",
                    String::from_utf8_lossy(&[other]),
                    i + 1
                ))
            }
        }
        i += 2;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hex_examples() {
        assert_eq!(hex_encode(b"\x00\xffA"), "00ff41");
        assert_eq!(hex_decode("00FFa1").unwrap(), b"\x00\xff\xa1");
        assert_eq!(hex_decode("").unwrap(), b"");
        assert!(hex_decode("abc").unwrap_err().contains("odd number"));
        let e = hex_decode("0g").unwrap_err();
        assert!(e.contains("'g'") && e.contains("position 1"), "{e}");
        // Multi-byte characters are refused, not sliced.
        assert!(hex_decode("é0").unwrap_err().contains("'é'"));
        assert!(hex_decode("0x12").is_err());
    }

    #[test]
    fn base64_examples() {
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8").unwrap(), b"hello");
        assert!(base64_decode("a$==").is_err());
        assert!(base64_decode("a").is_err());
    }

    #[test]
    fn escape_examples() {
        assert_eq!(escape(b"plain text"), "plain text");
        assert_eq!(escape("naïve ✓".as_bytes()), "naïve ✓");
        assert_eq!(escape(b"a\tb\nc\rd\\e"), "a\\tb\\nc\\rd\\\\e");
        assert_eq!(escape(b"\x00\x1b\x7f"), "\\x00\\x1b\\x7f");
        assert_eq!(escape(b"\xff\xc3"), "\\xff\\xc3");
        assert_eq!(unescape(b"\\xFF\\x41").unwrap(), b"\xffA");
        assert!(unescape(b"abc\\").unwrap_err().contains("lone backslash"));
        assert!(unescape(b"\\q").unwrap_err().contains("unknown escape"));
        assert!(unescape(b"\\x4").is_err());
        assert!(unescape(b"\\xg0").is_err());
    }

    #[test]
    fn decode_names_the_problem() {
        assert_eq!(Encoding::Text.decode("a b").unwrap(), b"a b");
        assert!(Encoding::Hex
            .decode("xyz")
            .unwrap_err()
            .starts_with("invalid hex"));
        assert!(Encoding::Base64
            .decode("!!")
            .unwrap_err()
            .starts_with("invalid base64"));
        assert_eq!(Encoding::from_flags(false, false), Encoding::Text);
        assert_eq!(Encoding::from_flags(true, false), Encoding::Hex);
        assert_eq!(Encoding::from_flags(false, true), Encoding::Base64);
        for e in [Encoding::Text, Encoding::Hex, Encoding::Base64] {
            assert_eq!(Encoding::from_name(e.name()), Some(e));
        }
        assert_eq!(Encoding::Text.value(b"\xff\n"), b"\xff\n");
        assert_eq!(Encoding::Hex.value(b"\xff\n"), b"ff0a");
    }

    proptest! {
        #[test]
        fn round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(hex_decode(&hex_encode(&bytes)).unwrap(), bytes.clone());
            prop_assert_eq!(base64_decode(&base64_encode(&bytes)).unwrap(), bytes.clone());
            let esc = escape(&bytes);
            prop_assert!(!esc.chars().any(|c| c.is_ascii_control()));
            prop_assert_eq!(unescape(esc.as_bytes()).unwrap(), bytes.clone());
            for enc in [Encoding::Text, Encoding::Hex, Encoding::Base64] {
                if enc != Encoding::Text {
                    prop_assert_eq!(enc.decode(&enc.field(&bytes)).unwrap(), bytes.clone());
                }
            }
        }

        /// Arbitrary bytes (not only text) given to `unescape`: an error,
        /// or bytes that `escape` writes back in a form `unescape` reads
        /// to the same bytes.
        #[test]
        fn unescape_takes_any_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(out) = unescape(&b) {
                prop_assert_eq!(unescape(escape(&out).as_bytes()).unwrap(), out);
            }
            let text = String::from_utf8_lossy(&b);
            for enc in [Encoding::Text, Encoding::Hex, Encoding::Base64] {
                if let Ok(bytes) = enc.decode(&text) {
                    if enc != Encoding::Text {
                        prop_assert_eq!(enc.decode(&enc.field(&bytes)).unwrap(), bytes);
                    }
                }
            }
        }

        #[test]
        fn decoders_never_panic(s in "\\PC*") {
            let _ = hex_decode(&s);
            let _ = base64_decode(&s);
            let _ = unescape(s.as_bytes());
        }
    }
}
