//! Loading a tree file from damaged or arbitrary bytes, formats 1 and 2.
//!
//! What each property proves:
//! - `arbitrary_bytes`: any bytes (with or without a valid header slot in
//!   front) load as `Corrupt` or `NewerFormat`, or as a tree that passes
//!   every invariant; never a panic, never an allocation beyond the file.
//! - `damaged_valid_files`: bit flips, truncations and splices of a real
//!   file are caught by the checksums: the load gives `Corrupt` or one of
//!   the versions written, never another tree.
//! - `resealed_pages`: bytes changed inside a page whose checksum is then
//!   recomputed reach the structural checks; the load gives `Corrupt` or a
//!   tree that passes every invariant, takes mutations, checkpoints into
//!   the same file and loads back equal.
//!
//! Cases: `PROPTEST_CASES` (proptest's default otherwise); each case is one
//! load of a file of a few pages.

use std::sync::OnceLock;

use flextree::{Error, Extent, FlexTree, MemFile, MAX_ADDR};
use proptest::prelude::*;
use proptest::sample::Index;

const PAGE: usize = 2048;
const HOLE: u64 = (1 << 48) - 1;

fn snapshot(t: &FlexTree) -> Vec<Extent> {
    t.extents_from(0).unwrap().collect()
}

/// Seals a header slot (checksum at its end) or a node page (at its start).
fn seal(file: &mut [u8], page: usize) {
    let p = &mut file[page * PAGE..(page + 1) * PAGE];
    if page < 2 {
        let crc = crc32c::crc32c(&p[..PAGE - 4]);
        p[PAGE - 4..].copy_from_slice(&crc.to_le_bytes());
    } else {
        let crc = crc32c::crc32c(&p[4..]);
        p[..4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A header slot as docs/FORMAT.md lays it out (unsealed).
#[allow(clippy::too_many_arguments)]
fn header(
    format: u32,
    version: u64,
    root: u32,
    height: u32,
    total: u64,
    extents: u64,
    pages: u32,
    meta: &[u8],
) -> Vec<u8> {
    let mut b = vec![0u8; PAGE];
    b[0..8].copy_from_slice(b"FLEXTREE");
    b[8..12].copy_from_slice(&format.to_le_bytes());
    b[12..16].copy_from_slice(&(PAGE as u32).to_le_bytes());
    b[16..24].copy_from_slice(&version.to_le_bytes());
    b[24..28].copy_from_slice(&root.to_le_bytes());
    b[28..32].copy_from_slice(&height.to_le_bytes());
    b[32..40].copy_from_slice(&total.to_le_bytes());
    b[40..48].copy_from_slice(&extents.to_le_bytes());
    b[48..52].copy_from_slice(&pages.to_le_bytes());
    b[52..56].copy_from_slice(&(meta.len() as u32).to_le_bytes());
    b[56..56 + meta.len()].copy_from_slice(meta);
    b
}

/// A format-1 file of `extents` (one leaf of up to 64 entries per page,
/// one internal root above them when there are several), written from
/// docs/FORMAT.md: this build only reads format 1.
fn format1_file(extents: &[Extent]) -> Vec<u8> {
    format1_file_with(extents, false)
}

/// [`format1_file`], with an internal root above a single leaf when
/// `lone_child` is set (no writer makes one).
fn format1_file_with(extents: &[Extent], lone_child: bool) -> Vec<u8> {
    let leaves: Vec<&[Extent]> = extents.chunks(64).collect();
    assert!(!leaves.is_empty() && leaves.len() <= 128);
    let height = u32::from(leaves.len() > 1 || lone_child);
    let mut file = vec![0u8; 2 * PAGE];
    let mut children = Vec::new();
    for leaf in &leaves {
        let page = file.len() / PAGE;
        let mut p = vec![0u8; PAGE];
        p[4] = 1;
        p[6..8].copy_from_slice(&(leaf.len() as u16).to_le_bytes());
        p[8..16].copy_from_slice(&1u64.to_le_bytes());
        for (i, e) in leaf.iter().enumerate() {
            let word = e.addr.unwrap_or(HOLE) | (u64::from(e.tag) << 48);
            p[16 + 16 * i..24 + 16 * i].copy_from_slice(&e.len.to_le_bytes());
            p[24 + 16 * i..32 + 16 * i].copy_from_slice(&word.to_le_bytes());
        }
        file.extend_from_slice(&p);
        seal(&mut file, page);
        children.push((leaf[0].offset, page as u32));
    }
    let root = if height == 0 {
        children[0].1
    } else {
        let page = file.len() / PAGE;
        let mut p = vec![0u8; PAGE];
        p[4] = 2;
        p[6..8].copy_from_slice(&(children.len() as u16).to_le_bytes());
        p[8..16].copy_from_slice(&1u64.to_le_bytes());
        for (i, &(shift, child)) in children.iter().enumerate() {
            p[16 + 12 * i..24 + 12 * i].copy_from_slice(&shift.to_le_bytes());
            p[24 + 12 * i..28 + 12 * i].copy_from_slice(&child.to_le_bytes());
        }
        file.extend_from_slice(&p);
        seal(&mut file, page);
        page as u32
    };
    let total: u64 = extents.iter().map(|e| e.len).sum();
    let pages = (file.len() / PAGE) as u32;
    let h = header(
        1,
        1,
        root,
        height,
        total,
        extents.len() as u64,
        pages,
        b"m1",
    );
    file[..PAGE].copy_from_slice(&h);
    seal(&mut file, 0);
    file
}

/// A tree of `n` extents: mapped, holes and tags, some contiguous.
fn sample_tree(n: u64, salt: u64) -> FlexTree {
    let mut t = FlexTree::new();
    for i in 0..n {
        let len = 1 + (i * 7 + salt) % 300;
        if i % 11 == 5 {
            t.insert_hole(t.len(), len).unwrap();
        } else {
            let at = if i % 3 == 0 { 0 } else { t.len() };
            t.insert(at, len, (i * 4096 + salt) % (1 << 40)).unwrap();
        }
        if i % 5 == 0 {
            t.set_tag(t.len() - 1, (i % 1000) as u16 + 1).unwrap();
        }
    }
    t
}

/// Real files: format 2 with two versions, and format 1.
struct Bases {
    v2: Vec<u8>,
    v2_states: Vec<Vec<Extent>>,
    v1: Vec<u8>,
    v1_state: Vec<Extent>,
}

fn bases() -> &'static Bases {
    static B: OnceLock<Bases> = OnceLock::new();
    B.get_or_init(|| {
        let file = MemFile::new();
        let mut t = sample_tree(900, 1);
        t.checkpoint(&file, b"a").unwrap();
        let a = snapshot(&t);
        for i in 0..200u64 {
            t.insert((i * 977) % t.len(), 13, i * 64).unwrap();
        }
        t.collapse(100, 5000).unwrap();
        t.checkpoint(&file, b"b").unwrap();
        let b = snapshot(&t);
        let small = snapshot(&sample_tree(400, 3));
        Bases {
            v2: file.to_bytes(),
            v2_states: vec![a, b],
            v1: format1_file(&small),
            v1_state: small,
        }
    })
}

/// Loads `bytes`: `Ok(Some(tree))`, `Ok(None)` for a typed refusal.
fn load(bytes: Vec<u8>) -> Option<FlexTree> {
    match FlexTree::load(&MemFile::from_bytes(bytes)) {
        Ok((t, _)) => Some(t),
        Err(Error::Corrupt(_) | Error::NewerFormat { .. }) => None,
        Err(e) => panic!("a load of bytes in memory gave {e}"),
    }
}

/// A loaded tree must be a valid one: invariants, a walk, mutations, a
/// checkpoint into its own file and a load that gives it back.
fn exercise(t: FlexTree, file: Vec<u8>) {
    t.check_invariants();
    let extents = snapshot(&t);
    assert_eq!(extents.iter().map(|e| e.len).sum::<u64>(), t.len());
    let mut t = t;
    t.insert(0, 10, 5).unwrap();
    if t.len() > 20 {
        t.collapse(t.len() / 2, 7).unwrap();
    }
    t.check_invariants();
    let file = MemFile::from_bytes(file);
    t.checkpoint(&file, b"again").unwrap();
    let (back, cp) = FlexTree::load(&file).unwrap();
    back.check_invariants();
    assert_eq!(snapshot(&back), snapshot(&t));
    assert_eq!(cp.meta, b"again");
}

/// One change to a valid file.
#[derive(Clone, Debug)]
enum Damage {
    Flip(Index, u8),
    Truncate(Index),
    /// Copies `len` bytes from one place of the file to another.
    Splice(Index, Index, u16),
    /// Zeroes one page.
    ZeroPage(Index),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<Index>(), 0..8u8).prop_map(|(i, b)| Damage::Flip(i, b)),
        1 => any::<Index>().prop_map(Damage::Truncate),
        2 => (any::<Index>(), any::<Index>(), 1..600u16).prop_map(|(a, b, n)| Damage::Splice(a, b, n)),
        1 => any::<Index>().prop_map(Damage::ZeroPage),
    ]
}

fn apply(file: &mut Vec<u8>, d: &Damage) {
    if file.is_empty() {
        return;
    }
    match d {
        Damage::Flip(i, b) => {
            let at = i.index(file.len());
            file[at] ^= 1 << b;
        }
        Damage::Truncate(i) => file.truncate(i.index(file.len())),
        Damage::Splice(from, to, n) => {
            let from = from.index(file.len());
            let to = to.index(file.len());
            let n = usize::from(*n).min(file.len() - from).min(file.len() - to);
            let src = file[from..from + n].to_vec();
            file[to..to + n].copy_from_slice(&src);
        }
        Damage::ZeroPage(i) => {
            let pages = file.len() / PAGE;
            if pages > 0 {
                let p = i.index(pages);
                file[p * PAGE..(p + 1) * PAGE].fill(0);
            }
        }
    }
}

/// Bytes written into one page, which is then sealed again.
#[derive(Clone, Debug)]
struct Reseal {
    page: Index,
    /// (offset in the page, bytes) pairs.
    edits: Vec<(Index, Vec<u8>)>,
}

fn reseal() -> impl Strategy<Value = Reseal> {
    let edit = (
        any::<Index>(),
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 1..4),
            // Small integers where counts, kinds and lengths live.
            (0u8..4).prop_map(|b| vec![b]),
            Just(vec![0xff; 8]),
        ],
    );
    (any::<Index>(), proptest::collection::vec(edit, 1..4))
        .prop_map(|(page, edits)| Reseal { page, edits })
}

fn apply_reseal(file: &mut [u8], r: &Reseal) {
    let pages = file.len() / PAGE;
    let page = r.page.index(pages);
    for (at, bytes) in &r.edits {
        let at = page * PAGE + at.index(PAGE - bytes.len());
        file[at..at + bytes.len()].copy_from_slice(bytes);
    }
    seal(file, page);
}

proptest! {
    #[test]
    fn arbitrary_bytes(
        with_header in any::<bool>(),
        format in 0u32..4,
        root in 0u32..200,
        height in 0u32..4,
        total in prop_oneof![0..100_000u64, any::<u64>()],
        extents in prop_oneof![0..2000u64, any::<u64>()],
        pages in 0u32..8,
        page_kinds in proptest::collection::vec((0u8..5, 0u16..140), 0..6),
        noise in proptest::collection::vec(any::<u8>(), 0..3 * PAGE),
    ) {
        let mut file = noise;
        if with_header {
            // A sealed header, then pages of random bytes whose kind and
            // count fields are plausible and whose checksums verify.
            let mut f = header(format, 1, root, height, total, extents, pages, b"");
            f.resize(2 * PAGE, 0);
            seal(&mut f, 0);
            for (i, (kind, count)) in page_kinds.iter().enumerate() {
                let mut p = vec![0u8; PAGE];
                let n = file.len().min(PAGE - 16);
                p[16..16 + n].copy_from_slice(&file[..n]);
                p[4] = *kind;
                p[6..8].copy_from_slice(&count.to_le_bytes());
                f.extend_from_slice(&p);
                seal(&mut f, 2 + i);
            }
            file = f;
        }
        if let Some(t) = load(file.clone()) {
            exercise(t, file);
        }
    }

    #[test]
    fn damaged_valid_files(v1 in any::<bool>(), damages in proptest::collection::vec(damage(), 1..4)) {
        let b = bases();
        let (mut file, states) = if v1 {
            (b.v1.clone(), vec![b.v1_state.clone()])
        } else {
            (b.v2.clone(), b.v2_states.clone())
        };
        for d in &damages {
            apply(&mut file, d);
        }
        if let Some(t) = load(file) {
            let got = snapshot(&t);
            prop_assert!(states.contains(&got), "a damaged file loaded as a tree never written");
            t.check_invariants();
        }
    }

    #[test]
    fn resealed_pages(v1 in any::<bool>(), edits in proptest::collection::vec(reseal(), 1..3)) {
        let b = bases();
        let mut file = if v1 { b.v1.clone() } else { b.v2.clone() };
        for r in &edits {
            apply_reseal(&mut file, r);
        }
        if let Some(t) = load(file.clone()) {
            exercise(t, file);
        }
    }
}

#[test]
fn the_format1_writer_of_these_tests_matches_the_loader() {
    let b = bases();
    let (t, cp) = FlexTree::load(&MemFile::from_bytes(b.v1.clone())).unwrap();
    assert_eq!(snapshot(&t), b.v1_state);
    assert_eq!(cp.meta, b"m1");
    assert!(t.height() >= 1);
    exercise(t, b.v1.clone());
    let (t, _) = FlexTree::load(&MemFile::from_bytes(b.v2.clone())).unwrap();
    assert_eq!(&snapshot(&t), b.v2_states.last().unwrap());
    assert!(t.height() >= 1);
    const { assert!(MAX_ADDR < HOLE) };
}

/// Regression (found by `resealed_pages`): a sealed header whose version
/// is `u64::MAX` loaded; the next checkpoint's version wrapped to 0, so
/// the other slot's older header won the next load, whose pages had been
/// reused. Such a header is now `Corrupt`.
#[test]
fn a_header_version_that_would_wrap_is_corrupt() {
    let b = bases();
    for version in [u64::MAX, (1 << 63) + 1] {
        let mut file = b.v2.clone();
        // Version 2 is in slot 0.
        file[16..24].copy_from_slice(&version.to_le_bytes());
        seal(&mut file, 0);
        match FlexTree::load(&MemFile::from_bytes(file)) {
            Err(Error::Corrupt(m)) => assert!(m.contains("version"), "{m}"),
            other => panic!("version {version}: {:?}", other.map(|_| ())),
        }
    }
}

/// Regression: a root with a single child (a file no writer makes, but
/// whose every page verifies) loaded as a tree that breaks the node normal
/// form (`check_invariants` failed on it). It is now `Corrupt`.
#[test]
fn a_root_with_one_child_is_corrupt() {
    let extents = snapshot(&sample_tree(30, 9));
    match FlexTree::load(&MemFile::from_bytes(format1_file_with(&extents, true))) {
        Err(Error::Corrupt(m)) => assert!(m.contains("one child"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}
