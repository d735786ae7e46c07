//! The log's on-disk format (docs/FORMAT.md): the header with its
//! durable-length slot and first sequence number, and the record encoding
//! of versions 1 and 2 (this build reads them; `record3` has version 3's).
//!
//! Invariants: every field that replay trusts carries its own CRC32C (the
//! slot, the first sequence number, each record's header and payload); a
//! header's first `V1_HEADER_LEN` bytes tell its version and so its length;
//! an all-zero version-2 record header never verifies (its CRC is not 0).

pub(super) const MAGIC: &[u8; 8] = b"FLEXWAL1";
/// The version new logs are written in; replay also reads versions 1 to 4.
/// Version 5 records are version 4's; their payloads may hold puts with
/// deadlines (`batch`), which builds before it cannot read.
pub(super) const FORMAT_VERSION: u32 = 5;
/// Bytes of a version-2 to 5 header (the logs this build writes).
pub const HEADER_LEN: u64 = 48;
/// Bytes of a version-1 header (no first sequence number).
pub(super) const V1_HEADER_LEN: u64 = 32;
/// Where a version-2 header holds the first sequence number, and its CRC.
pub(super) const FIRST_AT: usize = 32;
/// Where a version-4 header holds how many generations back the log it
/// follows is (covered by the first sequence number's CRC).
pub(super) const BACK_AT: usize = 44;
/// Where the durable-length slot lies in the header.
pub(super) const SLOT_AT: u64 = 16;
/// Bytes of a version-1 or version-2 record's head.
pub(super) const RECORD_HEAD: usize = 24;
/// Buffered bytes that make an append hand the buffer to the file.
pub(super) const FLUSH_BYTES: usize = 64 << 10;
/// The largest payload of one record.
pub const MAX_RECORD: usize = (1 << 31) - 1;

/// The durable-length slot for `len`: the length and its CRC.
pub(super) fn slot(len: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c(&b[..8]);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
    b
}

/// A log's header: magic, version, the durable-length slot and (versions 2
/// to 4) the lowest sequence number any record of the log may carry with
/// its CRC. `first` lets a log reuse a file that still holds an older log's
/// records (`log_files::new_wal`): theirs are all below it, so replay never
/// takes one for a record of this log. Version 4 adds `back`: the log
/// follows the log `back` generations before its own (0: not recorded).
#[cfg(test)]
pub(super) fn header(first: u64) -> [u8; HEADER_LEN as usize] {
    header_of_version(FORMAT_VERSION, first, 0)
}

/// A header of `version` (2 to 4: the same layout; `back` only in 4).
pub(super) fn header_of_version(version: u32, first: u64, back: u32) -> [u8; HEADER_LEN as usize] {
    let mut b = [0u8; HEADER_LEN as usize];
    b[..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&version.to_le_bytes());
    b[SLOT_AT as usize..SLOT_AT as usize + 16].copy_from_slice(&slot(HEADER_LEN));
    b[FIRST_AT..FIRST_AT + 8].copy_from_slice(&first.to_le_bytes());
    if version >= 4 {
        b[BACK_AT..BACK_AT + 4].copy_from_slice(&back.to_le_bytes());
    }
    let crc = first_crc(&b, version);
    b[FIRST_AT + 8..FIRST_AT + 12].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The CRC32C of the header's first sequence number and, in version 4,
/// of the `back` field after it.
fn first_crc(b: &[u8], version: u32) -> u32 {
    let crc = crc32c::crc32c(&b[FIRST_AT..FIRST_AT + 8]);
    if version >= 4 {
        crc32c::crc32c_append(crc, &b[BACK_AT..BACK_AT + 4])
    } else {
        crc
    }
}

/// What replay needs from a header.
pub(super) struct Header {
    /// Where the records start.
    pub(super) len: u64,
    /// Every record's sequence number is above this (version 2 logs whose
    /// first sequence number is above 0).
    pub(super) floor: Option<u64>,
    /// The durable-length slot's length (0 when it does not verify).
    pub(super) durable: u64,
    /// The format version (1, 2 or 3).
    pub(super) version: u32,
    /// The header's first sequence number (0 in version 1).
    pub(super) first: u64,
    /// How many generations back the log this one follows is (version 4;
    /// 0 when not recorded).
    pub(super) back: u32,
}

/// The first `V1_HEADER_LEN` bytes of a file tell its version and so its
/// header's length; `b` holds at least that many.
pub(super) fn header_len(b: &[u8]) -> Result<u64, String> {
    if &b[..8] != MAGIC {
        return Err("not a FlexDB write-ahead log".into());
    }
    match u32_at(b, 8) {
        1 => Ok(V1_HEADER_LEN),
        2..=5 => Ok(HEADER_LEN),
        v => Err(format!(
            "unknown log format version {v} (a newer build's? this build reads versions 1 to {FORMAT_VERSION})"
        )),
    }
}

/// Parses a whole header (`b` holds `header_len(b)` bytes at least).
pub(super) fn parse_header(b: &[u8]) -> Result<Header, String> {
    let len = header_len(b)?;
    let durable = parse_slot(&b[SLOT_AT as usize..]);
    let version = u32_at(b, 8);
    if len == V1_HEADER_LEN {
        return Ok(Header {
            len,
            floor: None,
            durable,
            version,
            first: 0,
            back: 0,
        });
    }
    let first = u64_at(b, FIRST_AT);
    if u32_at(b, FIRST_AT + 8) != first_crc(b, version) {
        return Err("its header's first sequence number is damaged".into());
    }
    Ok(Header {
        len,
        floor: first.checked_sub(1),
        durable,
        version,
        first,
        back: if version >= 4 { u32_at(b, BACK_AT) } else { 0 },
    })
}

/// The length in a durable-length slot, 0 when it does not verify.
pub(super) fn parse_slot(b: &[u8]) -> u64 {
    if b.len() < 12 || u32_at(b, 8) != crc32c::crc32c(&b[..8]) {
        return 0;
    }
    u64_at(b, 0)
}

/// Appends a version-2 record (the tests write version-2 logs).
pub(super) fn encode_record(out: &mut Vec<u8>, seq: u64, synced: u64, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&synced.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
