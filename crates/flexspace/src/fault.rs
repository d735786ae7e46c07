//! A fault-injecting in-memory storage backend for crash and error tests.
//!
//! Every file keeps two images: `live` (what reads see) and `durable` (what
//! survives a crash: `live` as of the file's last `sync`). All files share
//! one operation counter (writes, syncs and length changes count). A
//! [`Fault`] planned for operation N fires there: `Crash` makes that and
//! every later operation fail, after which [`FaultStorage::crash_image`]
//! gives the storage a restarted machine would see (durable images, with
//! the first half of the last unsynced write torn in when asked); `NoSpace`
//! and `Io` fail that one operation with ENOSPC or EIO and change nothing.
//! Removals and renames count as operations and are durable at once; a
//! handle names its file, so after a rename or removal it no longer reaches
//! the bytes (unlike a POSIX descriptor): close handles first.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::storage::{Storage, StorageFile};

/// What happens at the planned operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The machine stops; `tear` applies half of the last unsynced write to
    /// the durable image.
    Crash {
        /// Tear the last write.
        tear: bool,
    },
    /// The operation fails with ENOSPC.
    NoSpace,
    /// The operation fails with EIO.
    Io,
}

#[derive(Clone, Default)]
struct Image {
    live: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default)]
struct State {
    files: HashMap<String, Image>,
    ops: u64,
    plan: Option<(u64, Fault)>,
    crashed: bool,
    /// The last write since its file's sync: (file, offset, bytes).
    last_write: Option<(String, u64, Vec<u8>)>,
    torn: bool,
}

/// An in-memory storage that injects faults.
#[derive(Clone, Default)]
pub struct FaultStorage {
    state: Arc<Mutex<State>>,
}

impl FaultStorage {
    /// An empty storage with no fault planned.
    pub fn new() -> Self {
        Self::default()
    }

    /// Plans `fault` for operation number `at` (counting from now).
    pub fn plan(&self, at: u64, fault: Fault) {
        let mut s = self.state.lock();
        let now = s.ops;
        s.plan = Some((now + at, fault));
    }

    /// Removes any planned fault.
    pub fn clear_plan(&self) {
        self.state.lock().plan = None;
    }

    /// Operations counted so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Whether a planned crash has happened.
    pub fn crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// The storage after a restart: each file's durable image (plus half of
    /// the last unsynced write when the crash tears it).
    pub fn crash_image(&self) -> FaultStorage {
        let s = self.state.lock();
        let mut files = HashMap::new();
        for (name, img) in &s.files {
            let mut durable = img.durable.clone();
            if s.torn {
                if let Some((f, off, data)) = &s.last_write {
                    if f == name {
                        let half = &data[..data.len() / 2];
                        let end = *off as usize + half.len();
                        if durable.len() < end {
                            durable.resize(end, 0);
                        }
                        durable[*off as usize..end].copy_from_slice(half);
                    }
                }
            }
            files.insert(
                name.clone(),
                Image {
                    live: durable.clone(),
                    durable,
                },
            );
        }
        FaultStorage {
            state: Arc::new(Mutex::new(State {
                files,
                ..State::default()
            })),
        }
    }

    /// A copy of a file's live bytes (for corruption tests).
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        self.state.lock().files.get(name).map(|i| i.live.clone())
    }

    /// Replaces a file's live and durable bytes (for corruption tests).
    pub fn set_file_bytes(&self, name: &str, bytes: Vec<u8>) {
        self.state.lock().files.insert(
            name.to_string(),
            Image {
                live: bytes.clone(),
                durable: bytes,
            },
        );
    }
}

impl State {
    /// Counts one operation and applies the plan.
    fn step(&mut self) -> io::Result<()> {
        if self.crashed {
            return Err(io::Error::other("simulated crash"));
        }
        let n = self.ops;
        self.ops += 1;
        match self.plan {
            Some((at, fault)) if at == n => {
                self.plan = None;
                match fault {
                    Fault::Crash { tear } => {
                        self.crashed = true;
                        self.torn = tear;
                        Err(io::Error::other("simulated crash"))
                    }
                    Fault::NoSpace => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
                    Fault::Io => Err(io::Error::from_raw_os_error(libc::EIO)),
                }
            }
            _ => Ok(()),
        }
    }
}

struct FaultFile {
    name: String,
    state: Arc<Mutex<State>>,
}

impl Storage for FaultStorage {
    fn open_file(&self, name: &str, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.state.lock();
        if s.crashed {
            return Err(io::Error::other("simulated crash"));
        }
        if !s.files.contains_key(name) {
            if !create {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            }
            s.files.insert(name.to_string(), Image::default());
        }
        Ok(Arc::new(FaultFile {
            name: name.to_string(),
            state: self.state.clone(),
        }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.state.lock().files.contains_key(name))
    }

    fn remove_file(&self, name: &str) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        s.files
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn list_files(&self) -> io::Result<Vec<String>> {
        let s = self.state.lock();
        if s.crashed {
            return Err(io::Error::other("simulated crash"));
        }
        let mut names: Vec<String> = s.files.keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        let img = s
            .files
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.files.insert(to.to_string(), img);
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        self.state.lock().step()
    }
}

impl FaultFile {
    fn with<R>(&self, f: impl FnOnce(&mut Image) -> R) -> io::Result<R> {
        let mut s = self.state.lock();
        let img = s
            .files
            .get_mut(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(f(img))
    }
}

impl StorageFile for FaultFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.state.lock().crashed {
            return Err(io::Error::other("simulated crash"));
        }
        self.with(|img| {
            let start = offset as usize;
            match start.checked_add(buf.len()) {
                Some(end) if end <= img.live.len() => {
                    buf.copy_from_slice(&img.live[start..end]);
                    Ok(())
                }
                _ => Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            }
        })?
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        s.last_write = Some((self.name.clone(), offset, data.to_vec()));
        let img = s
            .files
            .get_mut(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let end = offset as usize + data.len();
        if img.live.len() < end {
            img.live.resize(end, 0);
        }
        img.live[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step()?;
        if s.last_write
            .as_ref()
            .is_some_and(|(f, _, _)| *f == self.name)
        {
            s.last_write = None;
        }
        let img = s
            .files
            .get_mut(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        img.durable = img.live.clone();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        self.with(|img| img.live.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.state.lock().step()?;
        self.with(|img| img.live.resize(len as usize, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_keeps_only_synced_bytes() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        f.write_all_at(0, b"hello").unwrap();
        f.sync().unwrap();
        f.write_all_at(5, b" world").unwrap();
        st.plan(0, Fault::Crash { tear: false });
        assert!(f.write_all_at(11, b"!").is_err());
        assert!(f.sync().is_err());
        let img = st.crash_image();
        assert_eq!(img.file_bytes("a").unwrap(), b"hello");
        let torn = {
            let st = FaultStorage::new();
            let f = st.open_file("a", true).unwrap();
            f.write_all_at(0, b"abcd").unwrap();
            st.plan(0, Fault::Crash { tear: true });
            let _ = f.sync();
            st.crash_image()
        };
        assert_eq!(torn.file_bytes("a").unwrap(), b"ab");
    }

    #[test]
    fn directory_operations() {
        let st = FaultStorage::new();
        st.open_file("b", true)
            .unwrap()
            .write_all_at(0, b"x")
            .unwrap();
        st.open_file("a", true).unwrap();
        assert_eq!(st.list_files().unwrap(), vec!["a", "b"]);
        st.rename("b", "a").unwrap();
        assert_eq!(st.list_files().unwrap(), vec!["a"]);
        assert_eq!(st.file_bytes("a").unwrap(), b"x");
        st.remove_file("a").unwrap();
        assert!(st.remove_file("a").is_err());
        assert!(st.list_files().unwrap().is_empty());
        st.sync_dir().unwrap();
    }

    #[test]
    fn errors_fire_once() {
        let st = FaultStorage::new();
        let f = st.open_file("a", true).unwrap();
        st.plan(1, Fault::NoSpace);
        f.write_all_at(0, b"x").unwrap();
        let e = f.write_all_at(1, b"y").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        f.write_all_at(1, b"z").unwrap();
        assert_eq!(st.file_bytes("a").unwrap(), b"xz");
        assert!(st.open_file("missing", false).is_err());
    }
}
