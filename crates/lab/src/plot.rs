//! Plots with plotters, written as PNG and SVG: axis labels, a legend, error bars, and a theory curve
//! overlaid where there is one. A grid of small multiples has one legend per panel, or one strip below them all
//! (`Chart::legend_below`).
//!
//! plotters is built with only its `ab_glyph` text backend (no system fonts), so the DejaVu Sans font shipped in
//! `data/fonts/` is compiled in and registered as "sans-serif" before the first plot.
//!
//! Only with the `plots` feature; the charts themselves are [`super::chart`]'s plain data.

use super::chart::{Chart, PALETTE_LEN, Style};
use crate::error::ExperimentError;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../../../data/fonts/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The bytes are a valid TrueType font shipped with the repository; a failure here is a build defect.
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| ())
            .expect("data/fonts/DejaVuSans.ttf is not a valid font");
    });
}

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// A plotters error, with the chart or file it concerns.
fn plot_error(what: impl std::fmt::Display, e: impl std::fmt::Debug) -> ExperimentError {
    ExperimentError::Plot {
        what: what.to_string(),
        message: format!("{e:?}"),
    }
}

/// The palette behind [`super::chart::Series::color`] (and so [`super::chart::kernel_color`]): one colour per
/// registered kernel (the first eight are the classic category colours; four more keep the `oph-opt/HASH`
/// families apart from them).
const PALETTE: [RGBColor; PALETTE_LEN] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
    RGBColor(120, 0, 60),
];

/// The palette colour for `i`.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Whether series of colour `i` are drawn with triangles rather than circles (colours past the classic eight).
fn triangle(i: usize) -> bool {
    i % PALETTE.len() >= 8
}

fn ranges(c: &Chart) -> ((f64, f64), (f64, f64)) {
    let tx = |x: f64| if c.x_log2 { x.log2() } else { x };
    let mut xs = (f64::INFINITY, f64::NEG_INFINITY);
    let mut ys = (f64::INFINITY, f64::NEG_INFINITY);
    for s in &c.series {
        for (i, &(x, y)) in s.points.iter().enumerate() {
            if !x.is_finite() || !y.is_finite() {
                continue;
            }
            xs = (xs.0.min(tx(x)), xs.1.max(tx(x)));
            ys = (ys.0.min(y), ys.1.max(y));
            if let Some(&(lo, hi)) = s.err.as_ref().and_then(|e| e.get(i)) {
                ys = (ys.0.min(lo), ys.1.max(hi));
            }
        }
    }
    for &h in &c.hlines {
        ys = (ys.0.min(h), ys.1.max(h));
    }
    if !xs.0.is_finite() {
        xs = (0.0, 1.0);
    }
    if !ys.0.is_finite() {
        ys = (0.0, 1.0);
    }
    let pad = |(a, b): (f64, f64), frac: f64| {
        let w = if b > a { b - a } else { a.abs().max(1.0) };
        (a - w * frac, b + w * frac)
    };
    let x = c
        .x_range
        .map(|(a, b)| (tx(a), tx(b)))
        .unwrap_or_else(|| pad(xs, 0.03));
    let y = c.y_range.unwrap_or_else(|| pad(ys, 0.06));
    (x, y)
}

fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart, font: u32) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| plot_error(&c.title, e);
    let ((x0, x1), (y0, y1)) = ranges(c);
    let log2 = c.x_log2;
    let width = area.dim_in_pixel().0;
    let (caption_font, _) = fit_title(
        area,
        &c.title,
        font + 4,
        font.saturating_sub(2).max(8),
        width,
    );
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", caption_font))
        .margin(8)
        .x_label_area_size(font * 2 + 14)
        .y_label_area_size(font * 3 + 18)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    let fmt_x = move |v: &f64| {
        if log2 {
            format!("{}", 2f64.powf(*v).round())
        } else {
            format!("{v:.2}")
        }
    };
    chart
        .configure_mesh()
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style(("sans-serif", font))
        .axis_desc_style(("sans-serif", font + 2))
        .x_label_formatter(&fmt_x)
        .x_labels(if log2 {
            ((x1 - x0).round() as usize + 1).max(2)
        } else {
            8
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    for &h in &c.hlines {
        chart
            .draw_series(LineSeries::new(
                vec![(x0, h), (x1, h)],
                RGBColor(150, 150, 150).stroke_width(1),
            ))
            .map_err(e)?;
    }
    let tx = |x: f64| if log2 { x.log2() } else { x };
    let mut labelled = false;
    for s in &c.series {
        let col = if s.style == Style::Theory {
            RGBColor(0, 0, 0)
        } else {
            color(s.color)
        };
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| (tx(x), y))
            .collect();
        if let Some(err) = &s.err {
            let bars: Vec<_> = s
                .points
                .iter()
                .zip(err)
                .filter(|((x, _), (lo, hi))| x.is_finite() && lo.is_finite() && hi.is_finite())
                .map(|(&(x, _), &(lo, hi))| PathElement::new(vec![(tx(x), lo), (tx(x), hi)], col))
                .collect();
            chart.draw_series(bars).map_err(e)?;
        }
        let anno = match s.style {
            Style::Line => chart
                .draw_series(LineSeries::new(pts, col.stroke_width(2)))
                .map_err(e)?,
            Style::Theory => chart
                .draw_series(LineSeries::new(pts, col.stroke_width(1)))
                .map_err(e)?,
            Style::LinePoints | Style::Points => {
                if s.style == Style::LinePoints {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), col.stroke_width(1)))
                        .map_err(e)?;
                }
                if triangle(s.color) {
                    chart
                        .draw_series(
                            pts.into_iter()
                                .map(|p| TriangleMarker::new(p, 4, col.filled())),
                        )
                        .map_err(e)?
                } else {
                    chart
                        .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, col.filled())))
                        .map_err(e)?
                }
            }
        };
        if !s.label.is_empty() && !c.legend_below {
            labelled = true;
            let anno = anno.label(s.label.clone());
            if triangle(s.color) && s.style != Style::Theory {
                anno.legend(move |(x, y)| {
                    EmptyElement::at((x + 9, y)) + TriangleMarker::new((0, 0), 4, col.filled())
                });
            } else {
                anno.legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
            }
        }
    }
    if labelled {
        let points = c.series.iter().flat_map(|s| {
            s.points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(move |&(x, y)| (tx(x), y))
        });
        chart
            .configure_series_labels()
            .label_font(("sans-serif", font))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(emptiest_corner(points, (x0, x1), (y0, y1)))
            .draw()
            .map_err(e)?;
    }
    Ok(())
}

/// The corner of the plot where the legend covers the fewest points: each corner's box is 45% of the plot's
/// width and height, and ties go to the first of upper left, lower right, upper right, lower left.
fn emptiest_corner(
    points: impl Iterator<Item = (f64, f64)>,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> SeriesLabelPosition {
    const BOX: f64 = 0.45;
    // Upper left, lower right, upper right, lower left: (left side?, top side?).
    let corners = [(true, true), (false, false), (false, true), (true, false)];
    let mut counts = [0usize; 4];
    let (w, h) = (
        (x1 - x0).max(f64::MIN_POSITIVE),
        (y1 - y0).max(f64::MIN_POSITIVE),
    );
    for (x, y) in points {
        let (fx, fy) = ((x - x0) / w, (y - y0) / h);
        for (count, &(left, top)) in counts.iter_mut().zip(&corners) {
            let in_x = if left { fx <= BOX } else { fx >= 1.0 - BOX };
            let in_y = if top { fy >= 1.0 - BOX } else { fy <= BOX };
            if in_x && in_y {
                *count += 1;
            }
        }
    }
    let best = (0..4).min_by_key(|&i| (counts[i], i)).unwrap_or(0);
    match corners[best] {
        (true, true) => SeriesLabelPosition::UpperLeft,
        (false, false) => SeriesLabelPosition::LowerRight,
        (false, true) => SeriesLabelPosition::UpperRight,
        (true, false) => SeriesLabelPosition::LowerLeft,
    }
}

/// The largest font size from `max` down to `min` at which `title` fits in `width` pixels less a margin, and
/// the title as lines: one, or two cut at the separator nearest its middle when even `min` is too wide.
fn fit_title<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    max: u32,
    min: u32,
    width: u32,
) -> (u32, Vec<String>) {
    let room = width.saturating_sub(16);
    let fits = |text: &str, size: u32| {
        area.estimate_text_size(text, &("sans-serif", size).into_text_style(area))
            .map(|(w, _)| w <= room)
            .unwrap_or(true)
    };
    for size in (min..=max).rev() {
        if fits(title, size) {
            return (size, vec![title.to_string()]);
        }
    }
    // Cut after ", " (the comma stays on the first line) or before " (" (the parenthesis opens the second).
    let middle = title.len() / 2;
    let cuts = title
        .match_indices(", ")
        .map(|(i, _)| (i + 1, i + 2))
        .chain(title.match_indices(" (").map(|(i, _)| (i, i + 1)));
    match cuts.min_by_key(|&(end, _)| end.abs_diff(middle)) {
        Some((end, start)) => {
            let (first, second) = (title[..end].to_string(), title[start..].to_string());
            let size = (min..=max)
                .rev()
                .find(|&s| fits(&first, s) && fits(&second, s))
                .unwrap_or(min);
            (size, vec![first, second])
        }
        None => (min, vec![title.to_string()]),
    }
}

/// Writes `stem.png` and `stem.svg`.
pub fn save(c: &Chart, stem: &Path) -> Result<()> {
    register_font();
    let size = (900, 600);
    let png = stem.with_extension("png");
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| plot_error(png.display(), e))?;
        draw(&root, c, 14)?;
        root.present().map_err(|e| plot_error(png.display(), e))?;
    }
    let svg = stem.with_extension("svg");
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| plot_error(svg.display(), e))?;
        draw(&root, c, 14)?;
        root.present().map_err(|e| plot_error(svg.display(), e))?;
    }
    Ok(())
}

/// Writes a grid of small multiples, `cols` per row, as `stem.png` and `stem.svg`.
pub fn save_grid(title: &str, charts: &[Chart], cols: usize, stem: &Path) -> Result<()> {
    register_font();
    let cols = cols.max(1);
    let rows = charts.len().div_ceil(cols).max(1);
    // Room for a title of two lines (`fit_title`).
    let size = (
        360 * cols as u32,
        280 * rows as u32 + 64 + strip_height(&legend_strip(charts), cols),
    );
    fn grid<DB: DrawingBackend>(
        root: DrawingArea<DB, Shift>,
        title: &str,
        charts: &[Chart],
        rows: usize,
        cols: usize,
    ) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| plot_error(title, e))?;
        let width = root.dim_in_pixel().0;
        let (size, lines) = fit_title(&root, title, 20, 14, width);
        let mut root = root;
        for line in &lines {
            root = root
                .titled(line, ("sans-serif", size))
                .map_err(|e| plot_error(title, e))?;
        }
        let strip = legend_strip(charts);
        let (panels, below) = if strip.is_empty() {
            (root.clone(), None)
        } else {
            let h = root.dim_in_pixel().1 as i32;
            let (top, bottom) = root.split_vertically(h - strip_height(&strip, cols) as i32);
            (top, Some(bottom))
        };
        for (area, c) in panels.split_evenly((rows, cols)).iter().zip(charts) {
            draw(area, c, 11)?;
        }
        if let Some(area) = below {
            draw_strip(&area, &strip, cols, title)?;
        }
        root.present().map_err(|e| plot_error(title, e))?;
        Ok(())
    }
    grid(
        BitMapBackend::new(&stem.with_extension("png"), size).into_drawing_area(),
        title,
        charts,
        rows,
        cols,
    )?;
    grid(
        SVGBackend::new(&stem.with_extension("svg"), size).into_drawing_area(),
        title,
        charts,
        rows,
        cols,
    )?;
    Ok(())
}

/// The entries of a grid's shared legend: every labelled series of a `legend_below` chart, each label once,
/// in order of appearance, with its colour and whether it is drawn as points.
fn legend_strip(charts: &[Chart]) -> Vec<(String, usize, Style)> {
    let mut out: Vec<(String, usize, Style)> = Vec::new();
    for c in charts.iter().filter(|c| c.legend_below) {
        for s in &c.series {
            if !s.label.is_empty() && !out.iter().any(|(l, _, _)| *l == s.label) {
                out.push((s.label.clone(), s.color, s.style));
            }
        }
    }
    out
}

/// Entries per row of the legend strip: one per 180 pixels of a grid `cols` panels (360 pixels each) wide.
fn strip_columns(cols: usize) -> usize {
    2 * cols.max(1)
}

/// Pixels the legend strip takes (0 without entries).
fn strip_height(strip: &[(String, usize, Style)], cols: usize) -> u32 {
    if strip.is_empty() {
        0
    } else {
        12 + 20 * strip.len().div_ceil(strip_columns(cols)) as u32
    }
}

/// Draws the shared legend strip: a marker (or a line) and the label per entry, in rows.
fn draw_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    strip: &[(String, usize, Style)],
    cols: usize,
    title: &str,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| plot_error(title, e);
    let per_row = strip_columns(cols);
    let width = area.dim_in_pixel().0 as i32 / per_row as i32;
    let font = ("sans-serif", 12).into_font().color(&BLACK);
    for (n, (label, i, style)) in strip.iter().enumerate() {
        let x = 16 + width * (n % per_row) as i32;
        let y = 10 + 20 * (n / per_row) as i32;
        let points = matches!(style, Style::Points | Style::LinePoints);
        let col = if *style == Style::Theory {
            RGBColor(0, 0, 0)
        } else {
            color(*i)
        };
        if points && triangle(*i) {
            area.draw(&TriangleMarker::new((x + 9, y), 5, col.filled()))
                .map_err(e)?;
        } else if points {
            area.draw(&Circle::new((x + 9, y), 4, col.filled()))
                .map_err(e)?;
        } else {
            area.draw(&PathElement::new(
                vec![(x, y), (x + 18, y)],
                col.stroke_width(2),
            ))
            .map_err(e)?;
        }
        area.draw(&Text::new(label.clone(), (x + 24, y - 7), font.clone()))
            .map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::Series;

    #[test]
    fn the_legend_goes_to_the_corner_with_the_fewest_points() {
        let range = ((0.0, 1.0), (0.0, 1.0));
        let curve =
            |f: fn(f64) -> f64| (0..=40).map(move |i| (i as f64 / 40.0, f(i as f64 / 40.0)));
        // An S-curve that rises early fills the upper left: the legend goes to the lower right.
        let early = emptiest_corner(
            curve(|s| 1.0 - (1.0 - s.powi(3)).powi(42)),
            range.0,
            range.1,
        );
        assert!(matches!(early, SeriesLabelPosition::LowerRight));
        // One that rises late leaves the upper left empty.
        let late = emptiest_corner(
            curve(|s| 1.0 - (1.0 - s.powi(10)).powi(10)),
            range.0,
            range.1,
        );
        assert!(matches!(late, SeriesLabelPosition::UpperLeft));
        // No points: the first choice.
        assert!(matches!(
            emptiest_corner(std::iter::empty(), range.0, range.1),
            SeriesLabelPosition::UpperLeft
        ));
    }

    #[test]
    fn a_title_too_wide_shrinks_then_splits_in_two() {
        register_font();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.svg");
        let area = SVGBackend::new(&path, (360, 100)).into_drawing_area();
        let (size, lines) = fit_title(&area, "short", 20, 14, 360);
        assert_eq!((size, lines), (20, vec!["short".to_string()]));
        let long = "Empirical S-curves of 1-bit slots, |A u B| = 1000, against the slot agreement \
                    P = 2^-1 + (1 - 2^-1) J on the x axis (bars: 95% Wilson)";
        let (size, lines) = fit_title(&area, long, 20, 14, 700);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(size >= 14);
        for line in &lines {
            let (w, _) = area
                .estimate_text_size(line, &("sans-serif", size).into_text_style(&area))
                .unwrap();
            assert!(w <= 700 - 16, "{line}: {w} px");
        }
        assert_eq!(lines.join(" "), long);
    }

    #[test]
    fn charts_and_grids_are_written_as_png_and_svg_with_their_labels() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Chart::new("S-curve 20x5", "Jaccard similarity", "P(candidate)");
        let theory: Vec<(f64, f64)> = (0..=20)
            .map(|i| {
                let s = i as f64 / 20.0;
                (s, 1.0 - (1.0 - s.powi(5)).powi(20))
            })
            .collect();
        c.series
            .push(Series::new("theory", theory.clone(), Style::Theory, 0));
        c.series.push(
            Series::new("scalar", theory.clone(), Style::Points, 0).with_err(
                theory
                    .iter()
                    .map(|&(_, y)| (y * 0.9, (y * 1.1).min(1.0)))
                    .collect(),
            ),
        );
        let stem = dir.path().join("s");
        save(&c, &stem).unwrap();
        let png = std::fs::metadata(dir.path().join("s.png")).unwrap();
        assert!(png.len() > 1000);
        let svg = std::fs::read_to_string(dir.path().join("s.svg")).unwrap();
        assert!(svg.contains("Jaccard similarity") && svg.contains("theory"));

        let mut log = Chart::new("rel MSE", "k", "relative MSE");
        log.x_log2 = true;
        log.hlines = vec![1.0];
        log.series.push(Series::new(
            "simd",
            vec![(32.0, 1.0), (512.0, 0.98)],
            Style::LinePoints,
            1,
        ));
        save_grid("grid", &[c.clone(), log.clone()], 2, &dir.path().join("g")).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("g.svg")).unwrap();
        assert!(svg.contains("512") && svg.contains("relative MSE"));
        // A shared legend strip below the panels holds each label once (a triangle for colours past eight).
        log.legend_below = true;
        log.series[0].color = 9;
        let mut other = log.clone();
        other.series[0].points = vec![(64.0, 1.0)];
        save_grid("grid", &[c, log, other], 3, &dir.path().join("h")).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("h.svg")).unwrap();
        assert_eq!(svg.matches("simd").count(), 1, "{svg}");
    }
}
