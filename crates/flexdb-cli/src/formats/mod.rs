//! The file formats of `load` and `dump`: JSON Lines, CSV and TSV.
//!
//! Invariants: for every format, reading what a writer wrote yields the
//! same pairs in the same order, for any bytes (binary, empty, unicode,
//! separators, quotes, newlines); a reader never panics, and reports a
//! malformed record with the number of the line it starts on (1-based).
//! The byte-for-byte formats are documented in docs/CLI.md.

mod csv;
mod jsonl;
mod lines;
mod tsv;

use std::fmt;
use std::io::{self, BufRead, Write};

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// The format of a `load` or `dump` file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line: {"key":"..","value":".."} (binary data
    /// in base64, marked "encoding":"base64").
    #[default]
    Jsonl,
    /// key,value rows (RFC 4180 quoting); binary rows are base64 with a
    /// third field `base64`.
    Csv,
    /// key<TAB>value lines with backslash escapes (\\ \t \n \r \xHH).
    Tsv,
}

/// Why a record could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Reading the input failed.
    Io(io::Error),
    /// The record starting on `line` is malformed.
    Malformed {
        /// The 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Malformed { line, message } => write!(f, "line {line}: {message}"),
        }
    }
}

/// Reads pairs from an input.
pub trait PairReader {
    /// The next pair, or `None` at the end of the input.
    fn next_pair(&mut self) -> Result<Option<Pair>, ReadError>;
    /// Bytes of input consumed so far.
    fn bytes_read(&self) -> u64;
    /// The line the pair last returned starts on (1-based).
    fn line(&self) -> u64;
}

/// Writes pairs to an output.
pub trait PairWriter {
    /// Writes one pair.
    fn write_pair(&mut self, key: &[u8], value: &[u8]) -> io::Result<()>;
    /// Flushes everything written.
    fn finish(&mut self) -> io::Result<()>;
}

/// A reader of `format` over `input`.
pub fn reader<'a>(format: Format, input: Box<dyn BufRead + 'a>) -> Box<dyn PairReader + 'a> {
    match format {
        Format::Jsonl => Box::new(jsonl::Reader::new(input)),
        Format::Csv => Box::new(csv::Reader::new(input)),
        Format::Tsv => Box::new(tsv::Reader::new(input)),
    }
}

/// A writer of `format` over `output`.
pub fn writer<'a>(format: Format, output: Box<dyn Write + 'a>) -> Box<dyn PairWriter + 'a> {
    match format {
        Format::Jsonl => Box::new(jsonl::Writer::new(output)),
        Format::Csv => Box::new(csv::Writer::new(output)),
        Format::Tsv => Box::new(tsv::Writer::new(output)),
    }
}

/// Decodes a field according to a record's `encoding` marker (`None`, or
/// one of `utf8`, `text`, `base64`, `hex`).
fn decode_marked(encoding: Option<&str>, what: &str, field: &[u8]) -> Result<Vec<u8>, String> {
    let text = || {
        std::str::from_utf8(field).map_err(|_| format!("{what}: {encoding:?} data is not ASCII"))
    };
    match encoding {
        None | Some("") | Some("utf8") | Some("utf-8") | Some("text") => Ok(field.to_vec()),
        Some("base64") => crate::encoding::base64_decode(text()?)
            .map_err(|e| format!("{what}: invalid base64: {e}")),
        Some("hex") => {
            crate::encoding::hex_decode(text()?).map_err(|e| format!("{what}: invalid hex: {e}"))
        }
        Some(other) => Err(format!(
            "unknown encoding {other:?} (expected base64, hex or utf8)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Format; 3] = [Format::Jsonl, Format::Csv, Format::Tsv];

    fn write_all(format: Format, pairs: &[Pair]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = writer(format, Box::new(&mut out));
            for (k, v) in pairs {
                w.write_pair(k, v).unwrap();
            }
            w.finish().unwrap();
        }
        out
    }

    pub(super) fn read_all(format: Format, data: &[u8]) -> Result<Vec<Pair>, ReadError> {
        let mut r = reader(format, Box::new(data));
        let mut pairs = Vec::new();
        while let Some(p) = r.next_pair()? {
            pairs.push(p);
        }
        assert_eq!(r.bytes_read(), data.len() as u64, "all input counted");
        Ok(pairs)
    }

    fn tricky() -> Vec<Pair> {
        let texts: [&[u8]; 14] = [
            b"",
            b"plain",
            b"with space",
            b"comma,inside",
            b"tab\tinside",
            b"quote\"inside'",
            b"new\nline",
            b"cr\rlf\r\n",
            b"back\\slash\\n",
            "unicode: naïve 日本 🦀".as_bytes(),
            b"\x00\x01\x7f",
            b"\xff\xfe binary",
            "\u{feff}bom first".as_bytes(),
            b"{\"key\":\"x\"}",
        ];
        let mut pairs = Vec::new();
        for (i, k) in texts.iter().enumerate() {
            for (j, v) in texts.iter().enumerate() {
                if (i + j) % 3 == 0 || i == j {
                    pairs.push((k.to_vec(), v.to_vec()));
                }
            }
        }
        pairs
    }

    #[test]
    fn tricky_data_round_trips_in_every_format() {
        let pairs = tricky();
        for f in ALL {
            let data = write_all(f, &pairs);
            assert_eq!(read_all(f, &data).unwrap(), pairs, "{f:?}");
        }
    }

    #[test]
    fn text_is_written_as_documented() {
        let pairs: Vec<Pair> = vec![
            (b"hello".to_vec(), b"world".to_vec()),
            (b"a,b".to_vec(), b"say \"hi\"\n".to_vec()),
            (b"t\tab".to_vec(), "é".as_bytes().to_vec()),
            (b"\xff".to_vec(), b"".to_vec()),
        ];
        assert_eq!(
            String::from_utf8(write_all(Format::Jsonl, &pairs)).unwrap(),
            "{\"key\":\"hello\",\"value\":\"world\"}\n\
             {\"key\":\"a,b\",\"value\":\"say \\\"hi\\\"\\n\"}\n\
             {\"key\":\"t\\tab\",\"value\":\"é\"}\n\
             {\"key\":\"/w==\",\"value\":\"\",\"encoding\":\"base64\"}\n"
        );
        assert_eq!(
            String::from_utf8(write_all(Format::Csv, &pairs)).unwrap(),
            "hello,world\n\
             \"a,b\",\"say \"\"hi\"\"\n\"\n\
             t\tab,é\n\
             /w==,,base64\n"
        );
        assert_eq!(
            String::from_utf8(write_all(Format::Tsv, &pairs)).unwrap(),
            "hello\tworld\n\
             a,b\tsay \"hi\"\\n\n\
             t\\tab\té\n\
             \\xff\t\n"
        );
    }

    #[test]
    fn blank_lines_and_crlf_are_accepted() {
        let jsonl = b"\n{\"key\":\"a\",\"value\":\"1\"}\r\n  \n{\"value\":\"2\",\"key\":\"b\"}";
        let want = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
        ];
        assert_eq!(read_all(Format::Jsonl, jsonl).unwrap(), want);
        assert_eq!(read_all(Format::Csv, b"a,1\r\n\r\nb,2").unwrap(), want);
        assert_eq!(read_all(Format::Tsv, b"a\t1\r\n\nb\t2").unwrap(), want);
        for f in ALL {
            assert_eq!(read_all(f, b"").unwrap(), vec![]);
        }
    }

    #[test]
    fn other_encodings_are_read() {
        let want = vec![(b"\x01\x02".to_vec(), b"hi".to_vec())];
        let jsonl = br#"{"key":"0102","value":"6869","encoding":"hex"}"#;
        assert_eq!(read_all(Format::Jsonl, jsonl).unwrap(), want);
        let jsonl = br#"{"key":"AQI","value":"aGk","encoding":"base64"}"#;
        assert_eq!(read_all(Format::Jsonl, jsonl).unwrap(), want);
        assert_eq!(read_all(Format::Csv, b"0102,6869,hex\n").unwrap(), want);
        let text = vec![(b"k".to_vec(), b"v".to_vec())];
        assert_eq!(read_all(Format::Csv, b"k,v,\n").unwrap(), text);
        assert_eq!(read_all(Format::Csv, b"k,v,utf8\n").unwrap(), text);
        let jsonl = br#"{"key":"k","value":"v","encoding":"utf8"}"#;
        assert_eq!(read_all(Format::Jsonl, jsonl).unwrap(), text);
    }

    fn malformed(format: Format, data: &[u8]) -> (u64, String) {
        match read_all(format, data) {
            Err(ReadError::Malformed { line, message }) => (line, message),
            other => panic!(
                "{format:?} {:?}: expected malformed, got {other:?}",
                String::from_utf8_lossy(data)
            ),
        }
    }

    #[test]
    fn malformed_records_name_their_line() {
        let good = "{\"key\":\"a\",\"value\":\"1\"}\n";
        let cases: &[(Format, String, u64, &str)] = &[
            (
                Format::Jsonl,
                format!("{good}{good}not json\n"),
                3,
                "invalid JSON",
            ),
            (
                Format::Jsonl,
                format!("{good}{{\"key\":\"a\"}}\n"),
                2,
                "missing field `value`",
            ),
            (
                Format::Jsonl,
                format!("{good}\n{{\"key\":\"a\",\"val\":\"1\"}}\n"),
                3,
                "unknown field `val`",
            ),
            (
                Format::Jsonl,
                "{\"key\":1,\"value\":\"1\"}".into(),
                1,
                "invalid type",
            ),
            (
                Format::Jsonl,
                "{\"key\":\"a\",\"value\":\"1\",\"encoding\":\"rot13\"}".into(),
                1,
                "unknown encoding",
            ),
            (
                Format::Jsonl,
                "{\"key\":\"!!\",\"value\":\"\",\"encoding\":\"base64\"}".into(),
                1,
                "key: invalid base64",
            ),
            (
                Format::Jsonl,
                "{\"key\":\"a\",\"value\":\"1\"} {}".into(),
                1,
                "invalid JSON",
            ),
            (Format::Csv, "a,1\nb\n".into(), 2, "expected 2 or 3 fields"),
            (Format::Csv, "a,1\nb,2,base64,x\n".into(), 2, "found 4"),
            (
                Format::Csv,
                "\"multi\nline\",1\nzz,1,hex\n".into(),
                3,
                "key: invalid hex",
            ),
            (Format::Csv, "a,1,rot13\n".into(), 1, "unknown encoding"),
            (
                Format::Tsv,
                "a\t1\nno tab here\n".into(),
                2,
                "expected 2 tab-separated fields, found 1",
            ),
            (Format::Tsv, "a\t1\tx\n".into(), 1, "found 3"),
            (Format::Tsv, "a\\q\t1\n".into(), 1, "key: unknown escape"),
            (Format::Tsv, "a\t1\\\n".into(), 1, "value: lone backslash"),
        ];
        for (format, data, line, needle) in cases {
            let (l, m) = malformed(*format, data.as_bytes());
            assert_eq!(l, *line, "{format:?} {data:?}: {m}");
            assert!(
                m.contains(needle),
                "{format:?} {data:?}: {m:?} lacks {needle:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_pairs_round_trip(pairs in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..12)), 0..12),
            texts in proptest::collection::vec(("\\PC{0,8}", "[\\t\\n\\r,\"' \\\\a\u{feff}]{0,8}"), 0..8)) {
            let mut all: Vec<Pair> = pairs;
            all.extend(texts.into_iter().map(|(k, v)| (k.into_bytes(), v.into_bytes())));
            for f in ALL {
                let data = write_all(f, &all);
                prop_assert_eq!(read_all(f, &data).unwrap(), all.clone());
            }
        }

        /// Flips, cuts, splices and inserted bytes in a valid file of any
        /// format: every record read is one the damaged bytes hold (writing
        /// what was read and reading it back gives the same pairs), or a
        /// `Malformed` error names a line of the input; never a panic.
        #[test]
        fn damaged_files_read_or_name_a_line(
            pairs in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..10), "[a-z,\t\n\\\"é]{0,8}"), 1..8),
            damage in proptest::collection::vec(
                (0..4u8, any::<proptest::sample::Index>(), any::<proptest::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let pairs: Vec<Pair> = pairs.into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
            for f in ALL {
                let mut data = write_all(f, &pairs);
                for (kind, a, b, byte) in &damage {
                    if data.is_empty() {
                        break;
                    }
                    let (a, b) = (a.index(data.len()), b.index(data.len()));
                    match kind {
                        0 => data[a] ^= 1 << (byte % 8),
                        1 => data.truncate(a),
                        2 => {
                            let n = (usize::from(*byte) % 16).min(data.len() - a).min(data.len() - b);
                            let src = data[a..a + n].to_vec();
                            data[b..b + n].copy_from_slice(&src);
                        }
                        _ => data.insert(a, *byte),
                    }
                }
                let lines = data.split(|&b| b == b'\n').count() as u64;
                match read_all(f, &data) {
                    Ok(got) => prop_assert_eq!(read_all(f, &write_all(f, &got)).unwrap(), got),
                    Err(ReadError::Malformed { line, .. }) => {
                        prop_assert!((1..=lines).contains(&line), "{:?}: line {} of {}", f, line, lines);
                    }
                    Err(ReadError::Io(e)) => prop_assert!(false, "{:?}: I/O error from memory: {}", f, e),
                }
            }
        }

        #[test]
        fn readers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            for f in ALL {
                let mut r = reader(f, Box::new(&data[..]));
                for _ in 0..300 {
                    match r.next_pair() {
                        Ok(Some(_)) => {}
                        _ => break,
                    }
                }
            }
        }
    }
}
