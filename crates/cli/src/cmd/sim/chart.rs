//! Charts of a simulation: the autonuma-benchmark convergence chart and a per-comparison overview.
//!
//! The convergence chart is the one autonuma-benchmark draws for every test run (seed 001): one
//! chart per process, X = simulated time (s), Y = the process's resident memory (MiB), one line per
//! NUMA node. Memory that starts on one node and is then spread or pulled to where its threads run
//! shows as lines crossing over time:
//!
//! ```text
//!  MiB                       numa01 pid 1 (autonuma, seed 1)
//!  3072 |====\                                  ---- node 0
//!       |     \_____                            ---- node 1
//!  1536 |       ____X============
//!       |  ____/
//!     0 |_/____________________________ s
//! ```
//!
//! Each listed node's line carries a few marks of a shape of its own (circle, square, triangle,
//! cross), shown in the legend too, so lines are told apart without their colour and lines lying
//! on one another all show.
//!
//! A dashed vertical line marks when the process's accesses became 90% local for good (the
//! table's "converged"); the legend gives the time, or "not reached".
//!
//! The overview chart has one bar per policy, in that policy's own colour: mean runtime (or
//! throughput, for open-ended workloads) with a whisker of one sample standard deviation over the
//! seeds. When the processes count different units (the process mix) there is no single figure:
//! a group of bars per process, one per policy, each the process's throughput over the baseline's
//! (`default`, else the first policy), like the per-process table.
//!
//! Both are written as SVG (plotters' SVG backend) and PNG (plotters' bitmap backend). Text needs a
//! font file; we load DejaVu Sans from the Debian package `fonts-dejavu-core` at run time (no
//! fontconfig). Without it the charts are still drawn, lines, grid and bars, but without any text,
//! and one warning says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::anyhow;
use numapilot_sim::result::{Comparison, PolicyResult, ProcessSeries, RunResult, Stat};
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordu32};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Pixel size of every chart (SVG user units and PNG pixels).
pub const SIZE: (u32, u32) = (960, 600);

/// Most legend entries a convergence chart lists (more do not fit its height at 20 px a line).
pub const LEGEND_MAX: usize = 16;

/// Width of the legend column on the right of a convergence chart, px.
const LEGEND_WIDTH: u32 = 150;

/// Where the font is looked for, in order. `fonts-dejavu-core` installs the first.
pub const FONT_PATHS: [&str; 2] =
    ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf"];

/// Environment variable naming a TrueType/OpenType font file to use instead of [`FONT_PATHS`].
pub const FONT_ENV: &str = "NUMAPILOT_CHART_FONT";

/// Font family name the font is registered under with plotters.
const FAMILY: &str = "sans-serif";

/// Whether chart text can be drawn: loads and registers the font on the first call, and warns once on
/// stderr when there is none.
pub fn text_available() -> bool {
    static LOADED: OnceLock<bool> = OnceLock::new();
    *LOADED.get_or_init(|| {
        let candidates: Vec<PathBuf> = match std::env::var_os(FONT_ENV) {
            Some(p) => vec![PathBuf::from(p)],
            None => FONT_PATHS.iter().map(PathBuf::from).collect(),
        };
        for path in &candidates {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps fonts for the life of the process: leaking the one file we load is
                // exactly that lifetime.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
                eprintln!("numapilot: warning: {} is not a usable font; charts are drawn without text", path.display());
                return false;
            }
        }
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "numapilot: warning: no font at {}; charts are drawn without text (install fonts-dejavu-core or set {FONT_ENV})",
            tried.join(" or ")
        );
        false
    })
}

/// Room a convergence chart leaves left of 0 s and below 0 MiB, as a share of the axis's span: a
/// line at 0 MiB (a node holding none of the process) or a move at 0 s ran along the axis, half
/// hidden by it.
const EDGE_ROOM: f64 = 0.02;

/// Colour of the line marking when a process became 90% local for good.
const CONVERGED: RGBColor = BLACK;

/// Font size of a chart's title, px.
const TITLE_SIZE: u32 = 20;

/// Most lines a title takes: a longer one is cut (with "…") rather than pushing the plot down.
const TITLE_LINES: usize = 3;

/// Width of `s` in the chart font at `size` px, px; 0 without the font.
fn text_width(s: &str, size: u32) -> u32 {
    (FAMILY, f64::from(size)).into_font().box_size(s).map_or(0, |(w, _)| w)
}

/// `s` cut in the middle with "…" to fit `width` px at `size`: both ends stay (a process's name
/// starts and its "(pid N)" ends a title's last part).
fn fit_middle(s: &str, width: u32, size: u32) -> String {
    if text_width(s, size) <= width {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut keep = chars.len();
    while keep > 0 {
        keep -= 1;
        let head = keep.div_ceil(2);
        let tail = keep / 2;
        let cut: String = chars[..head].iter().chain(['…'].iter()).chain(chars[chars.len() - tail..].iter()).collect();
        if text_width(&cut, size) <= width {
            return cut;
        }
    }
    "…".to_string()
}

/// The lines of `title` drawn `width` px wide: its " / "-separated parts packed into as few lines
/// as fit, each part wider than a line cut in the middle, at most [`TITLE_LINES`] (the rest joined
/// into the last and cut). A title too wide for the chart was drawn centred past both edges, so
/// the machine and the process, its first and last parts, were lost.
fn title_lines(title: &str, width: u32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in title.split(" / ") {
        let part = fit_middle(part, width, TITLE_SIZE);
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} / {part}"), TITLE_SIZE) <= width => {
                line.push_str(" / ");
                line.push_str(&part);
            }
            _ => lines.push(part),
        }
    }
    if lines.len() > TITLE_LINES {
        let rest = lines.split_off(TITLE_LINES - 1).join(" / ");
        lines.push(fit_middle(&rest, width, TITLE_SIZE));
    }
    lines
}

/// Draws `title` centred across the top of `root` (wrapped by [`title_lines`]) and returns the
/// area below it.
fn draw_title<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    let width = root.dim_in_pixel().0;
    let lines = title_lines(title, width.saturating_sub(16));
    let line_height = TITLE_SIZE as i32 + 4;
    let style = TextStyle::from((FAMILY, TITLE_SIZE)).pos(Pos::new(HPos::Center, VPos::Top));
    for (k, line) in lines.iter().enumerate() {
        root.draw(&Text::new(line.as_str(), (width as i32 / 2, 5 + k as i32 * line_height), style.clone()))?;
    }
    Ok(root.split_vertically(10 + lines.len() as u32 * line_height as u32).1)
}

/// Colour of the line of the `i`-th node: the ten Tableau colours (distinguishable, readable on
/// white), then hues spread by the golden ratio so bigger machines do not repeat a colour soon.
fn node_colour(i: usize) -> RGBColor {
    const PALETTE: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    if let Some(&(r, g, b)) = PALETTE.get(i) {
        return RGBColor(r, g, b);
    }
    let hue = (i as f64 * 0.618_033_988_75).fract();
    let (r, g, b) = HSLColor(hue, 0.7, 0.42).to_backend_color().rgb;
    RGBColor(r, g, b)
}

/// Colour of a policy's bars: fixed by its name (Okabe and Ito's colour-blind-safe palette, the
/// baseline `default` grey), so a policy has one colour on every chart whatever the order of
/// `--policy`; any other name gets a hue of its own from a hash of the name. Bars were coloured by
/// their position with the node colours: `default` blue on one chart, `numapilot` on the next.
fn policy_colour(policy: &str) -> RGBColor {
    match policy {
        "default" => RGBColor(128, 128, 128),
        "hard-bind" => RGBColor(0, 114, 178),
        "inverse-bind" => RGBColor(213, 94, 0),
        "interleave" => RGBColor(204, 121, 167),
        "autonuma" => RGBColor(86, 180, 233),
        "numapilot" => RGBColor(0, 158, 115),
        "numad" => RGBColor(230, 159, 0),
        other => {
            // FNV-1a: stable across runs and builds, unlike the standard library's hasher.
            let h =
                other.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            let (r, g, b) = HSLColor((h % 360) as f64 / 360.0, 0.6, 0.45).to_backend_color().rgb;
            RGBColor(r, g, b)
        }
    }
}

/// Marks a convergence chart puts along each listed node's line.
const MARKERS: usize = 8;

/// The samples of `series` that carry the marks of the `k`-th of `listed` nodes: every
/// `listed`-th sample (at most every fourth) from the `k`-th, so lines lying on one another show
/// marks at different samples; at most [`MARKERS`] of them, spread evenly.
fn marker_samples(series: &[numapilot_sim::result::SeriesPoint], k: usize, listed: usize) -> Vec<usize> {
    let stride = listed.clamp(1, 4);
    let candidates: Vec<usize> = (k % stride..series.len()).step_by(stride).collect();
    if candidates.len() <= MARKERS {
        return candidates;
    }
    (0..MARKERS).map(|m| candidates[(2 * m + 1) * candidates.len() / (2 * MARKERS)]).collect()
}

/// Draws node `i`'s mark centred at `at` (px of `area`): a circle, square, triangle or cross by
/// `i` modulo 4, in the node's colour. Colour alone told the lines apart, which readers who do
/// not see red from green (nodes 2 and 3) could not.
fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    i: usize,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let colour = node_colour(i);
    match i % 4 {
        0 => area.draw(&Circle::new((x, y), 4, colour.filled())),
        1 => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], colour.filled())),
        2 => area.draw(&TriangleMarker::new((x, y), 6, colour.filled())),
        _ => area.draw(&Cross::new((x, y), 4, colour.stroke_width(2))),
    }
}

/// A file-name-safe version of `s`: ASCII letters, digits, `-` and `_` kept, the rest `_`.
pub fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Most characters of a process's name in its chart's file name (ASCII after [`file_safe`]).
const NAME_IN_FILE: usize = 64;

/// The convergence chart of one process of one run.
#[derive(Debug, Clone, Copy)]
pub struct ProcessChart<'a> {
    /// Machine name (title).
    pub machine: &'a str,
    /// Workload name (title).
    pub workload: &'a str,
    /// Policy name (title).
    pub policy: &'a str,
    /// The run the process belongs to (seed, node ids).
    pub run: &'a RunResult,
    /// The process.
    pub process: &'a ProcessSeries,
}

impl ProcessChart<'_> {
    /// Title line: machine, workload, policy, seed, process.
    pub fn title(&self) -> String {
        format!(
            "{} / {} / {} / seed {} / {} (pid {})",
            self.machine, self.workload, self.policy, self.run.seed, self.process.name, self.process.pid
        )
    }

    /// File name without extension: `<policy>-seed<seed>-pid<pid>-<name>`, the name cut to
    /// [`NAME_IN_FILE`] characters (the pid keeps it unique): a workload's 300-character process
    /// name made a file name past the file system's 255 bytes, and the run failed after all its
    /// simulations (review helper-53).
    fn stem_name(&self) -> String {
        let mut name = file_safe(&self.process.name);
        name.truncate(NAME_IN_FILE);
        format!("{}-seed{}-pid{}-{}", file_safe(self.policy), self.run.seed, self.process.pid, name)
    }

    /// Indices (into `run.nodes`) of the nodes the legend lists: all of them up to
    /// [`LEGEND_MAX`] nodes; on bigger machines the nodes that ever held memory of the process, the
    /// [`LEGEND_MAX`] with the highest peak if more, in node order.
    fn legend_nodes(&self) -> Vec<usize> {
        let n = self.run.nodes.len();
        if n <= LEGEND_MAX {
            return (0..n).collect();
        }
        let peak = |i: usize| self.process.series.iter().filter_map(|p| p.mem_mib.get(i).copied()).fold(0.0, f64::max);
        let mut held: Vec<(usize, f64)> = (0..n).map(|i| (i, peak(i))).filter(|&(_, m)| m > 0.0).collect();
        held.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        held.truncate(LEGEND_MAX);
        let mut out: Vec<usize> = held.into_iter().map(|(i, _)| i).collect();
        out.sort_unstable();
        out
    }

    /// Axis ends: the last sample's time (at least 1 s) and 5% above the largest per-node figure
    /// (at least 1 MiB). The axes start [`EDGE_ROOM`] below 0.
    fn ranges(&self) -> (f64, f64) {
        let t_max = self.process.series.iter().map(|p| p.t_s).fold(0.0_f64, f64::max);
        let m_max = self.process.series.iter().flat_map(|p| p.mem_mib.iter().copied()).fold(0.0_f64, f64::max);
        (if t_max > 0.0 { t_max } else { 1.0 }, if m_max > 0.0 { m_max * 1.05 } else { 1.0 })
    }
}

impl Chart for ProcessChart<'_> {
    fn stem(&self) -> String {
        self.stem_name()
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        text: bool,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        self.draw_titled(root, text, &self.title())
    }
}

impl ProcessChart<'_> {
    /// Draws the chart with `title` as its title line.
    fn draw_titled<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        text: bool,
        title: &str,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let (t_max, m_max) = self.ranges();
        // With text: the title across the top, the legend in a column on the right (never over
        // the lines), the plot in the rest.
        let (plot, side) = if text {
            let area = draw_title(root, title)?;
            let width = area.dim_in_pixel().0;
            let (plot, side) = area.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
            (plot, Some(side))
        } else {
            (root.clone(), None)
        };
        let mut builder = ChartBuilder::on(&plot);
        builder.margin(16);
        if text {
            builder.x_label_area_size(44).y_label_area_size(72);
        }
        let (t_min, m_min) = (-t_max * EDGE_ROOM, -m_max * EDGE_ROOM);
        let mut chart = builder.build_cartesian_2d(t_min..t_max, m_min..m_max)?;
        if text {
            let x_fmt = axis_format(t_max);
            let y_fmt = axis_format(m_max);
            chart
                .configure_mesh()
                .x_desc("time (s)")
                .y_desc("memory (MiB)")
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&y_fmt)
                .label_style((FAMILY, 14))
                .axis_desc_style((FAMILY, 15))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()?;
        } else {
            draw_plain_grid(&mut chart, (t_min, t_max), (m_min, m_max))?;
        }
        for i in 0..self.run.nodes.len() {
            let points: Vec<(f64, f64)> =
                self.process.series.iter().map(|p| (p.t_s, p.mem_mib.get(i).copied().unwrap_or(0.0))).collect();
            // One sample (a run shorter than the sampling interval) is a line of no length, which
            // drew nothing: the node's mark shows it.
            if let [point] = points[..] {
                draw_marker(root, chart.backend_coord(&point), i)?;
            }
            chart.draw_series(LineSeries::new(points, node_colour(i).stroke_width(2)))?;
        }
        // Each listed node's marks along its line, after all lines so none is hidden.
        let in_legend = self.legend_nodes();
        if self.process.series.len() > 1 {
            for (pos, &i) in in_legend.iter().enumerate() {
                for s in marker_samples(&self.process.series, pos, in_legend.len()) {
                    let p = &self.process.series[s];
                    let at = chart.backend_coord(&(p.t_s, p.mem_mib.get(i).copied().unwrap_or(0.0)));
                    draw_marker(root, at, i)?;
                }
            }
        }
        // When the process became 90% local for good: a dashed vertical line, named in the legend.
        if let Some(t) = self.process.converge_s.filter(|t| t.is_finite()) {
            let t = t.clamp(0.0, t_max);
            chart.draw_series(DashedLineSeries::new(vec![(t, m_min), (t, m_max)], 6, 4, CONVERGED.stroke_width(1)))?;
        }
        if self.process.series.is_empty() && text {
            let style = TextStyle::from((FAMILY, 16)).pos(Pos::new(HPos::Center, VPos::Center));
            chart.plotting_area().draw(&Text::new("no samples", (t_max / 2.0, m_max / 2.0), style))?;
        }
        if let Some(side) = side {
            let mut y = 40;
            side.draw(&Text::new("NUMA node", (8, y - 8), (FAMILY, 15)))?;
            for &i in &in_legend {
                y += 20;
                side.draw(&Rectangle::new([(6, y - 1), (26, y + 1)], node_colour(i).filled()))?;
                draw_marker(&side, (16, y), i)?;
                side.draw(&Text::new(format!("node {}", self.run.nodes[i]), (30, y - 6), (FAMILY, 14)))?;
            }
            let hidden = self.run.nodes.len() - in_legend.len();
            if hidden > 0 {
                y += 20;
                let text = format!("+{} not listed", crate::cmd::plural(hidden, "node"));
                side.draw(&Text::new(text, (8, y - 8), (FAMILY, 13)))?;
            }
            y += 34;
            let when = match self.process.converge_s {
                Some(t) if t < 100.0 => format!("from {t:.1} s"),
                Some(t) => format!("from {t:.0} s"),
                None => "not reached".to_string(),
            };
            if self.process.converge_s.is_some() {
                side.draw(&DashedPathElement::new(vec![(8, y), (26, y)], 6, 4, CONVERGED.stroke_width(1)))?;
            }
            side.draw(&Text::new("90% local", (30, y - 6), (FAMILY, 14)))?;
            side.draw(&Text::new(when, (30, y + 12), (FAMILY, 14)))?;
        }
        root.present()
    }
}

/// The convergence chart of one process of a real run (`numapilot bench`), with the caller's
/// title and file stem: X = seconds since the start, Y = the process's memory per node (MiB), one
/// line per node of `nodes` (kernel ids, the index of every `mem_mib` of `process.series`).
struct TitledChart<'a> {
    title: &'a str,
    stem: &'a str,
    inner: ProcessChart<'a>,
}

impl Chart for TitledChart<'_> {
    fn stem(&self) -> String {
        file_safe(self.stem)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        text: bool,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        self.inner.draw_titled(root, text, self.title)
    }
}

/// Writes the memory-per-node-over-time chart of one process of a real run as
/// `<dir>/<stem>.svg` and `.png` (stem made file-name safe) and returns their paths: the same
/// drawing as [`ProcessChart`], with a title of the caller's instead of machine / policy / seed.
pub fn write_memory_chart(
    dir: &Path,
    stem: &str,
    title: &str,
    nodes: &[u32],
    process: &ProcessSeries,
    text: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let run = RunResult {
        seed: 0,
        nodes: nodes.to_vec(),
        runtime_s: process.finish_s.unwrap_or(0.0),
        throughput: None,
        throughput_unit: None,
        local_access_pct: 0.0,
        pages_migrated: 0,
        converge_s: process.converge_s,
        processes: Vec::new(),
        alloc_failures: 0,
        engine: None,
    };
    let inner = ProcessChart { machine: "", workload: "", policy: "", run: &run, process };
    TitledChart { title, stem, inner }.write(dir, text)
}

/// Tick label format for an axis running from 0 to `max`: whole numbers from 20 up, one decimal
/// below.
fn axis_format(max: f64) -> impl Fn(&f64) -> String {
    move |v: &f64| if max >= 20.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// Tick label format for an axis of counts running from 0 to `max`: as [`axis_format`] below
/// 10,000, above it in thousands (`k`), millions (`M`) or billions (`G`), one suffix for the
/// whole axis (0 is plain 0). Nine-digit throughputs ran into the axis's description.
fn count_format(max: f64) -> impl Fn(&f64) -> String {
    let (scale, suffix) = match max {
        m if m >= 1e10 => (1e9, "G"),
        m if m >= 1e7 => (1e6, "M"),
        m if m >= 1e4 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let plain = axis_format(max);
    move |v: &f64| {
        if suffix.is_empty() || *v == 0.0 {
            return plain(v);
        }
        let x = format!("{:.1}", v / scale);
        format!("{}{suffix}", x.strip_suffix(".0").unwrap_or(&x))
    }
}

/// A grid of ten divisions each way and the plot frame, drawn as plain lines: the mesh without
/// labels, for when there is no font.
fn draw_plain_grid<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    (x_min, x_max): (f64, f64),
    (y_min, y_max): (f64, f64),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let grid = RGBColor(235, 235, 235);
    for k in 1..10 {
        let x = x_max * f64::from(k) / 10.0;
        let y = y_max * f64::from(k) / 10.0;
        chart.plotting_area().draw(&PathElement::new(vec![(x, y_min), (x, y_max)], grid))?;
        chart.plotting_area().draw(&PathElement::new(vec![(x_min, y), (x_max, y)], grid))?;
    }
    chart.plotting_area().draw(&Rectangle::new([(x_min, y_min), (x_max, y_max)], BLACK))
}

/// The coordinates of an overview bar chart: one segment per bar or group of bars, and the figure.
type BarCoord = Cartesian2d<SegmentedCoord<RangedCoordu32>, RangedCoordf64>;

/// The axes of an overview bar chart from 0 to `y_max`. With `names` (there is a font): the mesh
/// with grid lines across, `y_fmt` ticks, the y axis described as `what` and each segment's name
/// under it. Without: only the frame of the plot.
fn draw_bar_axes<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, BarCoord>,
    y_max: f64,
    names: Option<Vec<String>>,
    y_fmt: &dyn Fn(&f64) -> String,
    what: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let Some(names) = names else {
        return chart
            .plotting_area()
            .draw(&Rectangle::new([(SegmentValue::Exact(0), 0.0), (SegmentValue::Last, y_max)], BLACK));
    };
    let count = names.len().max(1);
    let label = move |v: &SegmentValue<u32>| match v {
        SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_label_formatter(y_fmt)
        .x_labels(count)
        .x_label_formatter(&label)
        .y_desc(what)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
}

/// A whisker of one standard deviation on a bar, in pixels: a line at `x` from `y_lo` to `y_hi`
/// with a cap `cap` px either side at each end.
fn draw_whisker<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    x: i32,
    (y_lo, y_hi): (i32, i32),
    cap: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let style = BLACK.stroke_width(2);
    root.draw(&PathElement::new(vec![(x, y_lo), (x, y_hi)], style))?;
    root.draw(&PathElement::new(vec![(x - cap, y_lo), (x + cap, y_lo)], style))?;
    root.draw(&PathElement::new(vec![(x - cap, y_hi), (x + cap, y_hi)], style))
}

/// One process's group of bars on the overview: its name, and per policy (mean, stddev) of its
/// throughput over the baseline's, `None` where a seed has no figure.
type ProcessBars<'a> = (&'a str, Vec<Option<(f64, f64)>>);

/// The overview chart of a comparison: one bar per policy with a one-stddev whisker.
#[derive(Debug, Clone, Copy)]
pub struct OverviewChart<'a> {
    /// The comparison.
    pub comparison: &'a Comparison,
}

impl OverviewChart<'_> {
    /// Whether the bars are throughput (every policy has one) rather than runtime.
    fn by_throughput(&self) -> bool {
        !self.comparison.policies.is_empty() && self.comparison.policies.iter().all(|p| p.throughput.is_some())
    }

    /// For a workload whose processes count different units (no single throughput: the process
    /// mix), each open-ended process's throughput per policy over the seeds, as a ratio to the
    /// baseline's (`default` if it ran, else the first policy): (baseline, [(process, per policy
    /// (mean, stddev) or `None` where a seed has no figure)]). `None` when there is a single figure
    /// or no such process. The processes are the per-process table's.
    fn per_process(&self) -> Option<(&str, Vec<ProcessBars<'_>>)> {
        let c = self.comparison;
        if self.by_throughput() {
            return None;
        }
        let first = c.policies.first()?.runs.first()?;
        let base = c.policies.iter().position(|p| p.policy == super::table::BASELINE).unwrap_or(0);
        let stat = |p: &PolicyResult, i: usize| {
            let xs: Vec<f64> = p.runs.iter().filter_map(|r| r.processes.get(i)?.throughput).collect();
            (!xs.is_empty() && xs.len() == p.runs.len()).then(|| Stat::of(&xs))
        };
        let mut rows = Vec::new();
        for (i, proc) in first.processes.iter().enumerate() {
            if proc.throughput.is_none() {
                continue;
            }
            let Some(b) = stat(&c.policies[base], i).map(|s| s.mean).filter(|m| m.is_finite() && *m > 0.0) else {
                continue;
            };
            let bars = c
                .policies
                .iter()
                .map(|p| stat(p, i).map(|s| (finite_or_zero(s.mean / b), finite_or_zero(s.stddev / b))))
                .collect();
            rows.push((proc.name.as_str(), bars));
        }
        (!rows.is_empty()).then(|| (c.policies[base].policy.as_str(), rows))
    }

    /// The overview of a workload whose processes count different units: a group of bars per
    /// process, one bar per policy (its colour, named in the legend on the right), each the
    /// process's throughput over the baseline's. Its runtime is only the simulated duration, the
    /// same for every policy, which is what the chart showed before.
    fn draw_per_process<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        text: bool,
        base: &str,
        rows: &[ProcessBars<'_>],
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let c = self.comparison;
        let top = rows.iter().flat_map(|(_, v)| v.iter().flatten()).map(|(m, s)| m + s).fold(0.0_f64, f64::max);
        let y_max = if top > 0.0 { top * 1.1 } else { 1.0 };
        let what = format!("throughput / {base}'s");
        let (plot, side) = if text {
            let title = format!(
                "{} / {} / throughput per process over {base}'s, {}, mean and stddev",
                c.machine,
                c.workload,
                crate::cmd::plural(c.seeds.len(), "seed")
            );
            let area = draw_title(root, &title)?;
            let width = area.dim_in_pixel().0;
            let (plot, side) = area.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
            (plot, Some(side))
        } else {
            (root.clone(), None)
        };
        let n = rows.len() as u32;
        let mut builder = ChartBuilder::on(&plot);
        builder.margin(16);
        if text {
            builder.x_label_area_size(44).y_label_area_size(72);
        }
        let mut chart = builder.build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y_max)?;
        // Each process's group of bars spans its segment, px.
        let spans: Vec<(i32, i32)> = (0..n)
            .map(|g| {
                let (x0, _) = chart.backend_coord(&(SegmentValue::Exact(g), 0.0));
                let (x1, _) = chart.backend_coord(&(SegmentValue::Exact(g + 1), 0.0));
                (x0, x1)
            })
            .collect();
        let (x0, x1) = spans[0];
        let group_width = (x1 - x0).max(1) as u32;
        let names = text.then(|| rows.iter().map(|(p, _)| fit_middle(p, group_width.saturating_sub(6), 14)).collect());
        draw_bar_axes(&mut chart, y_max, names, &axis_format(y_max), &what)?;
        let k = c.policies.len().max(1) as i32;
        for (g, (_, bars)) in rows.iter().enumerate() {
            let (gx0, gx1) = spans[g];
            let pad = (gx1 - gx0) / 10;
            let width = ((gx1 - gx0 - 2 * pad) / k).max(1);
            for (j, (bar, policy)) in bars.iter().zip(&c.policies).enumerate() {
                let Some((mean, sd)) = *bar else { continue };
                let bx0 = gx0 + pad + j as i32 * width;
                let (_, y0) = chart.backend_coord(&(SegmentValue::Exact(0), 0.0));
                let (_, y1) = chart.backend_coord(&(SegmentValue::Exact(0), mean));
                root.draw(&Rectangle::new(
                    [(bx0 + 1, y1), (bx0 + width - 1, y0)],
                    policy_colour(&policy.policy).filled(),
                ))?;
                if sd > 0.0 {
                    let (_, y_lo) = chart.backend_coord(&(SegmentValue::Exact(0), (mean - sd).max(0.0)));
                    let (_, y_hi) = chart.backend_coord(&(SegmentValue::Exact(0), mean + sd));
                    draw_whisker(root, bx0 + width / 2, (y_lo, y_hi), (width / 3).clamp(1, 8))?;
                }
            }
        }
        if let Some(side) = side {
            let mut y = 40;
            side.draw(&Text::new("policy", (8, y - 8), (FAMILY, 15)))?;
            for p in &c.policies {
                y += 20;
                side.draw(&Rectangle::new([(8, y - 5), (24, y + 5)], policy_colour(&p.policy).filled()))?;
                let name = fit_middle(&p.policy, LEGEND_WIDTH - 40, 14);
                side.draw(&Text::new(name, (30, y - 6), (FAMILY, 14)))?;
            }
        }
        root.present()
    }

    /// (policy, mean, stddev) of the figure the bars show.
    fn bars(&self) -> Vec<(&str, f64, f64)> {
        let by_tp = self.by_throughput();
        self.comparison
            .policies
            .iter()
            .map(|p: &PolicyResult| {
                let s = if by_tp { p.throughput.unwrap_or(p.runtime_s) } else { p.runtime_s };
                (p.policy.as_str(), finite_or_zero(s.mean), finite_or_zero(s.stddev))
            })
            .collect()
    }
}

impl Chart for OverviewChart<'_> {
    fn stem(&self) -> String {
        "overview".to_string()
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        text: bool,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        if let Some((base, rows)) = self.per_process() {
            return self.draw_per_process(root, text, base, &rows);
        }
        let bars = self.bars();
        let n = bars.len().max(1) as u32;
        let top = bars.iter().map(|(_, m, s)| m + s).fold(0.0_f64, f64::max);
        let y_max = if top > 0.0 { top * 1.1 } else { 1.0 };
        let what = match (&self.comparison.throughput_unit, self.by_throughput()) {
            (Some(unit), true) => format!("throughput ({unit})"),
            (None, true) => "throughput".to_string(),
            (_, false) => "runtime (s)".to_string(),
        };
        let plot = if text {
            let title = format!(
                "{} / {} / {} over {}, mean and stddev",
                self.comparison.machine,
                self.comparison.workload,
                what,
                crate::cmd::plural(self.comparison.seeds.len(), "seed")
            );
            draw_title(root, &title)?
        } else {
            root.clone()
        };
        let mut builder = ChartBuilder::on(&plot);
        builder.margin(16);
        if text {
            builder.x_label_area_size(44).y_label_area_size(88);
        }
        let mut chart = builder.build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y_max)?;
        let names = text.then(|| bars.iter().map(|(p, _, _)| p.to_string()).collect());
        draw_bar_axes(&mut chart, y_max, names, &count_format(y_max), &what)?;
        for (i, (policy, mean, sd)) in bars.iter().enumerate() {
            let i = i as u32;
            let colour = policy_colour(policy);
            let bar =
                Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), *mean)], colour.filled());
            let mut bar = bar;
            bar.set_margin(0, 0, 18, 18);
            chart.draw_series(std::iter::once(bar))?;
            if *sd > 0.0 {
                let (lo, hi) = ((mean - sd).max(0.0), mean + sd);
                // Mean - sd to mean + sd at the bar's centre.
                let (x, y_lo) = chart.backend_coord(&(SegmentValue::CenterOf(i), lo));
                let (_, y_hi) = chart.backend_coord(&(SegmentValue::CenterOf(i), hi));
                draw_whisker(root, x, (y_lo, y_hi), 8)?;
            }
        }
        root.present()
    }
}

fn finite_or_zero(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// [`segment_paths::SegmentPaths`]: the bitmap backend behind the PNGs. A module of its own for
/// the backend trait's types, whose `stroke_width` would clash with the `Color` one here.
mod segment_paths {
    use plotters::prelude::{BitMapBackend, DrawingBackend};
    use plotters_backend::{BackendColor, BackendCoord, BackendStyle, DrawingErrorKind};

    /// The bitmap backend, drawing a path wider than a pixel one segment at a time. plotters turns
    /// such a path into one polygon around it and fills that by parity: where the path doubles back
    /// (a spike of one sample, up and straight down in one pixel column) the two sides cancel, and
    /// the PNG lost what the SVG showed.
    pub struct SegmentPaths<'a>(pub BitMapBackend<'a>);

    impl<'a> DrawingBackend for SegmentPaths<'a> {
        type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

        fn get_size(&self) -> (u32, u32) {
            self.0.get_size()
        }

        fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.0.ensure_prepared()
        }

        fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.0.present()
        }

        fn draw_pixel(
            &mut self,
            point: BackendCoord,
            color: BackendColor,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.0.draw_pixel(point, color)
        }

        fn draw_line<S: BackendStyle>(
            &mut self,
            from: BackendCoord,
            to: BackendCoord,
            style: &S,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.0.draw_line(from, to, style)
        }

        fn draw_rect<S: BackendStyle>(
            &mut self,
            upper_left: BackendCoord,
            bottom_right: BackendCoord,
            style: &S,
            fill: bool,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.0.draw_rect(upper_left, bottom_right, style, fill)
        }

        fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            path: I,
            style: &S,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            if style.stroke_width() <= 1 {
                return self.0.draw_path(path, style);
            }
            let points: Vec<BackendCoord> = path.into_iter().collect();
            if points.len() < 3 {
                return self.0.draw_path(points, style);
            }
            for pair in points.windows(2) {
                self.0.draw_path(pair.iter().copied(), style)?;
            }
            Ok(())
        }

        fn blit_bitmap(
            &mut self,
            pos: BackendCoord,
            size: (u32, u32),
            src: &[u8],
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.0.blit_bitmap(pos, size, src)
        }
    }
}
use segment_paths::SegmentPaths;

/// A chart that can be drawn on any plotters backend.
pub trait Chart {
    /// File name without extension.
    fn stem(&self) -> String;
    /// Draws the chart on `root`; with `text` false, no text at all (no font needed).
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        text: bool,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>;

    /// Writes `<dir>/<stem>.svg` and `<dir>/<stem>.png`; returns their paths.
    fn write(&self, dir: &Path, text: bool) -> anyhow::Result<Vec<PathBuf>> {
        let stem = self.stem();
        let svg_path = dir.join(format!("{stem}.svg"));
        let png_path = dir.join(format!("{stem}.png"));
        // Drawn in memory, then written: a file that cannot be written is an I/O error naming it
        // (the backends' own file errors print as Debug structs: "ImageError(IoError(Os { ... }))").
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            self.draw(&root, text).map_err(|e| anyhow!("drawing {}: {e}", svg_path.display()))?;
        }
        std::fs::write(&svg_path, svg).map_err(|e| anyhow!("writing {}: {e}", svg_path.display()))?;
        let mut rgb = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
        {
            let root = SegmentPaths(BitMapBackend::with_buffer(&mut rgb, SIZE)).into_drawing_area();
            self.draw(&root, text).map_err(|e| anyhow!("drawing {}: {e}", png_path.display()))?;
            root.present().map_err(|e| anyhow!("drawing {}: {e}", png_path.display()))?;
        }
        let mut bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut bytes, SIZE.0, SIZE.1);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(|e| anyhow!("encoding {}: {e}", png_path.display()))?;
            w.write_image_data(&rgb).map_err(|e| anyhow!("encoding {}: {e}", png_path.display()))?;
        }
        std::fs::write(&png_path, bytes).map_err(|e| anyhow!("writing {}: {e}", png_path.display()))?;
        Ok(vec![svg_path, png_path])
    }
}

/// Writes every chart of a comparison under `dir` (created if needed): the overview, and the
/// convergence chart of every process of every run. Returns the files written.
pub fn write_all(comparison: &Comparison, dir: &Path, text: bool) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow!("creating {}: {e}", dir.display()))?;
    let mut files = OverviewChart { comparison }.write(dir, text)?;
    for policy in &comparison.policies {
        for run in &policy.runs {
            for process in &run.processes {
                let chart = ProcessChart {
                    machine: &comparison.machine,
                    workload: &comparison.workload,
                    policy: &policy.policy,
                    run,
                    process,
                };
                files.extend(chart.write(dir, text)?);
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::sim::sample;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("numapilot-chart-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// (stroke colour, number of points) of every 2-pixel-wide polyline: the data lines (axes,
    /// ticks and grid are 1 pixel wide, legend marks are rectangles).
    fn data_lines(svg: &str) -> Vec<(String, usize)> {
        svg.lines()
            .filter(|l| l.contains("<polyline") && l.contains("stroke-width=\"2\""))
            .map(|l| {
                let attr = |name: &str| {
                    let start = l.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                    l[start..start + l[start..].find('"').unwrap()].to_string()
                };
                (attr("stroke"), attr("points").split_whitespace().count())
            })
            .collect()
    }

    fn png_size(path: &Path) -> (u32, u32) {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        // Not blank: the image holds more than the background colour.
        let first = &buf[..3];
        assert!(buf.chunks(3).any(|px| px != first), "{} is a single colour", path.display());
        (info.width, info.height)
    }

    /// One `<text>` of an SVG: its string and the box it covers, (x0, y0, x1, y1) px, measured
    /// with the chart font as plotters lays it out (the size it drew at is the SVG's over 1.24).
    #[derive(Debug)]
    struct TextBox {
        text: String,
        x0: f64,
        y0: f64,
        x1: f64,
        y1: f64,
    }

    fn text_boxes(svg: &str) -> Vec<TextBox> {
        let mut out = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find("<text ") {
            let tag_end = start + rest[start..].find('>').unwrap();
            let tag = &rest[start..tag_end];
            let body_end = tag_end + rest[tag_end..].find("</text>").unwrap();
            let text = rest[tag_end + 1..body_end]
                .trim()
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&");
            rest = &rest[body_end..];
            let attr = |name: &str| {
                let k = tag.find(&format!(" {name}=\"")).map(|i| i + name.len() + 3)?;
                Some(&tag[k..k + tag[k..].find('"').unwrap()])
            };
            let num = |name: &str| attr(name).unwrap().parse::<f64>().unwrap();
            let (x, y, em) = (num("x"), num("y"), num("font-size"));
            let size = em * 1.24;
            let w = f64::from((FAMILY, size).into_font().box_size(&text).unwrap().0);
            let dx0 = match attr("text-anchor").unwrap() {
                "start" => 0.0,
                "middle" => -w / 2.0,
                _ => -w,
            };
            let dy0 = match attr("dy").unwrap() {
                "0.76em" => 0.0,
                "0.5ex" => -em / 2.0,
                _ => -em,
            };
            let (dx1, dy1) = (dx0 + w, dy0 + em);
            let (x0, y0, x1, y1) = match attr("transform") {
                None => (x + dx0, y + dy0, x + dx1, y + dy1),
                // rotate(270, x, y): (dx, dy) -> (dy, -dx).
                Some(t) if t.starts_with("rotate(270") => (x + dy0, y - dx1, x + dy1, y - dx0),
                Some(t) => panic!("unexpected transform {t}"),
            };
            out.push(TextBox { text, x0, y0, x1, y1 });
        }
        out
    }

    /// Every text of `svg` lies inside the chart and no two overlap (1 px of slack).
    fn assert_text_fits(svg: &str, what: &str) {
        let boxes = text_boxes(svg);
        assert!(!boxes.is_empty(), "{what}: no text");
        let (w, h) = (f64::from(SIZE.0), f64::from(SIZE.1));
        for b in &boxes {
            assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= w && b.y1 <= h, "{what}: {b:?} is outside the {w}x{h} chart");
        }
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let overlap_x = a.x1.min(b.x1) - a.x0.max(b.x0);
                let overlap_y = a.y1.min(b.y1) - a.y0.max(b.y0);
                assert!(overlap_x <= 1.0 || overlap_y <= 1.0, "{what}: {a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn long_names_make_titles_that_stay_inside_the_chart() {
        if !text_available() {
            return; // nothing to measure without the font
        }
        let mut c = sample::comparison();
        c.machine = "a-machine-file-with-a-long-name-describing-the-box-in-detail.toml".to_string();
        c.workload = "a-rather-long-workload-name-for-a-database-beside-a-batch-job".to_string();
        let long = "postgres-primary-with-a-very-long-process-name-that-goes-on-and-on-".repeat(4);
        c.policies[1].runs[0].processes[1].name = long.clone();
        let dir = tmp("titles");
        let files = write_all(&c, &dir, true).unwrap();
        for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "svg")) {
            let svg = std::fs::read_to_string(f).unwrap();
            assert_text_fits(&svg, &f.display().to_string());
        }
        // Each part of the title is there; the long name cut in the middle keeps its start and the pid.
        let stem = format!("autonuma-seed1-pid2-{}", &file_safe(&long)[..NAME_IN_FILE]);
        let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap();
        let title: Vec<String> = text_boxes(&svg).into_iter().filter(|b| b.y0 < 60.0).map(|b| b.text).collect();
        let title = title.join(" / ");
        for part in
            [c.machine.as_str(), c.workload.as_str(), "autonuma", "seed 1", "postgres-primary-with", "…", "(pid 2)"]
        {
            assert!(title.contains(part), "{part} missing from the title {title:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn big_throughputs_have_short_ticks_and_the_unit_on_the_axis() {
        let mut c = sample::comparison();
        c.throughput_unit = Some("ops/s".to_string());
        for (p, mean) in c.policies.iter_mut().zip([181_752_594.0, 147_080_213.0]) {
            p.throughput = Some(Stat { mean, stddev: mean / 50.0 });
        }
        let f = count_format(2e8);
        assert_eq!((f(&0.0), f(&2e7), f(&1.5e8)), ("0".to_string(), "20M".to_string(), "150M".to_string()));
        assert_eq!(count_format(1.2e5)(&2e4), "20k");
        assert_eq!(count_format(50.0)(&20.0), "20");
        if !text_available() {
            return;
        }
        let dir = tmp("throughput");
        let files = OverviewChart { comparison: &c }.write(&dir, true).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert_text_fits(&svg, "overview");
        let texts: Vec<String> = text_boxes(&svg).into_iter().map(|b| b.text).collect();
        assert!(texts.iter().any(|t| t == "throughput (ops/s)"), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains("throughput (ops/s) over 2 seeds")), "{texts:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// How many of node `i`'s marks (see [`draw_marker`]) `svg` has.
    fn marks(svg: &str, i: usize) -> usize {
        let colour = hex(node_colour(i));
        let fill = format!("fill=\"{colour}\"");
        let of = |tag: &str, extra: &str| {
            svg.lines().filter(|l| l.starts_with(tag) && l.contains(&fill) && l.contains(extra)).count()
        };
        match i % 4 {
            0 => of("<circle", ""),
            1 => of("<rect", "width=\"8\" height=\"8\""),
            2 => of("<polygon", ""),
            _ => {
                svg.lines().filter(|l| l.starts_with("<line") && l.contains(&format!("stroke=\"{colour}\""))).count()
                    / 2
            }
        }
    }

    #[test]
    fn nodes_have_marks_of_their_own_shape_even_on_one_another() {
        // Four nodes holding the same 100 MiB all along: their four lines are one line.
        let mut c = sample::comparison();
        let run = &mut c.policies[0].runs[0];
        run.nodes = vec![0, 1, 2, 3];
        for p in &mut run.processes[0].series {
            p.mem_mib = vec![100.0; 4];
        }
        let run = &c.policies[0].runs[0];
        let chart = ProcessChart { machine: "m", workload: "w", policy: "default", run, process: &run.processes[0] };
        let dir = tmp("marks");
        for text in [false, true] {
            if text && !text_available() {
                continue;
            }
            let svg = std::fs::read_to_string(&chart.write(&dir, text).unwrap()[0]).unwrap();
            for i in 0..4 {
                // Along the line, and with text one in the legend.
                assert_eq!(marks(&svg, i), MARKERS + usize::from(text), "node {i}: {svg}");
            }
            if text {
                assert_text_fits(&svg, "marks");
            }
        }
        // The marks of lines on one another are at different samples.
        let series = &run.processes[0].series;
        let at: Vec<Vec<usize>> = (0..4).map(|i| marker_samples(series, i, 4)).collect();
        for i in 0..4 {
            assert_eq!(at[i].len(), MARKERS, "{at:?}");
            for j in i + 1..4 {
                assert!(at[i].iter().all(|k| !at[j].contains(k)), "nodes {i} and {j} share a sample: {at:?}");
            }
        }
        // So are they on a short run (15 samples: numa02 on article-4n96), each node with some.
        let short = &series[..15];
        let at: Vec<Vec<usize>> = (0..4).map(|i| marker_samples(short, i, 4)).collect();
        assert_eq!(at, [vec![0, 4, 8, 12], vec![1, 5, 9, 13], vec![2, 6, 10, 14], vec![3, 7, 11]]);
        // Two nodes take turns; one node has a mark at every sample of a short run.
        assert_eq!(marker_samples(&series[..6], 1, 2), [1, 3, 5]);
        assert_eq!(marker_samples(&series[..4], 0, 1), [0, 1, 2, 3]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_sample_is_a_dot_and_none_is_said() {
        let mut c = sample::comparison();
        let run = &mut c.policies[1].runs[0];
        run.processes[0].series.truncate(1);
        run.processes[0].series[0].mem_mib = vec![100.0, 300.0];
        run.processes[1].series.clear();
        let run = &c.policies[1].runs[0];
        let dir = tmp("one-sample");
        for text in [false, true] {
            if text && !text_available() {
                continue;
            }
            let one = ProcessChart { machine: "m", workload: "w", policy: "autonuma", run, process: &run.processes[0] };
            let files = one.write(&dir, text).unwrap();
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            for i in 0..2 {
                // The sample's mark, and with text the legend's.
                assert_eq!(marks(&svg, i), 1 + usize::from(text), "node {i} of one sample: {svg}");
            }
            // The PNG shows both colours.
            let decoder = png::Decoder::new(std::fs::File::open(&files[1]).unwrap());
            let mut reader = decoder.read_info().unwrap();
            let mut buf = vec![0; reader.output_buffer_size()];
            reader.next_frame(&mut buf).unwrap();
            for i in 0..2 {
                let c = node_colour(i);
                assert!(
                    buf.chunks(3).any(|px| px == [c.0, c.1, c.2]),
                    "node {i}'s colour is not in {}",
                    files[1].display()
                );
            }
            let none =
                ProcessChart { machine: "m", workload: "w", policy: "autonuma", run, process: &run.processes[1] };
            let files = none.write(&dir, text).unwrap();
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            assert_eq!(svg.contains("no samples"), text, "{svg}");
            if text {
                assert_text_fits(&svg, "no samples");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The x of every point of the first data line of `svg`, px.
    fn first_line_xs(svg: &str) -> Vec<i32> {
        let l = svg.lines().find(|l| l.contains("<polyline") && l.contains("stroke-width=\"2\"")).unwrap();
        let pts = &l[l.find("points=\"").unwrap() + 8..];
        pts[..pts.find('"').unwrap()]
            .split_whitespace()
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn the_time_a_process_became_90_percent_local_is_marked() {
        let c = sample::comparison();
        let dir = tmp("converged");
        // autonuma seed 1 converged at 20 s; default never did.
        let (converged, never) = (&c.policies[1].runs[0], &c.policies[0].runs[0]);
        // The SVG of the second process of `run` under `policy`.
        let svg_of = |policy: &str, run: &RunResult, text: bool| {
            let chart = ProcessChart { machine: "m", workload: "w", policy, run, process: &run.processes[1] };
            std::fs::read_to_string(&chart.write(&dir, text).unwrap()[0]).unwrap()
        };
        for text in [false, true] {
            if text && !text_available() {
                continue;
            }
            let svg = svg_of("autonuma", converged, text);
            // The samples are a second apart from 0 s: the 21st point is at 20 s.
            let x20 = first_line_xs(&svg)[20];
            // Black 1 px segments at x(20 s): the dashes (and, with text, the axis's tick at 20 s).
            let marks = |svg: &str, x: i32| {
                svg.lines()
                    .filter(|l| l.contains("<polyline") && l.contains("stroke=\"#000000\" stroke-width=\"1\""))
                    .filter(|l| l.contains(&format!("points=\"{x},")))
                    .count()
            };
            assert!(marks(&svg, x20) >= 5, "a dashed line at x = {x20} px: {svg}");
            assert_eq!(svg.contains("90% local") && svg.contains("from 20.0 s"), text, "{svg}");
            if text {
                assert_text_fits(&svg, "converged");
            }
            let svg = svg_of("default", never, text);
            let x20 = first_line_xs(&svg)[20];
            assert!(marks(&svg, x20) <= 1, "no mark where none converged: {svg}");
            assert_eq!(svg.contains("not reached"), text, "{svg}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    #[test]
    fn one_line_per_node_per_process_in_svg_and_a_png_of_the_chart_size() {
        for text in [true, false] {
            if text && !text_available() {
                continue; // no font here: the text-less run below still checks the drawing
            }
            let c = sample::comparison();
            let dir = tmp(&format!("all-{text}"));
            let files = write_all(&c, &dir, text).unwrap();
            // overview + 2 policies x 2 seeds x 2 processes, each as SVG and PNG.
            assert_eq!(files.len(), 2 * (1 + 2 * 2 * 2));
            let run = &c.policies[1].runs[0];
            let chart = ProcessChart {
                machine: &c.machine,
                workload: &c.workload,
                policy: "autonuma",
                run,
                process: &run.processes[1],
            };
            assert_eq!(chart.stem(), "autonuma-seed1-pid2-numa01");
            let svg = std::fs::read_to_string(dir.join("autonuma-seed1-pid2-numa01.svg")).unwrap();
            let lines = data_lines(&svg);
            let points = run.processes[1].series.len();
            assert_eq!(lines, vec![(hex(node_colour(0)), points), (hex(node_colour(1)), points)], "text {text}");
            assert_eq!(svg.contains("node 1"), text);
            assert_eq!(svg.contains(&chart.title()), text);
            assert_eq!(svg.contains("<text"), text);
            for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "png")) {
                assert_eq!(png_size(f), SIZE, "{}", f.display());
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn line_heights_follow_the_memory_per_node() {
        // Node 0 of pid 2 under autonuma falls from 3072 MiB to 0 at 20 s; node 1 rises to 3072:
        // in SVG pixels y grows downwards, so node 0's last point is lower (bigger y) than its first.
        let c = sample::comparison();
        let dir = tmp("heights");
        let run = &c.policies[1].runs[0];
        let chart = ProcessChart {
            machine: &c.machine,
            workload: &c.workload,
            policy: "autonuma",
            run,
            process: &run.processes[1],
        };
        chart.write(&dir, false).unwrap();
        let svg = std::fs::read_to_string(dir.join(format!("{}.svg", chart.stem()))).unwrap();
        let ys: Vec<Vec<i32>> = svg
            .lines()
            .filter(|l| l.contains("<polyline") && l.contains("stroke-width=\"2\""))
            .map(|l| {
                let pts = &l[l.find("points=\"").unwrap() + 8..];
                pts[..pts.find('"').unwrap()]
                    .split_whitespace()
                    .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
                    .collect()
            })
            .collect();
        assert_eq!(ys.len(), 2);
        let (n0, n1) = (&ys[0], &ys[1]);
        assert!(n0.first().unwrap() < n0.last().unwrap(), "node 0 should fall: {n0:?}");
        assert!(n1.first().unwrap() > n1.last().unwrap(), "node 1 should rise: {n1:?}");
        assert_eq!(n0.first(), n1.last(), "3072 MiB is the same height on both lines");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn overview_has_a_bar_per_policy_even_for_one() {
        let mut c = sample::comparison();
        let dir = tmp("overview");
        let files = OverviewChart { comparison: &c }.write(&dir, false).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        let bar = |colour: RGBColor| svg.matches(&format!("fill=\"{}\"", hex(colour))).count();
        assert_eq!((bar(policy_colour("default")), bar(policy_colour("autonuma"))), (1, 1), "{svg}");
        // A whisker with two caps per bar (both policies have a spread over their two seeds).
        let whiskers =
            svg.lines().filter(|l| l.contains("<polyline") && l.contains("stroke=\"#000000\" stroke-width=\"2\""));
        assert_eq!(whiskers.count(), 2 * 3, "{svg}");
        c.policies.truncate(1);
        let files = OverviewChart { comparison: &c }.write(&dir, false).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert_eq!(svg.matches(&format!("fill=\"{}\"", hex(policy_colour("default")))).count(), 1);
        assert_eq!(png_size(&files[1]), SIZE);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lines_at_zero_stay_clear_of_the_frame() {
        // default's pid 2: node 0 holds 3072 MiB from 0 s, node 1 none, all run long.
        let c = sample::comparison();
        let run = &c.policies[0].runs[0];
        let chart = ProcessChart { machine: "m", workload: "w", policy: "default", run, process: &run.processes[1] };
        let dir = tmp("edges");
        let svg = std::fs::read_to_string(&chart.write(&dir, false).unwrap()[0]).unwrap();
        let frame = svg.lines().find(|l| l.starts_with("<rect") && l.contains("fill=\"none\"")).unwrap();
        let attr = |name: &str| -> i32 {
            let k = frame.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            frame[k..k + frame[k..].find('"').unwrap()].parse().unwrap()
        };
        let (left, top) = (attr("x"), attr("y"));
        let (right, bottom) = (left + attr("width"), top + attr("height"));
        let lines: Vec<Vec<(i32, i32)>> = svg
            .lines()
            .filter(|l| l.contains("<polyline") && l.contains("stroke-width=\"2\""))
            .map(|l| {
                let pts = &l[l.find("points=\"").unwrap() + 8..];
                pts[..pts.find('"').unwrap()]
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect();
        assert_eq!(lines.len(), 2);
        for (x, y) in lines.iter().flatten() {
            // Clear of the frame by more than half the 2 px stroke.
            assert!(*x > left + 1 && *x <= right && *y > top + 1 && *y < bottom - 1, "({x}, {y}) in {frame}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// RGB pixels of the PNG at `path`, with its width.
    fn png_pixels(path: &Path) -> (Vec<u8>, usize) {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        (buf, info.width as usize)
    }

    #[test]
    fn a_spike_of_one_sample_shows_in_the_png_as_in_the_svg() {
        // 2001 samples a second: node 1 holds nothing but at 1000 s, when it holds all 3072 MiB for
        // one sample. Its line goes up and straight back down within a pixel column.
        let mut c = sample::comparison();
        let run = &mut c.policies[0].runs[0];
        run.processes[0].series = sample::series(2000, 3072.0, 0.0, None);
        run.processes[0].series[1000].mem_mib = vec![0.0, 3072.0];
        let run = &c.policies[0].runs[0];
        let chart = ProcessChart { machine: "m", workload: "w", policy: "default", run, process: &run.processes[0] };
        let dir = tmp("spike");
        for text in [false, true] {
            if text && !text_available() {
                continue;
            }
            let files = chart.write(&dir, text).unwrap();
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            // In the SVG node 1's line reaches the top of the plot (the y of node 0's line).
            let ys = |colour: RGBColor| -> Vec<i32> {
                let l = svg.lines().find(|l| l.contains("<polyline") && l.contains(&hex(colour))).unwrap();
                let pts = &l[l.find("points=\"").unwrap() + 8..];
                pts[..pts.find('"').unwrap()]
                    .split_whitespace()
                    .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
                    .collect()
            };
            let top = ys(node_colour(0))[0];
            assert_eq!(ys(node_colour(1)).into_iter().min(), Some(top));
            // In the PNG node 1's colour is up there too, left of the legend: the spike.
            let (px, width) = png_pixels(&files[1]);
            let c = node_colour(1);
            let up = px
                .chunks(3)
                .enumerate()
                .filter(|(k, p)| *p == [c.0, c.1, c.2] && k % width < 790 && ((k / width) as i32) < top + 100)
                .count();
            assert!(up > 50, "text {text}: {up} pixels of node 1's spike in {}", files[1].display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The sample made a workload of two open-ended processes counting different units: `db`
    /// (queries/s: 1000 under default, 2000 under autonuma) and `batch` (bytes/s: 5e9 and 2.5e9).
    fn mixed_units() -> Comparison {
        let mut c = sample::comparison();
        for (p, factor) in c.policies.iter_mut().zip([1.0, 2.0]) {
            p.throughput = None;
            for r in &mut p.runs {
                r.throughput = None;
                for (proc, (name, unit, tp)) in r
                    .processes
                    .iter_mut()
                    .zip([("db", "queries/s", 1000.0 * factor), ("batch", "bytes/s", 5e9 / factor)])
                {
                    proc.name = name.to_string();
                    proc.unit = Some(unit.to_string());
                    proc.throughput = Some(tp);
                }
            }
        }
        c
    }

    #[test]
    fn processes_of_different_units_get_a_bar_each_relative_to_default() {
        let c = mixed_units();
        let dir = tmp("mixed");
        for text in [false, true] {
            if text && !text_available() {
                continue;
            }
            let svg = std::fs::read_to_string(&OverviewChart { comparison: &c }.write(&dir, text).unwrap()[0]).unwrap();
            // db: default, autonuma; batch: default, autonuma. Then the legend's two marks.
            let (d, a) = (hex(policy_colour("default")), hex(policy_colour("autonuma")));
            let fills = bar_fills(&svg);
            let expected = if text { vec![&d, &a, &d, &a, &d, &a] } else { vec![&d, &a, &d, &a] };
            assert_eq!(fills.iter().collect::<Vec<_>>(), expected, "{svg}");
            // Heights: db under autonuma is twice default's, batch half.
            let heights: Vec<i32> = svg
                .lines()
                .filter(|l| l.starts_with("<rect") && (l.contains(&d) || l.contains(&a)))
                .take(4)
                .map(|l| {
                    let k = l.find("height=\"").unwrap() + 8;
                    l[k..k + l[k..].find('"').unwrap()].parse().unwrap()
                })
                .collect();
            assert!(
                (heights[1] - 2 * heights[0]).abs() <= 2 && (2 * heights[3] - heights[2]).abs() <= 2,
                "{heights:?}"
            );
            assert!(!svg.contains("runtime"), "{svg}");
            if text {
                assert_text_fits(&svg, "mixed units");
                let texts: Vec<String> = text_boxes(&svg).into_iter().map(|b| b.text).collect();
                for t in ["throughput / default's", "db", "batch", "policy", "default", "autonuma"] {
                    assert!(texts.iter().any(|x| x == t), "{t} missing from {texts:?}");
                }
            }
        }
        // A single figure keeps one bar per policy.
        assert!(OverviewChart { comparison: &sample::comparison() }.per_process().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The fill colours of the filled rectangles of `svg` other than the white background, in order.
    fn bar_fills(svg: &str) -> Vec<String> {
        svg.lines()
            .filter(|l| l.starts_with("<rect") && !l.contains("fill=\"#FFFFFF\"") && !l.contains("fill=\"none\""))
            .map(|l| {
                let k = l.find("fill=\"").unwrap() + 6;
                l[k..k + l[k..].find('"').unwrap()].to_string()
            })
            .collect()
    }

    #[test]
    fn a_policy_has_one_colour_whatever_the_order() {
        let mut c = sample::comparison();
        let dir = tmp("policy-colours");
        let svg = std::fs::read_to_string(&OverviewChart { comparison: &c }.write(&dir, false).unwrap()[0]).unwrap();
        let forward = bar_fills(&svg);
        c.policies.reverse();
        let svg = std::fs::read_to_string(&OverviewChart { comparison: &c }.write(&dir, false).unwrap()[0]).unwrap();
        let mut reversed = bar_fills(&svg);
        reversed.reverse();
        assert_eq!(forward.len(), 2, "{svg}");
        assert_eq!(forward, reversed, "default then autonuma, and the other way round");
        assert_ne!(forward[0], forward[1]);
        // Every policy the simulator knows has a colour of its own; other names too, the same each time.
        let names = ["default", "hard-bind", "inverse-bind", "interleave", "autonuma", "numapilot", "numad", "x"];
        let colours: Vec<String> = names.iter().map(|n| hex(policy_colour(n))).collect();
        for (i, a) in colours.iter().enumerate() {
            assert!(!colours[i + 1..].contains(a), "{} shares {a}", names[i]);
        }
        assert_eq!(hex(policy_colour("x")), hex(policy_colour("x")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn big_machines_list_the_nodes_that_hold_memory() {
        let mut c = sample::comparison();
        let run = &mut c.policies[1].runs[0];
        // 20 nodes; the process's memory sits on kernel nodes 0 and 1 (indices 0, 1) only.
        run.nodes = (0..20).collect();
        for p in &mut run.processes[1].series {
            p.mem_mib.resize(20, 0.0);
        }
        let run = &c.policies[1].runs[0];
        let chart = ProcessChart {
            machine: &c.machine,
            workload: &c.workload,
            policy: "autonuma",
            run,
            process: &run.processes[1],
        };
        assert_eq!(chart.legend_nodes(), [0, 1]);
        if text_available() {
            let dir = tmp("legend");
            chart.write(&dir, true).unwrap();
            let svg = std::fs::read_to_string(dir.join(format!("{}.svg", chart.stem()))).unwrap();
            assert_eq!(data_lines(&svg).len(), 20);
            assert!(svg.contains("\nnode 1\n") && !svg.contains("\nnode 2\n"), "{svg}");
            assert!(svg.contains("+18 nodes not listed"), "{svg}");
            let _ = std::fs::remove_dir_all(&dir);
        }
        let small = &c.policies[0].runs[0];
        let chart = ProcessChart {
            machine: &c.machine,
            workload: &c.workload,
            policy: "default",
            run: small,
            process: &small.processes[0],
        };
        assert_eq!(chart.legend_nodes(), [0, 1], "small machines list every node, even empty ones");
    }

    #[test]
    fn node_colours_differ_on_big_machines() {
        let colours: Vec<RGBColor> = (0..36).map(node_colour).collect();
        for (i, a) in colours.iter().enumerate() {
            for b in &colours[i + 1..] {
                assert_ne!(hex(*a), hex(*b));
            }
        }
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(file_safe("vm mix/huge#1"), "vm_mix_huge_1");
        assert_eq!(file_safe("hard-bind_2"), "hard-bind_2");
    }
}
