//! The text table `numapilot sim` prints: one row per policy, figures as mean ± stddev over seeds.
//!
//! ```text
//! machine autonuma-2s12c-24g, workload numa01, 3 seeds (1,2,3)
//! policy     runtime (s)     sd/mean  vs default  local %  pages migrated  converged (s)
//! default    121.50 ± 1.20   1.0%     1.000       50.1     0               -
//! autonuma    83.00 ± 0.80   1.0%     0.683       97.2     786432          21.3 ± 0.4
//! ```
//!
//! Engine policies (`numapilot`, `numad`) add an `actions` column: the actions the engine took,
//! mean over seeds (`-` for the kernel baselines); without one the column is absent.
//!
//! `vs default` is the policy's mean over the mean of the `default` policy (runtime: lower is
//! better; throughput: higher is better) and appears only when `default` was run. For an open-ended
//! workload (every policy reports a throughput) the table shows throughput instead of runtime, in
//! the unit the workload gives (`throughput (requests/s)`: the redis pair counts the server's
//! requests only, not each request twice). When the processes count different units (the process
//! mix: queries, allocations, bytes) there is no single figure and a second table gives each
//! process's own throughput in its unit:
//!
//! ```text
//! throughput per process (no single figure: the processes count different units)
//! process       unit       default           interleave
//! static-large  queries/s  1200000 ± 3000    1100000 ± 2000
//! ```
//! Convergence is averaged over the seeds that converged; `(k/n)` says when only k of n did.

use numapilot_sim::result::{Comparison, PolicyResult, Stat};
use numapilot_sim::CalibrationRow;

/// Name of the baseline policy the ratios are taken against.
pub const BASELINE: &str = "default";

/// `mean ± stddev` with `decimals` digits after the point.
pub fn pm(s: Stat, decimals: usize) -> String {
    format!("{:.*} ± {:.*}", decimals, s.mean, decimals, s.stddev)
}

/// Decimals that show a figure of this size with about four significant digits (at most 3).
fn decimals_for(x: f64) -> usize {
    let a = x.abs();
    if a >= 1000.0 {
        0
    } else if a >= 100.0 {
        1
    } else if a >= 10.0 {
        2
    } else {
        3
    }
}

/// Whether the comparison is of an open-ended workload: every policy reports a throughput.
pub fn by_throughput(c: &Comparison) -> bool {
    !c.policies.is_empty() && c.policies.iter().all(|p| p.throughput.is_some())
}

/// The figure rows are ranked by: throughput for open-ended workloads, runtime otherwise.
fn headline(p: &PolicyResult, throughput: bool) -> Stat {
    match (throughput, p.throughput) {
        (true, Some(t)) => t,
        _ => p.runtime_s,
    }
}

/// The convergence cell: `mean ± sd`, `(k/n)` appended when only some seeds converged, `-` if none.
fn converge_cell(p: &PolicyResult) -> String {
    let converged = p.runs.iter().filter(|r| r.converge_s.is_some()).count();
    match p.converge_s {
        None => "-".to_string(),
        Some(s) => {
            let mut cell = pm(s, 1);
            if converged < p.runs.len() {
                cell.push_str(&format!(" ({converged}/{})", p.runs.len()));
            }
            cell
        }
    }
}

/// The actions cell: mean over seeds of the actions an engine policy took, `-` for a kernel
/// baseline.
fn actions_cell(p: &PolicyResult) -> String {
    let xs: Vec<f64> = p.runs.iter().filter_map(|r| r.engine.as_ref().map(|e| e.actions as f64)).collect();
    if xs.len() == p.runs.len() && !xs.is_empty() {
        format!("{:.0}", Stat::of(&xs).mean)
    } else {
        "-".to_string()
    }
}

/// Renders the table, header line included, each line ending in a newline.
pub fn render(c: &Comparison) -> String {
    let tp = by_throughput(c);
    let baseline = c.policies.iter().find(|p| p.policy == BASELINE).map(|p| headline(p, tp).mean);
    let scale = c.policies.iter().map(|p| headline(p, tp).mean).fold(0.0_f64, |a, b| a.max(b.abs()));
    let dec = decimals_for(scale);

    let tp_header = match (&c.throughput_unit, tp) {
        (Some(u), true) => format!("throughput ({u})"),
        (None, true) => "throughput".to_string(),
        _ => "runtime (s)".to_string(),
    };
    let mut header = vec!["policy", tp_header.as_str(), "sd/mean"];
    if baseline.is_some() {
        header.push("vs default");
    }
    header.extend(["local %", "pages migrated"]);
    // Engine policies (numapilot, numad) report their actions; the column appears when one ran.
    let engine = c.policies.iter().any(|p| p.runs.iter().any(|r| r.engine.is_some()));
    if engine {
        header.push("actions");
    }
    header.push("converged (s)");

    let mut rows: Vec<Vec<String>> = Vec::new();
    for p in &c.policies {
        let h = headline(p, tp);
        let mut row = vec![p.policy.clone(), pm(h, dec), format!("{:.1}%", 100.0 * h.cv())];
        if let Some(b) = baseline {
            row.push(if b != 0.0 && b.is_finite() { format!("{:.3}", h.mean / b) } else { "-".to_string() });
        }
        row.push(format!("{:.1}", p.local_access_pct.mean));
        row.push(format!("{:.0}", p.pages_migrated.mean));
        if engine {
            row.push(actions_cell(p));
        }
        row.push(converge_cell(p));
        rows.push(row);
    }

    let seeds: Vec<String> = c.seeds.iter().map(u64::to_string).collect();
    let mut out = format!(
        "machine {}, workload {}, {} ({})\n",
        c.machine,
        c.workload,
        crate::cmd::plural(c.seeds.len(), "seed"),
        seeds.join(",")
    );
    out.push_str(&aligned(&header, rows));
    if !tp {
        out.push_str(&per_process(c));
    }
    out
}

/// Each open-ended process's own throughput per policy (mean ± stddev over seeds, in its unit),
/// under a title line; empty when no process is open-ended.
pub fn per_process(c: &Comparison) -> String {
    let Some(first) = c.policies.first().and_then(|p| p.runs.first()) else { return String::new() };
    let open: Vec<usize> = (0..first.processes.len()).filter(|&i| first.processes[i].throughput.is_some()).collect();
    if open.is_empty() {
        return String::new();
    }
    let mut header = vec!["process", "unit"];
    header.extend(c.policies.iter().map(|p| p.policy.as_str()));
    let mut rows = Vec::new();
    for &i in &open {
        let proc = &first.processes[i];
        let mut row = vec![proc.name.clone(), proc.unit.clone().unwrap_or_else(|| "mixed units/s".into())];
        for p in &c.policies {
            let xs: Vec<f64> = p.runs.iter().filter_map(|r| r.processes.get(i).and_then(|x| x.throughput)).collect();
            row.push(if xs.len() == p.runs.len() {
                let s = Stat::of(&xs);
                pm(s, decimals_for(s.mean))
            } else {
                "-".to_string()
            });
        }
        rows.push(row);
    }
    let mut out = "throughput per process (no single figure: the processes count different units)\n".to_string();
    out.push_str(&aligned(&header, rows));
    out
}

/// `header` and `rows` as lines, columns two spaces apart: the first left-aligned, the rest right.
fn aligned(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let ncol = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>| -> String {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = width[i].saturating_sub(cell.chars().count());
            if i == 0 {
                // Names left-aligned, figures right-aligned.
                l.push_str(cell);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(cell);
            }
            if i + 1 < ncol {
                l.push_str("  ");
            }
        }
        l.truncate(l.trim_end().len());
        l.push('\n');
        l
    };
    out.push_str(&line(header.iter().map(|h| h.to_string()).collect()));
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// The calibration table: per machine, test and policy, the published runtime ratio to `default`,
/// the simulated one, their relative deviation and whether it is within the tolerance.
///
/// ```text
/// machine             test                 policy        published  simulated  deviation  tolerance
/// autonuma-2s12c-24g  numa01               hard-bind         0.667      0.702       5.3%        15%  ok
/// ```
pub fn calibration(rows: &[CalibrationRow]) -> String {
    let header = ["machine", "test", "policy", "published", "simulated", "deviation", "tolerance", ""];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.machine.clone(),
                r.test.clone(),
                r.policy.clone(),
                format!("{:.3}", r.published),
                format!("{:.3}", r.simulated),
                format!("{:.1}%", 100.0 * r.deviation()),
                format!("{:.0}%", 100.0 * r.tolerance),
                if r.within() { "ok" } else { "OUT" }.to_string(),
            ]
        })
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |row: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in row.iter().enumerate() {
            let pad = " ".repeat(width[i].saturating_sub(c.chars().count()));
            // Names left-aligned, figures right-aligned, the verdict last.
            if (3..7).contains(&i) {
                l.push_str(&pad);
                l.push_str(c);
            } else {
                l.push_str(c);
                l.push_str(&pad);
            }
            l.push_str("  ");
        }
        l.truncate(l.trim_end().len());
        l.push('\n');
        l
    };
    let mut out = line(header.to_vec());
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    let within = rows.iter().filter(|r| r.within()).count();
    out.push_str(&format!("{within} of {} within tolerance\n", crate::cmd::plural(rows.len(), "ratio")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::sim::sample;

    #[test]
    fn rows_carry_mean_sd_cv_ratio_local_migrated_convergence() {
        let c = sample::comparison();
        let text = render(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "machine autonuma-2s12c-24g, workload numa01, 2 seeds (1,2)");
        let header: Vec<&str> = lines[1].split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
        assert_eq!(
            header,
            ["policy", "runtime (s)", "sd/mean", "vs default", "local %", "pages migrated", "converged (s)"]
        );
        assert_eq!(lines.len(), 4);
        // default: runtimes 120 and 124 -> mean 122, sample sd 2.828..., cv 2.3%.
        let d: Vec<&str> = lines[2].split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
        assert_eq!(d, ["default", "122.0 ± 2.8", "2.3%", "1.000", "50.0", "0", "-"]);
        // autonuma: runtimes 82 and 84 -> 83 ± 1.4, ratio 83/122 = 0.680; one seed of two converged.
        let a: Vec<&str> = lines[3].split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
        assert_eq!(a, ["autonuma", "83.0 ± 1.4", "1.7%", "0.680", "92.5", "393216", "20.0 ± 0.0 (1/2)"]);
        // Columns line up: every line has the figure columns ending at the same offsets.
        let ends = |l: &str| l.chars().count();
        assert_eq!(ends(lines[1]), ends(lines[2]).max(ends(lines[1])));
        let col = |l: &str, pat: &str| l.find(pat).map(|i| l[..i + pat.len()].chars().count());
        assert_eq!(col(lines[2], "2.3%"), col(lines[3], "1.7%"));
    }

    #[test]
    fn engine_policies_add_an_actions_column() {
        let mut c = sample::comparison();
        assert!(!render(&c).contains("actions"));
        for (k, r) in c.policies[1].runs.iter_mut().enumerate() {
            r.engine = Some(numapilot_sim::result::EngineTotals { actions: 4 + 2 * k as u64, ..Default::default() });
        }
        let text = render(&c);
        let lines: Vec<Vec<&str>> =
            text.lines().map(|l| l.split("  ").map(str::trim).filter(|s| !s.is_empty()).collect()).collect();
        assert_eq!(lines[1][6], "actions", "{text}");
        assert_eq!(lines[2][6], "-", "default is a kernel baseline: {text}");
        assert_eq!(lines[3][6], "5", "mean of 4 and 6: {text}");
    }

    #[test]
    fn without_default_there_is_no_ratio_column() {
        let mut c = sample::comparison();
        c.policies.retain(|p| p.policy != "default");
        let text = render(&c);
        assert!(!text.contains("vs default"), "{text}");
        assert!(!text.contains("0.680"), "{text}");
        assert_eq!(text.lines().count(), 3);
    }

    #[test]
    fn open_ended_workloads_show_throughput_and_higher_is_a_bigger_ratio() {
        let mut c = sample::comparison();
        c.policies[0].throughput = Some(Stat { mean: 1000.0, stddev: 10.0 });
        c.policies[1].throughput = Some(Stat { mean: 1300.0, stddev: 0.0 });
        let text = render(&c);
        assert!(text.lines().nth(1).unwrap().contains("throughput"), "{text}");
        assert!(text.contains("1000 ± 10"), "{text}");
        assert!(text.contains("1.300"), "{text}");
        assert!(by_throughput(&c));
        c.policies[1].throughput = None;
        assert!(!by_throughput(&c));
    }

    #[test]
    fn the_throughput_header_names_the_unit_and_mixed_units_get_a_per_process_table() {
        let mut c = sample::comparison();
        c.throughput_unit = Some("requests/s".into());
        for p in &mut c.policies {
            p.throughput = Some(Stat { mean: 1000.0, stddev: 0.0 });
        }
        let text = render(&c);
        assert!(text.lines().nth(1).unwrap().contains("throughput (requests/s)"), "{text}");
        assert!(!text.contains("per process"), "{text}");
        // No single figure: each open-ended process in its own unit, per policy.
        let mut c = sample::comparison();
        for p in &mut c.policies {
            for (k, r) in p.runs.iter_mut().enumerate() {
                r.processes[0].throughput = Some(100.0 + k as f64 * 2.0);
                r.processes[0].unit = Some("queries/s".into());
                r.processes[1].throughput = Some(7.0);
                r.processes[1].unit = Some("bytes/s".into());
            }
        }
        let text = render(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("runtime (s)"), "{text}");
        assert!(lines[4].starts_with("throughput per process"), "{text}");
        let cols: Vec<&str> = lines[5].split_whitespace().collect();
        assert_eq!(cols, ["process", "unit", "default", "autonuma"], "{text}");
        assert!(lines[6].contains("queries/s") && lines[6].contains("101.0 ± 1.4"), "{text}");
        assert!(lines[7].contains("bytes/s") && lines[7].contains("7.000 ± 0.000"), "{text}");
        assert_eq!(lines.len(), 8, "{text}");
    }

    #[test]
    fn calibration_rows_show_ratios_deviation_and_verdict() {
        let row = |test: &str, policy: &str, published: f64, simulated: f64| CalibrationRow {
            machine: "autonuma-2s12c-24g".into(),
            test: test.into(),
            policy: policy.into(),
            published,
            simulated,
            tolerance: 0.15,
        };
        let text = calibration(&[row("numa01", "hard-bind", 0.667, 0.700), row("numa02_SMT", "hard-bind", 0.705, 0.5)]);
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[0], ["machine", "test", "policy", "published", "simulated", "deviation", "tolerance"]);
        assert_eq!(lines[1], ["autonuma-2s12c-24g", "numa01", "hard-bind", "0.667", "0.700", "4.9%", "15%", "ok"]);
        assert_eq!(
            lines[2],
            ["autonuma-2s12c-24g", "numa02_SMT", "hard-bind", "0.705", "0.500", "29.1%", "15%", "OUT"]
        );
        assert_eq!(text.lines().last().unwrap(), "1 of 2 ratios within tolerance");
        // Figures right-aligned: the deviation column ends at the same offset on every row.
        let raw: Vec<&str> = text.lines().collect();
        assert_eq!(raw[1].find("4.9%").unwrap() + 4, raw[2].find("29.1%").unwrap() + 5);
    }

    #[test]
    fn plus_minus_and_decimals() {
        assert_eq!(pm(Stat { mean: 1.23456, stddev: 0.1 }, 2), "1.23 ± 0.10");
        assert_eq!(decimals_for(5.0), 3);
        assert_eq!(decimals_for(50.0), 2);
        assert_eq!(decimals_for(500.0), 1);
        assert_eq!(decimals_for(5000.0), 0);
    }
}
