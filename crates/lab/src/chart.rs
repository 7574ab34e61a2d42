//! What the experiments plot, as plain data: charts, their series and the one kernel colour map. Drawing them
//! is the `plot` module's job and needs the `plots` feature; without it the charts are still built (cheaply)
//! but not drawn, and each summary says so once ([`super::figures`]).

/// Whether this build draws charts (the `plots` feature).
pub const DRAWN: bool = cfg!(feature = "plots");

/// What a summary says in place of its figures when the build cannot draw them.
pub const NOT_DRAWN: &str =
    "Charts were not drawn: lshbench was built without the `plots` feature.";

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A solid line (theory curves, measured lines).
    Line,
    /// A thin dark line marking theory.
    Theory,
    /// Markers joined by a line.
    LinePoints,
    /// Markers only.
    Points,
}

/// One named series. `err` holds (low, high) per point for error bars.
#[derive(Clone, Debug)]
pub struct Series {
    /// The legend entry (empty: none).
    pub label: String,
    /// (x, y) points; non-finite ones are skipped.
    pub points: Vec<(f64, f64)>,
    /// (low, high) per point, for error bars.
    pub err: Option<Vec<(f64, f64)>>,
    /// How it is drawn.
    pub style: Style,
    /// Index into the palette; kernels take theirs from [`kernel_color`], so a kernel has the same colour in
    /// every figure.
    pub color: usize,
}

impl Series {
    /// A series without error bars.
    pub fn new(
        label: impl Into<String>,
        points: Vec<(f64, f64)>,
        style: Style,
        color: usize,
    ) -> Self {
        Series {
            label: label.into(),
            points,
            err: None,
            style,
            color,
        }
    }

    /// The same series with error bars, (low, high) per point.
    pub fn with_err(mut self, err: Vec<(f64, f64)>) -> Self {
        self.err = Some(err);
        self
    }
}

/// One chart.
#[derive(Clone, Debug)]
pub struct Chart {
    /// The caption.
    pub title: String,
    /// The x axis' label.
    pub x_label: String,
    /// The y axis' label.
    pub y_label: String,
    /// Plot x on a log2 axis (ticks labelled with the original values).
    pub x_log2: bool,
    /// Fixed x range (default: the data's, padded).
    pub x_range: Option<(f64, f64)>,
    /// Fixed y range (default: the data's, padded).
    pub y_range: Option<(f64, f64)>,
    /// The series, drawn in order.
    pub series: Vec<Series>,
    /// Horizontal reference lines (e.g. the acceptance band), drawn dashed-grey.
    pub hlines: Vec<f64>,
    /// Where the legend goes: inside the plot (upper left), or, in a grid, one strip below every panel
    /// holding each label once (for charts whose points fill every corner).
    pub legend_below: bool,
}

impl Chart {
    /// An empty chart with a title and axis labels.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log2: false,
            x_range: None,
            y_range: None,
            series: Vec::new(),
            hlines: Vec::new(),
            legend_below: false,
        }
    }
}

/// Colours in the palette (`plot`): one per registered kernel, so no two kernels share one.
pub const PALETTE_LEN: usize = 12;

/// The colour of a kernel in every figure: its position in the registry (a name outside it gets the last
/// colour of the palette). Markers of colours 8 and up are triangles, so they differ in shape as well.
pub fn kernel_color(name: &str) -> usize {
    lshbench_core::kernel::KERNELS
        .iter()
        .position(|s| s.name == name)
        .unwrap_or(PALETTE_LEN - 1)
}

/// The distinct kernel names among `names`, in colour (registry) order; names that share a colour (those
/// outside the registry, such as `simd/b4`) keep the order of their first appearance.
pub fn kernels_in<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = std::collections::HashSet::new();
    let mut kernels: Vec<&str> = names.filter(|k| seen.insert(*k)).collect();
    kernels.sort_by_key(|k| kernel_color(k));
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_take_their_registry_colour_and_sort_by_it() {
        for (i, spec) in lshbench_core::kernel::KERNELS.iter().enumerate() {
            assert_eq!(kernel_color(spec.name), i);
        }
        assert_eq!(kernel_color("no-such-kernel"), PALETTE_LEN - 1);
        // Every registered kernel has a colour of its own.
        assert!(lshbench_core::kernel::KERNELS.len() <= PALETTE_LEN);
        let names = lshbench_core::kernel::names();
        let mut shuffled: Vec<&str> = names.iter().rev().copied().collect();
        shuffled.extend(names.iter().copied());
        assert_eq!(kernels_in(shuffled.into_iter()), names);
        // Names outside the registry share the last colour: each is listed once however the rows interleave.
        let rows = [
            "simd/b1",
            "simd/b2",
            "simd/b1",
            "simd",
            "simd/b2",
            "oph-opt/b1",
            "simd/b1",
        ];
        assert_eq!(
            kernels_in(rows.into_iter()),
            ["simd", "simd/b1", "simd/b2", "oph-opt/b1"]
        );
    }
}
