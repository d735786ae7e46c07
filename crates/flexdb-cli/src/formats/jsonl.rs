//! JSON Lines: one object `{"key":K,"value":V}` per line, in that field
//! order, as serde_json writes it (no spaces; `"`, `\` and control
//! characters escaped, everything else verbatim UTF-8).
//!
//! Invariants: a pair whose key and value are both valid UTF-8 is written
//! as text; otherwise both are written in standard base64 and the object
//! gets a third field `"encoding":"base64"`. The reader also accepts
//! `"encoding"` values `utf8` and `hex`, fields in any order, blank lines
//! and a UTF-8 byte order mark before the first line; it refuses unknown
//! fields and anything after the object on its line.

use std::io::{self, BufRead, Write};

use serde::{Deserialize, Serialize};

use super::lines::Lines;
use super::{decode_marked, Pair, PairReader, PairWriter, ReadError};
use crate::encoding::base64_encode;

#[derive(Serialize)]
struct Out<'a> {
    key: &'a str,
    value: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct In {
    key: String,
    value: String,
    #[serde(default)]
    encoding: Option<String>,
}

/// Writes JSON Lines.
pub struct Writer<'a> {
    out: Box<dyn Write + 'a>,
}

impl<'a> Writer<'a> {
    pub fn new(out: Box<dyn Write + 'a>) -> Self {
        Writer { out }
    }
}

impl PairWriter for Writer<'_> {
    fn write_pair(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        let res = match (std::str::from_utf8(key), std::str::from_utf8(value)) {
            (Ok(key), Ok(value)) => serde_json::to_writer(
                &mut self.out,
                &Out {
                    key,
                    value,
                    encoding: None,
                },
            ),
            _ => serde_json::to_writer(
                &mut self.out,
                &Out {
                    key: &base64_encode(key),
                    value: &base64_encode(value),
                    encoding: Some("base64"),
                },
            ),
        };
        res.map_err(io::Error::from)?;
        self.out.write_all(b"\n")
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Reads JSON Lines.
pub struct Reader<'a> {
    lines: Lines<'a>,
}

impl<'a> Reader<'a> {
    pub fn new(input: Box<dyn BufRead + 'a>) -> Self {
        Reader {
            lines: Lines::new(input),
        }
    }
}

/// serde_json's message without its "at line 1 column N" suffix.
fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let msg = full.split(" at line ").next().unwrap_or(&full);
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("invalid JSON: {msg} (column {})", e.column())
        }
        _ => msg.to_string(),
    }
}

impl PairReader for Reader<'_> {
    fn next_pair(&mut self) -> Result<Option<Pair>, ReadError> {
        loop {
            let Some((number, mut line)) = self.lines.next_line().map_err(ReadError::Io)? else {
                return Ok(None);
            };
            if number == 1 {
                line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let malformed = |message: String| ReadError::Malformed {
                line: number,
                message,
            };
            let rec: In = serde_json::from_slice(line).map_err(|e| malformed(json_message(&e)))?;
            let enc = rec.encoding.as_deref();
            let key = decode_marked(enc, "key", rec.key.as_bytes()).map_err(malformed)?;
            let value = decode_marked(enc, "value", rec.value.as_bytes()).map_err(malformed)?;
            return Ok(Some((key, value)));
        }
    }

    fn line(&self) -> u64 {
        self.lines.line()
    }

    fn bytes_read(&self) -> u64 {
        self.lines.bytes()
    }
}
