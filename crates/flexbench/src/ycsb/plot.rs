//! `--plot FILE.svg`: throughput and p99 latency per workload, one bar per
//! engine, drawn with plotters' SVG backend.
//!
//! Only SVG: plotters draws text into bitmaps (PNG) through system font
//! libraries (fontconfig and freetype development packages at build time)
//! or a font file we would have to ship; SVG needs neither (the viewer
//! renders the text). Convert with e.g. `rsvg-convert -o x.png x.svg`.
//!
//! Invariant: the groups (workload, threads) and engines keep the order in
//! which the records came; a figure missing for an engine leaves a gap.

use std::path::Path;

use plotters::prelude::*;

use super::report::{workloads, Record, WorkloadResult};

/// Refuses a plot path that is not an .svg file.
pub fn check_path(p: &Path) -> Result<(), String> {
    match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(()),
        _ => Err(format!(
            "--plot {}: only .svg is supported (PNG needs system font libraries; \
             convert the SVG instead, e.g. with rsvg-convert)",
            p.display()
        )),
    }
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the records' workloads into `path`.
pub fn draw(records: &[Record], path: &Path) -> Result<(), String> {
    check_path(path)?;
    let ws = workloads(records);
    if ws.is_empty() {
        return Err("no workload figures to plot".into());
    }
    let mut groups: Vec<(String, usize)> = Vec::new();
    let mut engines: Vec<String> = Vec::new();
    for w in &ws {
        let g = (w.workload.clone(), w.threads);
        if !groups.contains(&g) {
            groups.push(g);
        }
        if !engines.contains(&w.engine) {
            engines.push(w.engine.clone());
        }
    }
    let title = format!(
        "YCSB, {} dataset, {} records, {} keys",
        ws[0].dataset, ws[0].records, ws[0].dist
    );
    let root = SVGBackend::new(path, (1000, 760)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(&title, ("sans-serif", 22)).map_err(e)?;
    let panels = root.split_evenly((2, 1));
    type Metric = fn(&WorkloadResult) -> f64;
    // Latencies of different engines differ by orders of magnitude: that
    // panel is drawn on a log scale (bars of log10 of the value).
    let metrics: [(&str, Metric, bool); 2] = [
        ("throughput (Mops/s)", |w| w.mops, false),
        ("p99 latency (us, log scale)", |w| w.p99_us, true),
    ];
    for (panel, (label, metric, log)) in panels.iter().zip(metrics) {
        let values: Vec<f64> = ws.iter().map(|w| metric(w)).collect();
        let (bottom, top) = if log {
            let pos = values.iter().copied().filter(|v| *v > 0.0);
            let lo = pos.clone().fold(f64::INFINITY, f64::min);
            let hi = pos.fold(0.0f64, f64::max);
            if hi > 0.0 {
                (
                    lo.log10().floor().min(0.0),
                    hi.log10().ceil().max(lo.log10().floor() + 1.0),
                )
            } else {
                (0.0, 1.0)
            }
        } else {
            let max = values.iter().copied().fold(0.0f64, f64::max);
            (0.0, if max > 0.0 { max * 1.15 } else { 1.0 })
        };
        let scale = move |v: f64| {
            if log {
                if v > 0.0 {
                    v.log10().max(bottom)
                } else {
                    bottom
                }
            } else {
                v
            }
        };
        let n = groups.len() as f64;
        let mut chart = ChartBuilder::on(panel)
            .margin(12)
            .x_label_area_size(34)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n, bottom..top)
            .map_err(e)?;
        let fmt = move |v: &f64| {
            if log {
                let x = 10f64.powf(*v);
                if x >= 1.0 {
                    format!("{x:.0}")
                } else {
                    format!("{x}")
                }
            } else {
                format!("{v:.2}")
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .y_desc(label)
            .y_labels(if log { (top - bottom) as usize + 1 } else { 10 })
            .y_label_formatter(&fmt)
            .draw()
            .map_err(e)?;
        let width = 0.8 / engines.len() as f64;
        for (ei, engine) in engines.iter().enumerate() {
            let color = COLORS[ei % COLORS.len()];
            let bars = ws.iter().filter(|w| &w.engine == engine).filter_map(|w| {
                let g = groups
                    .iter()
                    .position(|g| g.0 == w.workload && g.1 == w.threads)?;
                let x0 = g as f64 + 0.1 + ei as f64 * width;
                Some(Rectangle::new(
                    [(x0, bottom), (x0 + width * 0.92, scale(metric(w)))],
                    color.filled(),
                ))
            });
            chart
                .draw_series(bars)
                .map_err(e)?
                .label(engine.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        let labels = groups.iter().enumerate().map(|(i, (w, t))| {
            Text::new(
                format!("{w} ({t}t)"),
                (i as f64 + 0.38, bottom),
                ("sans-serif", 14).into_font().color(&BLACK),
            )
        });
        chart.draw_series(labels).map_err(e)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_svg_paths_are_accepted() {
        assert!(check_path(Path::new("a/b.svg")).is_ok());
        assert!(check_path(Path::new("b.SVG")).is_ok());
        assert!(check_path(Path::new("b.png"))
            .unwrap_err()
            .contains("only .svg"));
        assert!(check_path(Path::new("b")).is_err());
    }

    #[test]
    fn draws_an_svg_with_every_engine_and_workload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        let mut records = Vec::new();
        for (engine, mops) in [("flexdb", 1.0), ("rocksdb", 0.5)] {
            for wl in ["a", "c"] {
                records.push(Record::Workload(Box::new(WorkloadResult {
                    engine: engine.into(),
                    workload: wl.into(),
                    threads: 2,
                    mops,
                    p99_us: 10.0 / mops,
                    ..Default::default()
                })));
            }
        }
        draw(&records, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for s in ["flexdb", "rocksdb", "a (2t)", "c (2t)", "throughput"] {
            assert!(svg.contains(s), "{s} missing");
        }
        assert!(draw(&[], &path).is_err());
    }
}
