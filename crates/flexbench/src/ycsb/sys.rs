//! What the operating system says about the process and the store's
//! directory: memory, bytes written, bytes on disk.
//!
//! Invariant: every probe returns `None` (or 0 for sizes) where the
//! information is not available, never an error that stops a run. A
//! [`PeakSampler`]'s peak is the largest of its samples, taken from its
//! start to its finish, the first and last included.

use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a [`PeakSampler`] reads `/proc/self/status`.
pub const RSS_SAMPLE_PERIOD: Duration = Duration::from_millis(10);

/// The peak of a `/proc/self/status` field (`RssAnon`) over a stretch of
/// time, sampled by a thread of its own every [`RSS_SAMPLE_PERIOD`]: the
/// kernel keeps a peak of the whole resident size (VmHWM) but not of its
/// anonymous part, the memory the store holds rather than the page cache.
/// With a probe of the engine's memory, it also keeps what the probe said
/// at the peak (asked again only when a sample passes the last asked-at
/// peak by `PROBE_STEP`, since a probe may cost system calls).
pub struct PeakSampler {
    field: &'static str,
    /// The largest sample so far (0: none yet).
    peak: Arc<AtomicU64>,
    /// The probe's answer at the peak, and the sample it was asked at.
    at_peak: Arc<Mutex<Option<(u64, Parts)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Memory by part, as an engine's probe counts it.
pub type Parts = std::collections::BTreeMap<String, u64>;

/// How far a sample must pass the peak the probe was last asked at for
/// the sampler to ask it again.
const PROBE_STEP: u64 = 8 << 20;

/// What a [`PeakSampler`] saw.
pub struct Peak {
    /// The largest sample (`None` when no sample could be read).
    pub bytes: Option<u64>,
    /// The probe's answer at (within `PROBE_STEP` of) that sample.
    pub parts: Option<Parts>,
}

impl PeakSampler {
    /// Starts sampling `field` every `period`, asking `probe` (if any) at
    /// each new peak.
    pub fn start(
        field: &'static str,
        period: Duration,
        probe: Option<Box<dyn Fn() -> Parts + Send>>,
    ) -> PeakSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let at_peak: Arc<Mutex<Option<(u64, Parts)>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let sample = {
            let at_peak = at_peak.clone();
            move |peak: &AtomicU64| {
                let Some(v) = proc_status_bytes(field) else {
                    return;
                };
                peak.fetch_max(v, Ordering::Relaxed);
                let Some(probe) = &probe else {
                    return;
                };
                let mut at = at_peak.lock().unwrap_or_else(|e| e.into_inner());
                if at.as_ref().is_none_or(|(seen, _)| v >= seen + PROBE_STEP) {
                    *at = Some((v, probe()));
                }
            }
        };
        sample(&peak);
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::Builder::new()
                .name("flexbench-rss".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(period);
                        sample(&peak);
                    }
                })
                .ok()
        };
        PeakSampler {
            field,
            peak,
            at_peak,
            stop,
            thread,
        }
    }

    /// Stops sampling (dropping the probe); the peak seen, with a last
    /// sample taken now.
    pub fn finish(mut self) -> Peak {
        self.stop_thread();
        if let Some(v) = proc_status_bytes(self.field) {
            self.peak.fetch_max(v, Ordering::Relaxed);
        }
        let parts = self
            .at_peak
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map(|(_, p)| p);
        Peak {
            bytes: Some(self.peak.load(Ordering::Relaxed)).filter(|&p| p > 0),
            parts,
        }
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`, `RssAnon`).
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kb(&s, field).map(|kb| kb * 1024)
}

fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// CPU time the process has used so far, user and system, every thread.
pub fn process_cpu() -> Option<Duration> {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value we
    // pass and reads nothing else.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut u) == 0).then_some(u)
    }?;
    let tv =
        |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000);
    Some(tv(u.ru_utime) + tv(u.ru_stime))
}

/// Resets the process's peak resident size (VmHWM) to its current RSS.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Bytes this process caused to be written to storage so far
/// (`write_bytes - cancelled_write_bytes` of `/proc/self/io`).
pub fn process_bytes_written() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/io") else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    field("write_bytes:").saturating_sub(field("cancelled_write_bytes:"))
}

/// Bytes the files under `dir` occupy on disk (allocated blocks, as du).
pub fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// Writes back every dirty page of the file system holding `dir`.
pub fn syncfs(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        // SAFETY: syncfs on a descriptor we own; it takes no pointers.
        unsafe {
            libc::syncfs(f.as_raw_fd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_grows_with_work() {
        let before = process_cpu().expect("getrusage works on Linux");
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = process_cpu().expect("getrusage works on Linux");
        assert!(
            after >= before + Duration::from_millis(20),
            "{before:?} -> {after:?}"
        );
    }

    #[test]
    fn status_fields_parse() {
        let s = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(parse_status_kb(s, "VmRSS"), Some(1024));
        assert_eq!(parse_status_kb(s, "VmHWM"), Some(2048));
        assert_eq!(parse_status_kb(s, "VmSwap"), None);
        assert!(proc_status_bytes("VmRSS").unwrap_or(1) > 0);
    }

    #[test]
    fn the_sampler_sees_a_large_allocation() {
        const BIG: usize = 256 << 20;
        // The probe counts its calls: asked at the first sample and again
        // as the allocation raises the peak.
        let asked = Arc::new(AtomicU64::new(0));
        let probe = {
            let asked = asked.clone();
            move || {
                let n = asked.fetch_add(1, Ordering::Relaxed) + 1;
                Parts::from([("asked".to_string(), n)])
            }
        };
        let sampler = PeakSampler::start("RssAnon", RSS_SAMPLE_PERIOD, Some(Box::new(probe)));
        // Touch every page so it is resident and hold it for several
        // periods. (The allocator keeps the freed pages, so the figure
        // after the drop would show them too: only the peak is checked.
        // Against the allocation alone, not a figure read before it: the
        // other tests of this process allocate and free meanwhile.)
        let mut v = vec![0u8; BIG];
        for i in (0..BIG).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        std::thread::sleep(RSS_SAMPLE_PERIOD * 10);
        drop(v);
        let peak = sampler.finish();
        let bytes = peak.bytes.expect("samples were read");
        assert!(
            bytes >= (BIG as u64) * 9 / 10,
            "peak {bytes} below the {BIG} bytes held"
        );
        // The parts kept are the last answer, given at the peak.
        let parts = peak.parts.expect("the probe was asked");
        assert!(asked.load(Ordering::Relaxed) >= 2);
        assert_eq!(parts["asked"], asked.load(Ordering::Relaxed));
    }

    #[test]
    fn a_sampler_of_a_missing_field_has_no_peak() {
        let probe = || Parts::from([("asked".to_string(), 1)]);
        let sampler = PeakSampler::start(
            "NoSuchField",
            Duration::from_millis(1),
            Some(Box::new(probe)),
        );
        std::thread::sleep(Duration::from_millis(5));
        let peak = sampler.finish();
        assert_eq!(peak.bytes, None);
        assert_eq!(peak.parts, None);
    }

    #[test]
    fn du_counts_allocated_blocks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), vec![1u8; 100_000]).unwrap();
        syncfs(dir.path());
        let du = disk_usage(dir.path());
        assert!(du >= 100_000, "{du}");
        assert_eq!(disk_usage(&dir.path().join("missing")), 0);
    }
}
