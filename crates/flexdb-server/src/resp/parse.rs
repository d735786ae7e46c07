//! Request parsing: RESP multibulk frames (`*N\r\n$L\r\n<L bytes>\r\n...`)
//! and inline commands (words on one line, as telnet and `redis-cli` send
//! them).
//!
//! Invariants: no input makes it panic; a frame is returned only once all
//! of its bytes are in the buffer; bytes are consumed as each argument
//! completes, so a long frame is never re-scanned from its start; nothing
//! is allocated ahead of the bytes it holds (an announced length only
//! bounds, never sizes, a buffer beyond a small cap); an announced length
//! or count over its limit is an error at once, before its bytes arrive.

use super::Limits;

/// A request that breaks the protocol or a limit: the connection answers
/// `-ERR Protocol error: <message>` and closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Protocol error: {0}")]
pub struct ProtocolError(pub String);

fn err<T>(msg: &str) -> Result<T, ProtocolError> {
    Err(ProtocolError(msg.to_string()))
}

/// The longest header line (`*N` / `$L`) and inline command accepted.
pub const MAX_INLINE_LEN: usize = 64 * 1024;
/// Arguments preallocated for a frame at most, whatever its count says.
const PREALLOC_ARGS: usize = 1024;

/// An incremental request parser: feed it the unconsumed bytes of the
/// connection's buffer; it keeps the frame's completed arguments between
/// calls.
#[derive(Debug, Default)]
pub struct Parser {
    /// Arguments of the frame in progress.
    args: Vec<Vec<u8>>,
    /// Arguments still expected by the frame in progress (0: between
    /// frames).
    remaining: usize,
    /// Bytes held by `args`.
    held: usize,
    /// The length announced by a `$L` line whose bytes have not all
    /// arrived yet.
    bulk_len: Option<usize>,
}

/// Where the first `\r\n` (or `\n`) of `buf` is.
fn find_line(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// A decimal integer as the header of a frame or bulk gives it.
fn header_number(line: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(line).ok()?;
    if s.is_empty() || s.starts_with('+') {
        return None;
    }
    s.parse::<i64>().ok()
}

/// A header line without its `\r\n`: `None` until it is complete.
fn header_line<'a>(buf: &'a [u8], what: &str) -> Result<Option<(usize, &'a [u8])>, ProtocolError> {
    match find_line(buf) {
        Some(nl) => {
            let line = &buf[..nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            Ok(Some((nl + 1, line)))
        }
        None if buf.len() > MAX_INLINE_LEN => Err(ProtocolError(format!("too big {what} string"))),
        None => Ok(None),
    }
}

impl Parser {
    /// A new parser, between frames.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held by the frame in progress (its completed arguments).
    pub fn held(&self) -> usize {
        self.held
    }

    /// The next complete request from `buf`, adding the bytes it consumed
    /// to `*consumed` (also when it returns `Ok(None)`: the arguments it
    /// completed are kept). An empty request (`*0`, a blank line) is
    /// returned as an empty vector.
    pub fn next(
        &mut self,
        buf: &[u8],
        consumed: &mut usize,
        limits: &Limits,
    ) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        let mut pos = 0;
        let out = self.step(buf, &mut pos, limits);
        *consumed += pos;
        out
    }

    fn step(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        limits: &Limits,
    ) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        if self.remaining == 0 {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first != b'*' {
                return inline(buf, pos);
            }
            let Some((used, line)) = header_line(buf, "mbulk count")? else {
                return Ok(None);
            };
            let n = match header_number(&line[1..]) {
                Some(n) if n <= limits.max_multibulk_len as i64 => n,
                _ => return err("invalid multibulk length"),
            };
            *pos = used;
            if n <= 0 {
                return Ok(Some(Vec::new()));
            }
            // n <= max_multibulk_len, which is a usize.
            self.remaining = usize::try_from(n).unwrap_or(0);
            self.args = Vec::with_capacity(self.remaining.min(PREALLOC_ARGS));
            self.held = 0;
        }
        while self.remaining > 0 {
            let rest = &buf[*pos..];
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    let Some(&first) = rest.first() else {
                        return Ok(None);
                    };
                    if first != b'$' {
                        let got = char::from(first).escape_default().to_string();
                        return Err(ProtocolError(format!("expected '$', got '{got}'")));
                    }
                    let Some((used, line)) = header_line(rest, "bulk count")? else {
                        return Ok(None);
                    };
                    let len = match header_number(&line[1..]) {
                        Some(n) if (0..=limits.max_bulk_len as i64).contains(&n) => n,
                        _ => return err("invalid bulk length"),
                    };
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    if self.held.saturating_add(len) > limits.max_query_buffer {
                        return err("query buffer limit exceeded");
                    }
                    *pos += used;
                    self.bulk_len = Some(len);
                    len
                }
            };
            let rest = &buf[*pos..];
            let Some(total) = len.checked_add(2) else {
                return err("invalid bulk length");
            };
            if rest.len() < total {
                return Ok(None);
            }
            if &rest[len..total] != b"\r\n" {
                return err("expected CRLF after bulk");
            }
            self.args.push(rest[..len].to_vec());
            self.held += len;
            self.bulk_len = None;
            self.remaining -= 1;
            *pos += total;
        }
        self.held = 0;
        Ok(Some(std::mem::take(&mut self.args)))
    }
}

/// An inline command: one line, split into words (quotes as `redis-cli`
/// writes them).
fn inline(buf: &[u8], pos: &mut usize) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
    let Some(nl) = find_line(buf) else {
        if buf.len() > MAX_INLINE_LEN {
            return err("too big inline request");
        }
        return Ok(None);
    };
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    *pos = nl + 1;
    match split_words(line) {
        Some(words) => Ok(Some(words)),
        None => err("unbalanced quotes in request"),
    }
}

/// Words of an inline line: separated by blanks; `"..."` with the escapes
/// `\n \r \t \b \a \\ \" \xHH`, or `'...'` with `\'`; `None` when a quote
/// is not closed or a closing quote is not followed by a blank.
pub fn split_words(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let mut word = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    let &c = line.get(i)?;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let &e = line.get(i + 1)?;
                            let hex = line.get(i + 2..i + 4).and_then(|h| {
                                std::str::from_utf8(h)
                                    .ok()
                                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                            });
                            match (e, hex) {
                                (b'x', Some(b)) => {
                                    word.push(b);
                                    i += 4;
                                    continue;
                                }
                                (b'n', _) => word.push(b'\n'),
                                (b'r', _) => word.push(b'\r'),
                                (b't', _) => word.push(b'\t'),
                                (b'b', _) => word.push(8),
                                (b'a', _) => word.push(7),
                                (other, _) => word.push(other),
                            }
                            i += 2;
                        }
                        _ => {
                            word.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return None;
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    let &c = line.get(i)?;
                    match c {
                        b'\'' => break,
                        b'\\' if line.get(i + 1) == Some(&b'\'') => {
                            word.push(b'\'');
                            i += 2;
                        }
                        _ => {
                            word.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return None;
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    word.push(line[i]);
                    i += 1;
                }
            }
        }
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_bulk_len: 100,
            max_multibulk_len: 10,
            max_query_buffer: 1000,
        }
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = Parser::new();
        let mut at = 0;
        let mut out = Vec::new();
        while let Some(f) = p.next(&input[at..], &mut at, &limits())? {
            out.push(f);
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline_frames() {
        let frames =
            parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\\x41\"\n").unwrap();
        assert_eq!(frames[0], vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(frames[1], vec![b"PING".to_vec()]);
        assert_eq!(
            frames[2],
            vec![b"set".to_vec(), b"a".to_vec(), b"b cA".to_vec()]
        );
    }

    #[test]
    fn byte_by_byte_gives_the_same_frames() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\nxx\r\n";
        let mut p = Parser::new();
        let mut buf = Vec::new();
        let mut at = 0;
        let mut got = None;
        for &b in input.iter() {
            buf.push(b);
            if let Some(f) = p.next(&buf[at..], &mut at, &limits()).unwrap() {
                got = Some(f);
            }
        }
        assert_eq!(at, input.len());
        assert_eq!(got.unwrap()[2], b"v\r\nxx".to_vec());
    }

    #[test]
    fn limits_and_bad_frames_are_errors() {
        assert!(parse_all(b"*1000000000\r\n").is_err());
        assert!(parse_all(b"*1\r\n$1099511627776\r\n").is_err());
        assert!(parse_all(b"*1\r\n$-5\r\n").is_err());
        assert!(parse_all(b"*x\r\n").is_err());
        assert!(parse_all(b"*1\r\n:3\r\n").is_err());
        assert!(parse_all(b"*1\r\n$1\r\nabc\r\n").is_err());
        assert!(parse_all(b"echo \"unclosed\n").is_err());
        assert!(parse_all(&[b'a'; MAX_INLINE_LEN + 1]).is_err());
        // Truncated frames are simply incomplete.
        assert_eq!(parse_all(b"*2\r\n$3\r\nGET\r\n$1\r").unwrap().len(), 0);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            let mut buf = Vec::new();
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let b = [b'*', b'$', b'\r', b'\n', b'1', b'-', b'"', b'a'][(x % 8) as usize];
                buf.push(if x.is_multiple_of(5) {
                    (x >> 8) as u8
                } else {
                    b
                });
            }
            let _ = parse_all(&buf);
        }
    }
}
