//! `timeline.svg`: per run, requests per second by outcome over time (false 404s and 503s in strong
//! colours), and under it a band per server coloured by the version it ran.

use std::path::Path;

use plotters::prelude::*;

use super::harm::{HarmKind, HarmMark};
use super::ledger::{Answer, RequestRecord, ServedByVersion, UpInterval};
use super::report::is_false_404;
use crate::api::catalog::KubeVersion;

/// Width of a bucket of the rate curves, in seconds.
const BUCKET: f64 = 0.5;

/// Height of a run's rate chart, in pixels.
const PANEL_HEIGHT: u32 = 330;

/// Height of one server's version band, in pixels.
const BAND_HEIGHT: u32 = 24;

/// Outcome series, in drawing order: (label, colour).
const SERIES: [(&str, RGBColor); 5] = [
    ("2xx", RGBColor(0x4c, 0x9a, 0x2a)),
    ("other 404s", RGBColor(0x99, 0x99, 0x99)),
    ("other errors", RGBColor(0xe0, 0x9f, 0x3e)),
    ("503", RGBColor(0x1f, 0x5f, 0xd0)),
    ("false 404", RGBColor(0xd0, 0x1f, 0x1f)),
];

/// One run to draw.
pub(crate) struct RunTimeline<'a> {
    /// Title of the panel.
    pub title: String,
    /// Its requests.
    pub requests: &'a [RequestRecord],
    /// When each server was up.
    pub up: &'a [UpInterval],
    /// What each version serves.
    pub served: &'a ServedByVersion,
    /// Server names by index.
    pub names: &'a [String],
    /// The run's length in seconds.
    pub length: f64,
    /// When the controller manager did harm (a tick each at the top of the chart).
    pub marks: &'a [HarmMark],
}

/// Harm marks: (kind, label, colour).
const MARKS: [(HarmKind, &str, RGBColor); 3] = [
    (
        HarmKind::WronglyDeleted,
        "dependent wrongly deleted",
        RGBColor(0x8b, 0x00, 0x8b),
    ),
    (
        HarmKind::Stuck,
        "namespace stuck 30 s",
        RGBColor(0x00, 0x00, 0x00),
    ),
    (
        HarmKind::Leaked,
        "namespace gone, objects leaked",
        RGBColor(0xa0, 0x52, 0x2d),
    ),
];

fn series_index(record: &RequestRecord, up: &[UpInterval], served: &ServedByVersion) -> usize {
    match record.answer {
        Answer::Status(code) if (200..400).contains(&code) => 0,
        Answer::Status(404) if is_false_404(record, up, served) => 4,
        Answer::Status(404) => 1,
        Answer::Status(503) => 3,
        _ => 2,
    }
}

/// Draws the runs one above the other into `path`.
pub(crate) fn draw(
    path: &Path,
    runs: &[RunTimeline<'_>],
    from: KubeVersion,
    to: KubeVersion,
) -> anyhow::Result<()> {
    let servers = runs.iter().map(|r| r.names.len()).max().unwrap_or(1);
    let panel = PANEL_HEIGHT + BAND_HEIGHT * u32::try_from(servers).unwrap_or(u32::MAX / 1024).min(1024);
    let height = panel * u32::try_from(runs.len().max(1)).unwrap_or(1);
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    for (run, area) in runs.iter().zip(root.split_evenly((runs.len().max(1), 1))) {
        draw_run(&area, run, from, to).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn draw_run(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    run: &RunTimeline<'_>,
    from: KubeVersion,
    to: KubeVersion,
) -> DrawResult {
    let buckets = (run.length / BUCKET).ceil().max(1.0) as usize;
    let mut rates = vec![vec![0.0f64; buckets]; SERIES.len()];
    for record in run.requests {
        let bucket = ((record.end / BUCKET) as usize).min(buckets - 1);
        rates[series_index(record, run.up, run.served)][bucket] += 1.0 / BUCKET;
    }
    let peak = rates.iter().flatten().copied().fold(1.0, f64::max);
    let bands_height = BAND_HEIGHT
        * u32::try_from(run.names.len())
            .unwrap_or(u32::MAX / 1024)
            .min(1024);
    let (upper, lower) = area.split_vertically(area.dim_in_pixel().1.saturating_sub(bands_height));

    let mut chart = ChartBuilder::on(&upper)
        .caption(&run.title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(24)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..run.length, 0.0..peak * 1.1)?;
    chart
        .configure_mesh()
        .y_desc("requests/s")
        .x_desc("seconds")
        .light_line_style(WHITE)
        .draw()?;
    for (index, (label, colour)) in SERIES.iter().enumerate() {
        let width = if index >= 3 { 2 } else { 1 };
        let points = rates[index]
            .iter()
            .enumerate()
            .map(|(b, r)| ((b as f64 + 0.5) * BUCKET, *r));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(width)))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
    }
    // A tick per harm at the top of the chart; only the kinds that happened get a legend entry.
    let top = peak * 1.1;
    for (kind, label, colour) in MARKS {
        // Harm seen after the rollout (a namespace stuck 30 s after its deletion) at the right edge.
        let ticks: Vec<f64> = run
            .marks
            .iter()
            .filter(|m| m.kind == kind)
            .map(|m| m.at.min(run.length))
            .collect();
        if ticks.is_empty() {
            continue;
        }
        chart
            .draw_series(
                ticks.into_iter().map(move |at| {
                    PathElement::new(vec![(at, top), (at, top * 0.93)], colour.stroke_width(2))
                }),
            )?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x + 8, y - 6), (x + 8, y + 6)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;

    // The version bands share the chart's x range (same margins, so the axes line up).
    let servers = run.names.len().max(1);
    let mut bands = ChartBuilder::on(&lower)
        .margin_left(8)
        .margin_right(8)
        .y_label_area_size(56)
        .x_label_area_size(0)
        .build_cartesian_2d(0.0..run.length, 0.0..servers as f64)?;
    let colour = |version: KubeVersion| {
        if version == from {
            RGBColor(0xb8, 0xc7, 0xe0)
        } else if version == to {
            RGBColor(0x7a, 0x5c, 0xc2)
        } else {
            RGBColor(0x88, 0x88, 0x88)
        }
    };
    bands.draw_series(run.up.iter().map(|i| {
        let row = (servers - 1 - i.server) as f64;
        let until = i.until.unwrap_or(run.length);
        Rectangle::new(
            [(i.from, row + 0.15), (until, row + 0.85)],
            colour(i.version).filled(),
        )
    }))?;
    bands.draw_series(run.up.iter().map(|i| {
        let row = (servers - 1 - i.server) as f64;
        let name = run.names.get(i.server).map(String::as_str).unwrap_or("?");
        Text::new(
            format!("{name} {}.{}", i.version.major, i.version.minor),
            (i.from + 0.1, row + 0.75),
            ("sans-serif", 12),
        )
    }))?;
    Ok(())
}
