//! Tagged inserts, tag search, user metadata and the self-check: the
//! facilities the key-value layer builds on, across reopens and crashes.

use std::sync::Arc;

use flexspace::{Fault, FaultStorage, FlexSpace, Options};

fn opts() -> Options {
    Options::new()
        .create(true)
        .commit_log_bytes(1024)
        .checkpoint_log_bytes(8 * 1024)
}

#[test]
fn tags_mark_inserted_starts_and_survive_shifts_and_reopen() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    space.insert_tagged(0, b"aaaa", 1).unwrap();
    space.insert_tagged(4, b"bbbb", 2).unwrap();
    // An untagged insert right after merges into (or follows) the previous
    // extent without a tag of its own.
    space.insert(8, b"cc").unwrap();
    space.insert_tagged(0, b"zz", 3).unwrap();
    assert_eq!(space.get_tag(0).unwrap(), 3);
    assert_eq!(space.get_tag(2).unwrap(), 1);
    assert_eq!(space.get_tag(6).unwrap(), 2);
    assert_eq!(space.get_tag(10).unwrap(), 0);
    assert_eq!(space.next_tagged(1, 100).unwrap(), Some((2, 1)));
    assert_eq!(space.next_tagged(3, 100).unwrap(), Some((6, 2)));
    assert_eq!(space.next_tagged(7, 100).unwrap(), None);
    assert_eq!(space.next_tagged(3, 6).unwrap(), None);
    // A collapse of the tagged extent's head leaves an untagged tail.
    space.collapse(6, 1).unwrap();
    assert_eq!(space.get_tag(6).unwrap(), 0);
    space.update_tagged(2, b"AAAAA", 4, 9).unwrap();
    assert_eq!(space.get_tag(2).unwrap(), 9);
    let mut buf = vec![0u8; space.len() as usize];
    space.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"zzAAAAAbbbcc");
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    assert_eq!(space.get_tag(0).unwrap(), 3);
    assert_eq!(space.get_tag(2).unwrap(), 9);
    assert_eq!(space.next_tagged(3, 100).unwrap(), None);
    assert!(space.check().unwrap().is_empty());
}

#[test]
fn large_tagged_insert_tags_only_its_first_extent() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    let data = vec![7u8; 3 * flexspace::MAX_EXTENT as usize + 100];
    space.insert_tagged(0, &data, 5).unwrap();
    assert_eq!(space.get_tag(0).unwrap(), 5);
    assert_eq!(space.next_tagged(1, space.len()).unwrap(), None);
    let mut b = vec![0u8; 16];
    let (n, extents) = space.read_counted(0, &mut b).unwrap();
    assert_eq!((n, extents), (16, 1));
    let mut all = vec![0u8; data.len()];
    let (n, extents) = space.read_counted(0, &mut all).unwrap();
    assert_eq!(n, data.len());
    assert!(extents >= 1);
    assert_eq!(all, data);
}

#[test]
fn extents_in_counts_what_a_read_of_the_range_would() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    space.insert_tagged(0, &[1u8; 400], 1).unwrap();
    // Rewrites in the middle split the extent; a rewrite of the same bytes
    // again replaces their extent and adds none.
    space.update_tagged(100, &[2u8; 50], 50, 1).unwrap();
    space.update_tagged(300, &[3u8; 20], 20, 1).unwrap();
    space.update_tagged(100, &[4u8; 50], 50, 1).unwrap();
    let len = space.len();
    for (at, n) in [
        (0, len),
        (0, 100),
        (0, 101),
        (99, 2),
        (150, 150),
        (320, 80),
        (len, 0),
    ] {
        let mut buf = vec![0u8; n as usize];
        let (_, read) = space.read_counted(at, &mut buf).unwrap();
        assert_eq!(space.extents_in(at, n).unwrap(), read, "{n} bytes at {at}");
    }
    assert_eq!(space.extents_in(0, len).unwrap(), 5);
    // Past the end: fewer bytes, or out of range.
    assert_eq!(space.extents_in(320, 1000).unwrap(), 1);
    assert!(space.extents_in(len + 1, 1).is_err());
}

#[test]
fn user_meta_is_committed_with_the_operations_before_it() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    assert_eq!(space.user_meta(), [0; 3]);
    space.insert(0, b"hello").unwrap();
    space.set_user_meta([1, 2, 3]).unwrap();
    space.sync().unwrap();
    space.insert(5, b" world").unwrap();
    space.set_user_meta([4, 5, 6]).unwrap();
    // Crash before the second sync: the first commit point comes back.
    storage.plan(0, Fault::Crash { tear: false });
    assert!(space.sync().is_err());
    std::mem::forget(space);
    let image = Arc::new(storage.crash_image());
    let space = FlexSpace::open_with_storage(image.clone(), opts()).unwrap();
    assert_eq!(space.user_meta(), [1, 2, 3]);
    assert_eq!(space.len(), 5);
    // Through a checkpoint (close) too.
    space.set_user_meta([7, 8, 9]).unwrap();
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(image, opts()).unwrap();
    assert_eq!(space.user_meta(), [7, 8, 9]);
}

#[test]
fn check_finds_nothing_wrong_after_random_work() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let storage = Arc::new(FaultStorage::new());
    let space =
        FlexSpace::open_with_storage(storage, opts().max_data_size(8 * flexspace::SEGMENT_SIZE))
            .unwrap();
    for _ in 0..8000 {
        let len = space.len();
        let data = vec![rng.gen::<u8>(); rng.gen_range(1..20_000)];
        if len > 4_000_000 || (len > 0 && rng.gen_bool(0.4)) {
            let at = rng.gen_range(0..len);
            let n = rng.gen_range(1..=(len - at).min(30_000));
            space.collapse(at, n).unwrap();
        } else {
            space
                .insert_tagged(rng.gen_range(0..=len), &data, rng.gen_range(0..3))
                .unwrap();
        }
    }
    assert!(space.stats().gc_runs > 0, "the small data file forces GC");
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}

/// A tagged update of the same length maps the new bytes in place; it must
/// leave what a collapse and a tagged insert leave: the same bytes, tags,
/// extents, live bytes and consistent accounting, before and after a
/// reopen (which replays the log those two operations write).
#[test]
fn same_length_updates_match_a_collapse_and_an_insert() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    let twin = FlexSpace::open_with_storage(Arc::new(FaultStorage::new()), opts()).unwrap();
    for i in 0..400u32 {
        let pair = [(i % 251) as u8; 16];
        for s in [&space, &twin] {
            s.insert_tagged(s.len(), &pair, 1).unwrap();
        }
    }
    for i in 0..3000u32 {
        let len = space.len();
        let at = rng.gen_range(0..len);
        // Mostly one pair's worth inside an extent, sometimes spanning
        // several extents.
        let n = if i % 4 == 0 {
            rng.gen_range(1..=200)
        } else {
            rng.gen_range(1..=16)
        };
        let n = n.min(len - at) as usize;
        let data = vec![(i % 253) as u8; n];
        // Untagged ones too (then the tree runs the three operations).
        let tag = [0, 2, 3, 4][i as usize % 4];
        space.update_tagged(at, &data, n as u64, tag).unwrap();
        twin.collapse(at, n as u64).unwrap();
        twin.insert_tagged(at, &data, tag).unwrap();
        if i % 500 == 0 {
            space.sync().unwrap();
        }
    }
    let same = |a: &FlexSpace, b: &FlexSpace| {
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!(
            (sa.len, sa.extents, sa.live_bytes),
            (sb.len, sb.extents, sb.live_bytes)
        );
        let (mut ba, mut bb) = (vec![0u8; sa.len as usize], vec![0u8; sb.len as usize]);
        a.read(0, &mut ba).unwrap();
        b.read(0, &mut bb).unwrap();
        assert_eq!(ba, bb);
        for off in 0..sa.len {
            assert_eq!(
                a.get_tag(off).unwrap(),
                b.get_tag(off).unwrap(),
                "tag at {off}"
            );
        }
        assert_eq!(a.check().unwrap(), Vec::<String>::new());
    };
    same(&space, &twin);
    space.sync().unwrap();
    drop(space);
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    same(&space, &twin);
}
