//! TSV: one pair per line, `KEY<TAB>VALUE<LF>`, each field escaped with
//! [`crate::encoding::escape`] (`\\`, `\t`, `\n`, `\r`, and `\xHH` for other
//! control bytes and for bytes that are not valid UTF-8).
//!
//! Invariants: a written line holds exactly one raw tab and its fields are
//! valid UTF-8; the reader needs exactly one raw tab per line, removes one
//! `\r` before the `\n`, skips empty lines, and takes unescaped bytes
//! (even invalid UTF-8) verbatim.

use std::io::{self, BufRead, Write};

use super::lines::Lines;
use super::{Pair, PairReader, PairWriter, ReadError};
use crate::encoding::{escape, unescape};

/// Writes TSV.
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
        self.out.write_all(escape(key).as_bytes())?;
        self.out.write_all(b"\t")?;
        self.out.write_all(escape(value).as_bytes())?;
        self.out.write_all(b"\n")
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Reads TSV.
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

impl PairReader for Reader<'_> {
    fn next_pair(&mut self) -> Result<Option<Pair>, ReadError> {
        loop {
            let Some((number, line)) = self.lines.next_line().map_err(ReadError::Io)? else {
                return Ok(None);
            };
            if line.is_empty() {
                continue;
            }
            let malformed = |message: String| ReadError::Malformed {
                line: number,
                message,
            };
            let fields: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
            let [key, value] = fields[..] else {
                return Err(malformed(format!(
                    "expected 2 tab-separated fields, found {}",
                    fields.len()
                )));
            };
            let key = unescape(key).map_err(|e| malformed(format!("key: {e}")))?;
            let value = unescape(value).map_err(|e| malformed(format!("value: {e}")))?;
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
