//! Line splitting shared by the JSON Lines and TSV readers.
//!
//! Invariants: a line is the bytes up to (not including) `\n`, with one
//! trailing `\r` removed; the last line needs no `\n`; `line()` is the
//! 1-based number of the line last returned and `bytes()` counts every byte
//! consumed, terminators included.

use std::io::{self, BufRead};

/// Reads an input line by line, counting lines and bytes.
pub struct Lines<'a> {
    input: Box<dyn BufRead + 'a>,
    buf: Vec<u8>,
    line: u64,
    bytes: u64,
}

impl<'a> Lines<'a> {
    /// Lines of `input`.
    pub fn new(input: Box<dyn BufRead + 'a>) -> Self {
        Lines {
            input,
            buf: Vec::new(),
            line: 0,
            bytes: 0,
        }
    }

    /// The next line and its number, or `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        let n = self.input.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.bytes += n as u64;
        self.line += 1;
        let mut line = &self.buf[..];
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        Ok(Some((self.line, line)))
    }

    /// The number of the line last returned.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}
