//! Garbage in the reader registry (`readers/`) neither hangs the writer
//! nor stops it reusing segments: a FIFO is skipped without being opened,
//! and a file where the directory should be means no reader.

use flexspace::{FlexSpace, Options};

fn writer_opts() -> Options {
    Options::new().create(true).max_data_size(64 << 20)
}

/// A FIFO in `readers/`: a blocking `open(O_RDONLY)` of it would hang
/// the writer's scan after every commit's log sync.
#[test]
fn a_fifo_in_the_registry_does_not_hang_the_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let w = FlexSpace::open(&dir, writer_opts()).unwrap();
    w.insert(0, b"x").unwrap();
    w.sync().unwrap();
    std::fs::create_dir(dir.join("readers")).unwrap();
    let fifo = dir.join("readers").join("garbage");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        w.insert(1, b"y").unwrap();
        let r = w.sync();
        let _ = tx.send(r.is_ok());
        std::mem::forget(w);
    });
    let done = rx.recv_timeout(std::time::Duration::from_secs(5));
    if done.is_err() {
        // Unblock the hung open so the process can exit.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    }
    assert!(
        done.is_ok(),
        "the writer's commit hung on a FIFO in readers/"
    );
}

/// `readers` as a regular file: no reader can register, so nothing is
/// held (a failing scan would keep the pin set at open, everything).
#[test]
fn a_file_named_readers_does_not_stop_segment_reuse() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    {
        let w = FlexSpace::open(&dir, writer_opts()).unwrap();
        w.insert(0, &vec![1u8; 4 << 20]).unwrap();
        w.close().unwrap();
    }
    std::fs::write(dir.join("readers"), b"garbage").unwrap();
    let w = FlexSpace::open(&dir, writer_opts()).unwrap();
    for round in 0..4u8 {
        w.collapse(0, w.len()).unwrap();
        w.insert(0, &vec![round; 4 << 20]).unwrap();
        w.sync().unwrap();
    }
    w.compact(|_, _| {}).unwrap();
    w.insert(0, b"z").unwrap();
    w.sync().unwrap();
    w.punch_free_segments().unwrap();
    let s = w.stats();
    assert_eq!(s.reader_held_segments, 0, "segments held for no reader");
}
