//! Bytes written to the storage device, for write amplification.
//!
//! Invariant: `DeviceCounter::bytes_written` is monotonic. It reads the
//! block device's counters in `/sys/dev/block/MAJ:MIN/stat` (sectors written,
//! field 7, including file-system metadata and journal writes); where those
//! are not readable it falls back to this process's `write_bytes` in
//! `/proc/self/io`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where write counts come from.
pub struct DeviceCounter {
    stat: Option<PathBuf>,
}

fn major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)
}

fn minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0xff)
}

impl DeviceCounter {
    /// The counter for the device holding `dir`.
    pub fn for_dir(dir: &Path) -> DeviceCounter {
        let stat = std::fs::metadata(dir).ok().and_then(|m| {
            let dev = m.dev();
            let p = PathBuf::from(format!("/sys/dev/block/{}:{}/stat", major(dev), minor(dev)));
            std::fs::read_to_string(&p).ok().map(|_| p)
        });
        DeviceCounter { stat }
    }

    /// What the counter measures, for reports.
    pub fn source(&self) -> String {
        match &self.stat {
            Some(p) => p.display().to_string(),
            None => "/proc/self/io".into(),
        }
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        if let Some(p) = &self.stat {
            if let Some(sectors) = std::fs::read_to_string(p).ok().and_then(|s| {
                s.split_whitespace()
                    .nth(6)
                    .and_then(|v| v.parse::<u64>().ok())
            }) {
                return sectors * 512;
            }
        }
        process_bytes_written()
    }
}

/// Bytes this process caused to be written to storage (`write_bytes` of
/// `/proc/self/io`: its own data, not file-system metadata or journal, and
/// not other processes' writes to the same device).
pub fn process_bytes_written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Parses sizes like `4096`, `64K`, `4M`, `1G` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix in '{s}'")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: '{s}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("4m"), Ok(4 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999T").is_err());
    }

    #[test]
    fn counter_is_monotonic() {
        let c = DeviceCounter::for_dir(Path::new("."));
        let a = c.bytes_written();
        let b = c.bytes_written();
        assert!(b >= a);
    }
}
