//! Progress of `load` and `dump`: a bar (or spinner) with rate and ETA on
//! a terminal, and a one-line summary at the end.
//!
//! Invariants: the bar is drawn only when stderr is a terminal and the
//! command is not `--quiet`; it never writes to stdout. The summary line
//! has the form `loaded 1000000 pairs (123.4 MB) in 4.2 s, 238000 pairs/s`
//! where the size counts key and value bytes (decimal units).

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Counts pairs and bytes, draws progress, prints the summary.
pub struct Progress {
    verb: &'static str,
    bar: Option<ProgressBar>,
    start: Instant,
    pairs: u64,
    bytes: u64,
    quiet: bool,
}

impl Progress {
    /// Progress of `verb` ("loaded", "dumped"); with `total` input bytes
    /// the bar shows a percentage and an ETA, without it a spinner.
    pub fn new(verb: &'static str, total: Option<u64>, quiet: bool) -> Self {
        let bar = (!quiet && io::stderr().is_terminal()).then(|| make_bar(total));
        Progress {
            verb,
            bar,
            start: Instant::now(),
            pairs: 0,
            bytes: 0,
            quiet,
        }
    }

    /// Counts one pair of `bytes` key and value bytes; `position` is the
    /// input consumed so far, when known.
    pub fn pair(&mut self, bytes: u64, position: Option<u64>) {
        self.pairs += 1;
        self.bytes += bytes;
        if let Some(bar) = &self.bar {
            if self.pairs & 1023 == 0 {
                match position {
                    Some(pos) => bar.set_position(pos),
                    None => bar.set_position(self.pairs),
                }
                let rate = self.pairs as f64 / self.start.elapsed().as_secs_f64().max(1e-3);
                bar.set_message(format!("{} pairs, {rate:.0} pairs/s", self.pairs));
            }
        }
    }

    /// Shows what the command does now that no pair moves (e.g. flushing).
    pub fn stage(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} pairs, {what}", self.pairs));
        }
    }

    /// Pairs counted so far.
    pub fn pairs(&self) -> u64 {
        self.pairs
    }

    /// Removes the bar and, unless quiet or `summary` is false, prints the
    /// summary on stderr.
    pub fn finish(self, summary_line: bool) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if summary_line && !self.quiet {
            let line = summary(self.verb, self.pairs, self.bytes, self.start.elapsed());
            let _ = writeln!(io::stderr().lock(), "{line}");
        }
    }
}

fn make_bar(total: Option<u64>) -> ProgressBar {
    let (bar, template) = match total {
        Some(total) => (
            ProgressBar::new(total),
            "{spinner} [{elapsed_precise}] [{wide_bar}] {decimal_bytes}/{decimal_total_bytes} \
             ({decimal_bytes_per_sec}, ETA {eta}) {msg}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} [{elapsed_precise}] {msg}",
        ),
    };
    styled(bar, template)
}

/// `bar` drawn with `template` on stderr, ticking on its own.
fn styled(bar: ProgressBar, template: &str) -> ProgressBar {
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs `work`, which reports `(done, total)` as it goes, with a bar
/// drawn from it by `template` on stderr (only on a terminal and when not
/// `quiet`), cleared when `work` returns.
pub fn with_bar<T>(
    quiet: bool,
    template: &str,
    work: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T,
) -> T {
    let bar = (!quiet && io::stderr().is_terminal()).then(|| styled(ProgressBar::new(1), template));
    let out = work(&mut |done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total.max(1));
            bar.set_position(done);
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    out
}

/// The summary line.
pub fn summary(verb: &str, pairs: u64, bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = pairs as f64 / secs.max(1e-3);
    format!(
        "{verb} {pairs} pairs ({}) in {secs:.1} s, {rate:.0} pairs/s",
        human_bytes(bytes)
    )
}

/// `bytes` in decimal units with one decimal (B, kB, MB, GB, TB).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1000.0;
    let mut unit = 0;
    while v >= 999.95 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_has_the_documented_form() {
        assert_eq!(
            summary(
                "loaded",
                1_000_000,
                123_400_000,
                Duration::from_millis(4200)
            ),
            "loaded 1000000 pairs (123.4 MB) in 4.2 s, 238095 pairs/s"
        );
        assert_eq!(
            summary("dumped", 0, 0, Duration::ZERO),
            "dumped 0 pairs (0 B) in 0.0 s, 0 pairs/s"
        );
    }

    #[test]
    fn human_bytes_examples() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1000), "1.0 kB");
        assert_eq!(human_bytes(999_999), "1.0 MB");
        assert_eq!(human_bytes(5_500_000_000), "5.5 GB");
        assert_eq!(human_bytes(u64::MAX), "18446744.1 TB");
    }
}
