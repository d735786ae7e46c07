//! CSV: one pair per record, `key,value`, RFC 4180 quoting (a field with a
//! comma, a double quote, CR or LF is wrapped in double quotes and its
//! quotes doubled), records ended by LF, no header.
//!
//! Invariants: a pair whose key and value are both valid UTF-8 (and whose
//! key does not start with a byte order mark, which CSV readers strip) is
//! written as 2 text fields; any other pair as `base64(key),base64(value),base64`.
//! The reader takes 2 or 3 fields per record (the third: empty, `utf8`,
//! `base64` or `hex`), skips empty lines, and reports the line a record
//! starts on.

use std::io::{self, BufRead, Write};

use super::{decode_marked, Pair, PairReader, PairWriter, ReadError};
use crate::encoding::base64_encode;

/// Writes CSV.
pub struct Writer<'a> {
    out: ::csv::Writer<Box<dyn Write + 'a>>,
}

impl<'a> Writer<'a> {
    pub fn new(out: Box<dyn Write + 'a>) -> Self {
        let out = ::csv::WriterBuilder::new()
            .has_headers(false)
            .flexible(true)
            .terminator(::csv::Terminator::Any(b'\n'))
            .from_writer(out);
        Writer { out }
    }
}

fn csv_io(e: ::csv::Error) -> io::Error {
    match e.into_kind() {
        ::csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

impl PairWriter for Writer<'_> {
    fn write_pair(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        let text = std::str::from_utf8(key).is_ok_and(|k| !k.starts_with('\u{feff}'))
            && std::str::from_utf8(value).is_ok();
        let res = if text {
            self.out.write_record([key, value])
        } else {
            self.out.write_record([
                base64_encode(key).as_bytes(),
                base64_encode(value).as_bytes(),
                b"base64",
            ])
        };
        res.map_err(csv_io)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Reads CSV.
pub struct Reader<'a> {
    input: ::csv::Reader<Box<dyn BufRead + 'a>>,
    record: ::csv::ByteRecord,
}

impl<'a> Reader<'a> {
    pub fn new(input: Box<dyn BufRead + 'a>) -> Self {
        let input = ::csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(input);
        Reader {
            input,
            record: ::csv::ByteRecord::new(),
        }
    }
}

impl PairReader for Reader<'_> {
    fn next_pair(&mut self) -> Result<Option<Pair>, ReadError> {
        let more = self.input.read_byte_record(&mut self.record).map_err(|e| {
            let line = e.position().map(|p| p.line()).unwrap_or(0);
            match e.into_kind() {
                ::csv::ErrorKind::Io(e) => ReadError::Io(e),
                other => ReadError::Malformed {
                    line,
                    message: format!("{other:?}"),
                },
            }
        })?;
        if !more {
            return Ok(None);
        }
        let line = self.record.position().map(|p| p.line()).unwrap_or(0);
        let malformed = |message: String| ReadError::Malformed { line, message };
        let r = &self.record;
        let encoding = match r.len() {
            2 => None,
            3 => Some(
                std::str::from_utf8(&r[2])
                    .map_err(|_| malformed("the encoding field is not UTF-8".into()))?,
            ),
            n => {
                return Err(malformed(format!(
                    "expected 2 or 3 fields (key,value[,encoding]), found {n}"
                )))
            }
        };
        let key = decode_marked(encoding, "key", &r[0]).map_err(malformed)?;
        let value = decode_marked(encoding, "value", &r[1]).map_err(malformed)?;
        Ok(Some((key, value)))
    }

    fn line(&self) -> u64 {
        self.record.position().map(|p| p.line()).unwrap_or(0)
    }

    fn bytes_read(&self) -> u64 {
        self.input.position().byte()
    }
}
