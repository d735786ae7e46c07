//! Damage to chosen bytes of a store's files, for the corruption, check
//! and repair tests: the values' markers (`fill::mark`) in the data file
//! are found and flipped, every copy of them (the file also holds stale
//! copies that garbage collection has not reclaimed yet), and mended.
//!
//! Invariant: a marker is damaged by flipping one bit of its `A` (so
//! `<MARK` reads `<MQRK`), which keeps every length and fails the pair's
//! checksum; mending flips it back, restoring the exact bytes.

use flexspace::{FaultStorage, Storage};

use super::fill::mark;

/// The name of `storage`'s file that ends in `suffix`.
pub fn file_named(storage: &FaultStorage, suffix: &str) -> String {
    storage
        .list_files()
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix} file"))
}

/// Replaces every copy of `from` in file `name` with `to` (same length);
/// returns how many.
pub fn replace_in_file(storage: &FaultStorage, name: &str, from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut bytes = storage.file_bytes(name).unwrap();
    let at: Vec<usize> = bytes
        .windows(from.len())
        .enumerate()
        .filter(|(_, w)| *w == from)
        .map(|(at, _)| at)
        .collect();
    for &a in &at {
        bytes[a..a + to.len()].copy_from_slice(to);
    }
    storage.set_file_bytes(name, bytes);
    at.len()
}

/// Marker `i` as `damage_marks` leaves it.
fn damaged_mark(i: u32) -> Vec<u8> {
    let mut m = mark(i);
    m[2] ^= 0x10;
    m
}

/// Damages every copy of the markers of key numbers `marks` in the data
/// file (each must be there).
pub fn damage_marks(storage: &FaultStorage, marks: &[u32]) {
    let data = file_named(storage, "data");
    for &i in marks {
        let n = replace_in_file(storage, &data, &mark(i), &damaged_mark(i));
        assert!(n > 0, "the marker of key {i} is in the data file");
    }
}

/// Puts back every marker of key numbers `marks` that `damage_marks`
/// damaged (as a repair from a copy would).
pub fn mend_marks(storage: &FaultStorage, marks: &[u32]) {
    let data = file_named(storage, "data");
    for &i in marks {
        let n = replace_in_file(storage, &data, &damaged_mark(i), &mark(i));
        assert!(n > 0, "the damaged marker of key {i} is in the data file");
    }
}
