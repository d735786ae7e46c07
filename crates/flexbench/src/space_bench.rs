//! `flexbench space`: Table 2 of the paper. A write phase (random inserts,
//! random overwrites or sequential appends of `io_size` bytes, ended by a
//! sync), then sequential and random reads, each cold (page cache dropped)
//! and warm. The `file` baseline runs the same patterns on a plain file in
//! the same file system, inserting with `fallocate(FALLOC_FL_INSERT_RANGE)`.
//!
//! Invariants: both targets get the same sequence of offsets (same seed);
//! write amplification is device bytes written during the write phase
//! (including its final sync) over user bytes written. Both targets are
//! read at the same size: the baseline's insert phase stops after
//! `--baseline-seconds`, and the file is then filled up to `--total` by
//! untimed appends. Before each warm read phase every file of the target
//! is read sequentially (untimed), so "warm" means the whole data set is in
//! the page cache whatever the cold phase managed to read in its time.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use flexspace::{FlexSpace, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::device::DeviceCounter;

/// A write pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Insert at uniformly random offsets.
    RandInsert,
    /// Overwrite random aligned blocks of a prefilled space.
    RandWrite,
    /// Append.
    SeqWrite,
}

impl Pattern {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Pattern::RandInsert => "rand-insert",
            Pattern::RandWrite => "rand-write",
            Pattern::SeqWrite => "seq-write",
        }
    }
}

/// One measured phase.
#[derive(Serialize, Clone, Debug)]
pub struct PhaseResult {
    /// flexspace or file.
    pub target: String,
    /// The write pattern.
    pub pattern: String,
    /// Bytes per operation.
    pub io_size: u64,
    /// write, seq-read-cold, seq-read-warm, rand-read-cold, rand-read-warm.
    pub phase: String,
    /// Throughput in MB/s (10^6 bytes).
    pub mbps: f64,
    /// Write amplification (write phase only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wa: Option<f64>,
    /// Write amplification counting only this process's writes
    /// (`/proc/self/io`): without file-system metadata and journal, and
    /// without other processes' writes to the shared device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wa_process: Option<f64>,
    /// Bytes moved in the phase.
    pub bytes: u64,
    /// Size of the space (or file) during the phase: for the baseline's
    /// insert phase, what the timed inserts reached.
    pub data_bytes: u64,
    /// Whether flexspace read its data file through a memory mapping.
    pub mmap_reads: bool,
    /// flexspace after its write phase: data file bytes in use over live
    /// bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space_amplification: Option<f64>,
    /// flexspace's write phase: bytes garbage collection relocated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_relocated_bytes: Option<u64>,
    /// Seconds the phase took.
    pub seconds: f64,
}

/// What the benchmark drives.
trait Target {
    fn len(&self) -> u64;
    fn append(&mut self, data: &[u8]) -> Result<(), String>;
    fn insert(&mut self, at: u64, data: &[u8]) -> Result<(), String>;
    fn overwrite(&mut self, at: u64, data: &[u8]) -> Result<(), String>;
    fn sync(&mut self) -> Result<(), String>;
    fn read(&self, at: u64, buf: &mut [u8]) -> Result<(), String>;
    fn drop_cache(&self) -> Result<(), String>;
    /// The files holding the target's data (for the warm-up pass).
    fn files(&self) -> Vec<std::path::PathBuf>;
    /// Space amplification and bytes relocated by garbage collection, for
    /// targets that have them.
    fn gc_stats(&self) -> Option<(f64, u64)> {
        None
    }
    /// Insert offsets must be multiples of this.
    fn insert_align(&self) -> u64;
}

struct SpaceTarget(FlexSpace, std::path::PathBuf);

impl Target for SpaceTarget {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        self.0.insert(self.0.len(), data).map_err(|e| e.to_string())
    }
    fn insert(&mut self, at: u64, data: &[u8]) -> Result<(), String> {
        self.0.insert(at, data).map_err(|e| e.to_string())
    }
    fn overwrite(&mut self, at: u64, data: &[u8]) -> Result<(), String> {
        self.0.write(at, data).map_err(|e| e.to_string())
    }
    fn sync(&mut self) -> Result<(), String> {
        self.0.sync().map_err(|e| e.to_string())
    }
    fn read(&self, at: u64, buf: &mut [u8]) -> Result<(), String> {
        self.0.read(at, buf).map(|_| ()).map_err(|e| e.to_string())
    }
    fn drop_cache(&self) -> Result<(), String> {
        self.0.drop_caches().map_err(|e| e.to_string())
    }
    fn gc_stats(&self) -> Option<(f64, u64)> {
        let st = self.0.stats();
        Some((st.space_amplification, st.gc_relocated_bytes))
    }
    fn files(&self) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&self.1)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }
    fn insert_align(&self) -> u64 {
        1
    }
}

struct FileTarget {
    file: File,
    path: std::path::PathBuf,
    len: u64,
}

impl Target for FileTarget {
    fn len(&self) -> u64 {
        self.len
    }
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        self.file
            .write_all_at(data, self.len)
            .map_err(|e| e.to_string())?;
        self.len += data.len() as u64;
        Ok(())
    }
    fn insert(&mut self, at: u64, data: &[u8]) -> Result<(), String> {
        if at == self.len {
            return self.append(data);
        }
        // SAFETY: fallocate on our own descriptor; it takes no pointers.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_INSERT_RANGE,
                at as libc::off_t,
                data.len() as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(format!(
                "fallocate(INSERT_RANGE): {}",
                std::io::Error::last_os_error()
            ));
        }
        self.file
            .write_all_at(data, at)
            .map_err(|e| e.to_string())?;
        self.len += data.len() as u64;
        Ok(())
    }
    fn overwrite(&mut self, at: u64, data: &[u8]) -> Result<(), String> {
        self.file.write_all_at(data, at).map_err(|e| e.to_string())
    }
    fn sync(&mut self) -> Result<(), String> {
        self.file.sync_data().map_err(|e| e.to_string())
    }
    fn read(&self, at: u64, buf: &mut [u8]) -> Result<(), String> {
        self.file.read_exact_at(buf, at).map_err(|e| e.to_string())
    }
    fn drop_cache(&self) -> Result<(), String> {
        // SAFETY: posix_fadvise on our own descriptor; no memory is passed.
        let rc =
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("posix_fadvise: error {rc}"))
        }
    }
    fn files(&self) -> Vec<std::path::PathBuf> {
        vec![self.path.clone()]
    }
    fn insert_align(&self) -> u64 {
        4096
    }
}

/// Settings of one run.
pub struct SpaceBench {
    /// The write pattern.
    pub pattern: Pattern,
    /// Bytes per operation.
    pub io_size: u64,
    /// Bytes to write.
    pub total: u64,
    /// Run the plain-file baseline too.
    pub baseline_file: bool,
    /// Time cap of the baseline's write phase.
    pub baseline_seconds: f64,
    /// Time cap of each read phase.
    pub read_seconds: f64,
    /// Directory for the files.
    pub dir: std::path::PathBuf,
    /// Random seed.
    pub seed: u64,
    /// Random inserts go to multiples of this (the paper: 4096 for both
    /// targets; 1 lets flexspace insert at any byte, which the file
    /// baseline cannot).
    pub insert_align: u64,
    /// Open flexspace with `Options::mmap_reads`.
    pub mmap_reads: bool,
    /// flexspace's garbage thresholds (high, low), if not the default.
    pub gc_garbage: Option<(f64, f64)>,
}

impl SpaceBench {
    /// Runs flexspace (and the baseline) and returns every phase.
    pub fn run(&self) -> Result<Vec<PhaseResult>, String> {
        if self.io_size == 0 || self.total < self.io_size {
            return Err("--io-size must be positive and at most --total".into());
        }
        let mut out = Vec::new();
        let sdir = self.dir.join("flexspace");
        let cap = (self.total * 4).max(256 << 20);
        let opts = Options::new()
            .create(true)
            .max_data_size(cap)
            .mmap_reads(self.mmap_reads);
        let opts = match self.gc_garbage {
            Some((h, l)) => opts.gc_garbage(h, l),
            None => opts,
        };
        let space = FlexSpace::open(&sdir, opts).map_err(|e| e.to_string())?;
        self.run_target("flexspace", &mut SpaceTarget(space, sdir.clone()), &mut out)?;
        let _ = std::fs::remove_dir_all(&sdir);
        if self.baseline_file {
            if !self.io_size.is_multiple_of(4096) {
                return Err("the file baseline needs --io-size to be a multiple of 4096".into());
            }
            let path = self.dir.join("baseline.file");
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|e| e.to_string())?;
            let mut target = FileTarget {
                file,
                path: path.clone(),
                len: 0,
            };
            self.run_target("file", &mut target, &mut out)?;
            let _ = std::fs::remove_file(&path);
        }
        Ok(out)
    }

    fn run_target(
        &self,
        name: &str,
        t: &mut dyn Target,
        out: &mut Vec<PhaseResult>,
    ) -> Result<(), String> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let io = self.io_size;
        let block: Vec<u8> = (0..io).map(|i| (i * 31 + 7) as u8).collect();
        let counter = DeviceCounter::for_dir(&self.dir);
        if self.pattern == Pattern::RandWrite {
            while t.len() < self.total {
                t.append(&block)?;
            }
            t.sync()?;
        }
        let deadline = (name == "file" && self.pattern == Pattern::RandInsert)
            .then(|| Duration::from_secs_f64(self.baseline_seconds));
        let dev0 = counter.bytes_written();
        let proc0 = crate::device::process_bytes_written();
        let start = Instant::now();
        let mut written = 0u64;
        while written < self.total {
            match self.pattern {
                Pattern::SeqWrite => t.append(&block)?,
                Pattern::RandInsert => {
                    let align = self.insert_align.max(t.insert_align());
                    let at = rng.gen_range(0..=t.len() / align) * align;
                    t.insert(at, &block)?;
                }
                Pattern::RandWrite => {
                    let at = rng.gen_range(0..self.total / io) * io;
                    t.overwrite(at, &block)?;
                }
            }
            written += io;
            if deadline.is_some_and(|d| written.is_multiple_of(64 * io) && start.elapsed() > d) {
                break;
            }
        }
        t.sync()?;
        let secs = start.elapsed().as_secs_f64();
        let dev = counter.bytes_written().saturating_sub(dev0);
        let own = crate::device::process_bytes_written().saturating_sub(proc0);
        let mut r = self.result(
            name,
            "write",
            written,
            secs,
            Some(dev as f64 / written as f64),
        );
        r.data_bytes = t.len();
        r.wa_process = Some(own as f64 / written as f64);
        if let Some((amp, moved)) = t.gc_stats() {
            r.space_amplification = Some(amp);
            r.gc_relocated_bytes = Some(moved);
        }
        out.push(r);
        // A baseline stopped early is filled up to the same size (untimed),
        // so that both targets are read at the same size.
        while t.len() < self.total {
            t.append(&block)?;
        }
        t.sync()?;
        let len = t.len();
        let mut buf = vec![0u8; io as usize];
        for cold in [true, false] {
            if cold {
                t.drop_cache()?;
            } else {
                warm_up(t)?;
            }
            let (bytes, secs) = self.timed_reads(
                |i| {
                    let at = i * io;
                    (at + io <= len).then_some(at)
                },
                t,
                &mut buf,
            )?;
            let phase = if cold {
                "seq-read-cold"
            } else {
                "seq-read-warm"
            };
            let mut r = self.result(name, phase, bytes, secs, None);
            r.data_bytes = len;
            out.push(r);
        }
        let blocks = (len / io).max(1);
        let offsets: Vec<u64> = (0..blocks).map(|_| rng.gen_range(0..blocks) * io).collect();
        for cold in [true, false] {
            if cold {
                t.drop_cache()?;
            } else {
                warm_up(t)?;
            }
            let (bytes, secs) = self.timed_reads(
                |i| offsets.get(i as usize).copied().filter(|&a| a + io <= len),
                t,
                &mut buf,
            )?;
            let phase = if cold {
                "rand-read-cold"
            } else {
                "rand-read-warm"
            };
            let mut r = self.result(name, phase, bytes, secs, None);
            r.data_bytes = len;
            out.push(r);
        }
        Ok(())
    }

    /// Reads the offsets `next(0), next(1), ...` until `None` or the time cap.
    fn timed_reads(
        &self,
        next: impl Fn(u64) -> Option<u64>,
        t: &dyn Target,
        buf: &mut [u8],
    ) -> Result<(u64, f64), String> {
        let cap = Duration::from_secs_f64(self.read_seconds);
        let start = Instant::now();
        let mut bytes = 0u64;
        let mut i = 0;
        while let Some(at) = next(i) {
            t.read(at, buf)?;
            bytes += buf.len() as u64;
            i += 1;
            if i % 256 == 0 && start.elapsed() > cap {
                break;
            }
        }
        std::hint::black_box(&buf);
        Ok((bytes, start.elapsed().as_secs_f64()))
    }

    fn result(
        &self,
        target: &str,
        phase: &str,
        bytes: u64,
        secs: f64,
        wa: Option<f64>,
    ) -> PhaseResult {
        PhaseResult {
            target: target.into(),
            pattern: self.pattern.name().into(),
            io_size: self.io_size,
            phase: phase.into(),
            mbps: bytes as f64 / secs.max(1e-9) / 1e6,
            wa,
            wa_process: None,
            bytes,
            data_bytes: 0,
            space_amplification: None,
            gc_relocated_bytes: None,
            mmap_reads: target == "flexspace" && self.mmap_reads,
            seconds: secs,
        }
    }
}

/// Reads every file of `t` sequentially, so the page cache holds them.
fn warm_up(t: &dyn Target) -> Result<(), String> {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    for path in t.files() {
        let Ok(mut f) = File::open(&path) else {
            continue;
        };
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }
    Ok(())
}

/// A human table of the phases, with flexspace's ratio to the file.
pub fn table(results: &[PhaseResult], source: &str) -> String {
    let mut s = format!(
        "{:<10} {:<12} {:>8} {:<15} {:>10} {:>7} {:>7} {:>10} {:>12}\n",
        "target", "pattern", "io_size", "phase", "MB/s", "WA", "WA proc", "data MiB", "flex/file"
    );
    for r in results {
        let ratio = results
            .iter()
            .find(|b| b.target == "file" && b.phase == r.phase)
            .filter(|_| r.target == "flexspace")
            .map(|b| format!("{:.1}x", r.mbps / b.mbps.max(1e-12)))
            .unwrap_or_default();
        s += &format!(
            "{:<10} {:<12} {:>8} {:<15} {:>10.1} {:>7} {:>7} {:>10} {:>12}\n",
            r.target,
            r.pattern,
            r.io_size,
            r.phase,
            r.mbps,
            r.wa.map(|w| format!("{w:.3}")).unwrap_or_default(),
            r.wa_process.map(|w| format!("{w:.3}")).unwrap_or_default(),
            r.data_bytes >> 20,
            ratio
        );
    }
    for r in results {
        if let (Some(amp), Some(moved)) = (r.space_amplification, r.gc_relocated_bytes) {
            s += &format!(
                "({} after its write phase: space amplification {amp:.2}, \
                 garbage collection relocated {} MiB)\n",
                r.target,
                moved >> 20
            );
        }
    }
    if results.iter().any(|r| r.mmap_reads) {
        s += "(flexspace read its data file through a memory mapping: --mmap-reads)\n";
    }
    s += &format!("(device writes from {source}; ");
    s += "data MiB: size when the phase ran; a baseline whose timed write phase \
          stopped early is filled to --total by untimed appends before its reads; \
          warm phases follow an untimed sequential read of the target's files)\n";
    s
}

/// The device counter source for `dir`.
pub fn counter_source(dir: &Path) -> String {
    DeviceCounter::for_dir(dir).source()
}
