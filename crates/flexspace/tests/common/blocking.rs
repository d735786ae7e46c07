//! A storage wrapper whose files' `sync` blocks while the test holds it
//! closed: it proves that nothing waits for a commit's or checkpoint's I/O.

use std::io;
use std::sync::Arc;

use flexspace::{Storage, StorageFile};
use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct GateState {
    /// Files whose sync blocks.
    closed: Vec<String>,
    /// Syncs blocked right now.
    waiting: usize,
}

/// Where blocked syncs wait.
#[derive(Default)]
pub struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    /// Makes syncs of `file` block until [`Gate::open`].
    pub fn close(&self, file: &str) {
        self.state.lock().closed.push(file.to_string());
    }

    /// Lets every blocked sync go.
    pub fn open(&self) {
        self.state.lock().closed.clear();
        self.cv.notify_all();
    }

    /// Waits until `n` syncs are blocked.
    pub fn wait_blocked(&self, n: usize) {
        let mut s = self.state.lock();
        while s.waiting < n {
            self.cv.wait(&mut s);
        }
    }

    fn pass(&self, file: &str) {
        let mut s = self.state.lock();
        if !s.closed.iter().any(|f| f == file) {
            return;
        }
        s.waiting += 1;
        self.cv.notify_all();
        while s.closed.iter().any(|f| f == file) {
            self.cv.wait(&mut s);
        }
        s.waiting -= 1;
    }
}

/// Wraps a storage; its files' syncs pass through `gate`.
pub struct BlockingStorage {
    pub inner: Arc<dyn Storage>,
    pub gate: Arc<Gate>,
}

struct BlockingFile {
    name: String,
    inner: Arc<dyn StorageFile>,
    gate: Arc<Gate>,
}

impl Storage for BlockingStorage {
    fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(BlockingFile {
            name: name.to_string(),
            inner: self.inner.open_file(name, create)?,
            gate: self.gate.clone(),
        }))
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        self.inner.exists(name)
    }
    fn remove_file(&self, name: &str) -> io::Result<()> {
        self.inner.remove_file(name)
    }
    fn list_files(&self) -> io::Result<Vec<String>> {
        self.inner.list_files()
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()
    }
}

impl StorageFile for BlockingFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_all_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        self.gate.pass(&self.name);
        self.inner.sync()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_direct_at(offset, data)
    }
}
