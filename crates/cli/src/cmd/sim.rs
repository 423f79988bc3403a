//! `numapilot sim`: run placement policies side by side on a simulated machine and report.
//!
//! ```text
//! numapilot sim --machine M --workload W --policy P[,P...] [--seeds N | --seed S,..] [--duration S]
//!               [--tunables FILE] [--out DIR] [--json] [--no-chart]
//! numapilot sim list                 machines, workloads, policies
//! numapilot sim calibrate [--json]   published vs simulated runtime ratios
//! numapilot sim show FILE [--out DIR] [--json] [--no-chart]   re-render a saved result.json
//! numapilot sim evidence [--quick] [--seeds N] [--threads N] [--out DIR] [--json]
//!                                    the issue's evidence matrix: markdown tables + verdicts
//! ```
//!
//! The simulation itself is `numapilot_sim`; this module checks names, shows progress, prints the
//! table (`table`), writes `result.json` and the charts (`chart`).

pub mod catalog;
pub mod chart;
pub mod evidence;
pub mod table;

#[cfg(test)]
pub mod sample;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::ValueHint;

use super::run::print_out;
use numapilot_sim::result::Comparison;
use numapilot_sim::SimError;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    /// `list`, `calibrate` or `show`; without one, run a comparison.
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// What to run.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Subcommands of `numapilot sim`.
#[derive(Debug, clap::Subcommand)]
pub enum SimCommand {
    /// List the machines (presets), workloads and policies.
    List,
    /// Print the calibration table: published runtime ratios against simulated ones.
    Calibrate {
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Run the evidence matrix (autonuma-benchmark x machines x policies, client/server, process
    /// and VM mixes) and print markdown tables with a verdict per target.
    Evidence {
        /// A small version: the 2-node box, scaled-down work, one seed unless --seeds.
        #[arg(long)]
        quick: bool,
        /// Seeds per policy (default 3; 1 with --quick).
        #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
        seeds: Option<u64>,
        /// Worker threads (default: the CPUs available).
        #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
        threads: Option<usize>,
        /// Also write evidence.md and evidence.json under this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print JSON instead of markdown.
        #[arg(long)]
        json: bool,
    },
    /// Print the table (and with --out write the charts) of a saved result.json.
    Show {
        /// A result.json written by `numapilot sim --out` or printed by `--json`.
        file: PathBuf,
        /// Output options.
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// What to simulate.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Machine: a preset name (see `numapilot sim list`) or a machine file path.
    #[arg(long, value_name = "M", value_parser = super::Known(super::preset_values), hide_possible_values = true, value_hint = ValueHint::AnyPath)]
    pub machine: Option<String>,
    /// Workload: a built-in name (see `numapilot sim list`) or a workload file path (TOML or JSON).
    #[arg(long, value_name = "W", value_parser = super::Known(catalog::workload_values), hide_possible_values = true, value_hint = ValueHint::AnyPath)]
    pub workload: Option<String>,
    /// Policies to compare, comma separated, in the order to report them.
    #[arg(
        long,
        value_name = "P[,P...]",
        value_delimiter = ',',
        default_value = "default",
        value_parser = super::Known(catalog::policy_values),
        hide_possible_values = true
    )]
    pub policy: Vec<String>,
    /// Number of seeds (1..=N) to repeat every policy with.
    #[arg(long, value_name = "N", conflicts_with = "seed", default_value_t = 3, value_hint = ValueHint::Other)]
    pub seeds: u64,
    /// Explicit seeds, comma separated.
    #[arg(long, value_name = "S,..", value_delimiter = ',', value_hint = ValueHint::Other)]
    pub seed: Vec<u64>,
    /// Simulated duration, s: the length of open-ended workloads and the limit for fixed-work ones.
    #[arg(long, value_name = "S", value_hint = ValueHint::Other)]
    pub duration: Option<f64>,
    /// Tunables of the engine policies (numapilot, numad): a TOML file of `Tunables` fields, at its
    /// top level or in a `[tunables]` table as the daemon's configuration has them (its `[daemon]
    /// interval_ms` applies as in the daemon, its other tables are accepted and not used); missing
    /// keys keep their defaults. Checked before anything runs.
    #[arg(long, value_name = "FILE")]
    pub tunables: Option<PathBuf>,
    /// Output options.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where results go.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Write result.json, table.txt and charts/ (SVG and PNG) under this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the result as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// With --out, do not draw charts (only with --out: without it no chart is drawn anyway).
    #[arg(long, requires = "out")]
    pub no_chart: bool,
}

/// Largest result file `sim show` reads, bytes: 256 MiB. Source: the evidence matrix's largest
/// result (288 CPUs, every policy and seed, with series) is a few MB. Prevents: a wrong path read
/// until memory runs out.
const SHOW_MAX_BYTES: u64 = 256 << 20;

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(SimCommand::List) => print_out(&catalog::list_text()),
        Some(SimCommand::Calibrate { json }) => calibrate(json),
        Some(SimCommand::Evidence { quick, seeds, threads, out, json }) => evidence(quick, seeds, threads, out, json),
        Some(SimCommand::Show { file, output }) => {
            // At most SHOW_MAX_BYTES: a wrong path (/dev/zero, a disk image) read until memory ran
            // out (review helper-53).
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(
                    std::fs::File::open(&file).with_context(|| format!("reading {}", file.display()))?,
                    SHOW_MAX_BYTES + 1,
                ),
                &mut bytes,
            )
            .with_context(|| format!("reading {}", file.display()))?;
            if bytes.len() as u64 > SHOW_MAX_BYTES {
                bail!("{}: larger than {} MiB: not a numapilot sim result", file.display(), SHOW_MAX_BYTES >> 20);
            }
            let text = String::from_utf8(bytes)
                .with_context(|| format!("{} is not a numapilot sim result", file.display()))?;
            let comparison: Comparison = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a numapilot sim result", file.display()))?;
            report(&comparison, &output, None)
        }
        None => simulate(args.run),
    }
}

/// Prints and writes a comparison as `output` asks, into `staged` when the run staged `--out`
/// before it started.
fn report(comparison: &Comparison, output: &OutputArgs, staged: Option<super::Staged>) -> anyhow::Result<ExitCode> {
    // Memory that found no room: the figures describe a run without it (the result says how
    // often, `alloc_failures`; review helper-53).
    for p in &comparison.policies {
        for r in p.runs.iter().filter(|r| r.alloc_failures > 0) {
            eprintln!(
                "numapilot: warning: {} seed {}: the workload's memory found no room on the nodes its memory \
                 policy allows {} (more than those nodes have free); its figures describe a run without \
                 that memory",
                p.policy,
                r.seed,
                super::plural(r.alloc_failures, "time")
            );
        }
    }
    let table = table::render(comparison);
    if let Some(dir) = &output.out {
        let staged = match staged {
            Some(s) => s,
            None => super::Staged::new(dir, &chart_dirs(output))?,
        };
        let files = write_out(comparison, &table, staged, dir, !output.no_chart)?;
        eprintln!("numapilot: wrote {} under {}", super::plural(files.len(), "file"), dir.display());
    }
    if output.json {
        print_out(&format!("{}\n", serde_json::to_string_pretty(comparison)?))
    } else {
        print_out(&table)
    }
}

/// The subdirectories `--out` gets: `charts` unless `--no-chart`.
fn chart_dirs(output: &OutputArgs) -> Vec<&'static str> {
    if output.no_chart {
        Vec::new()
    } else {
        vec!["charts"]
    }
}

/// Writes `result.json`, `table.txt` and (with `charts`) `charts/*.svg|png` into `staged`, the
/// `--out` directory `dir`; returns the files written.
pub fn write_out(
    comparison: &Comparison,
    table: &str,
    staged: super::Staged,
    dir: &Path,
    charts: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    // All or nothing (`Staged`): a failure leaves the directory as it was.
    let json_path = staged.path("result.json");
    let mut json = serde_json::to_string_pretty(comparison)?;
    json.push('\n');
    std::fs::write(&json_path, json).with_context(|| format!("writing {}", dir.join("result.json").display()))?;
    std::fs::write(staged.path("table.txt"), table)
        .with_context(|| format!("writing {}", dir.join("table.txt").display()))?;
    if charts {
        std::fs::create_dir(staged.path("charts"))
            .with_context(|| format!("--out: creating {}", dir.join("charts").display()))?;
        chart::write_all(comparison, &staged.path("charts"), chart::text_available())?;
    }
    staged.commit()
}

/// Longest `--duration`, simulated s: one day (a typo such as 1e300 is an error, not a run that
/// never ends).
const MAX_DURATION_S: f64 = 86_400.0;

/// Most seeds `--seeds` takes: far past what a comparison needs (the evidence runs 3; 8 settle a
/// cv to a tenth of a percent), low enough that a typo is an error, not hours of runs or a seed
/// list no memory holds (`--seeds 99999999999` aborted on an 800 GB allocation).
const MAX_SEEDS: u64 = 1000;

fn check_seeds(n: u64) -> anyhow::Result<()> {
    if !(1..=MAX_SEEDS).contains(&n) {
        bail!("--seeds {n}: must be in 1..={MAX_SEEDS}");
    }
    Ok(())
}

/// The seeds to run: `--seed` as given, else 1..=`--seeds`.
fn seed_list(args: &RunArgs) -> anyhow::Result<Vec<u64>> {
    if args.seed.is_empty() {
        check_seeds(args.seeds)?;
        return Ok((1..=args.seeds).collect());
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in &args.seed {
        if !seen.insert(*s) {
            bail!("seed {s} given twice in --seed");
        }
    }
    Ok(args.seed.clone())
}

/// The policies to run, in order; each once.
fn policy_list(args: &RunArgs) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for p in &args.policy {
        let p = p.trim();
        if p.is_empty() {
            bail!("empty policy name in --policy");
        }
        if out.iter().any(|q| q == p) {
            bail!("policy {p:?} given twice in --policy");
        }
        out.push(p.to_string());
    }
    Ok(out)
}

/// `--duration`, checked: a positive number of seconds.
fn duration(args: &RunArgs) -> anyhow::Result<Option<f64>> {
    match args.duration {
        Some(d) if !(d.is_finite() && d > 0.0 && d <= MAX_DURATION_S) => {
            bail!("--duration must be a number of simulated seconds in (0, {MAX_DURATION_S}], not {d}")
        }
        d => Ok(d),
    }
}

/// A progress bar on stderr over `total` runs, drawn only when stderr is a terminal and only once
/// the work has taken more than a second.
#[derive(Debug, Clone)]
struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    /// Delay before the bar appears.
    const DELAY: std::time::Duration = std::time::Duration::from_secs(1);

    /// Steps of the bar: the fraction done in tenths of a percent.
    const STEPS: u64 = 1000;

    fn new() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(Some(Self::STEPS), indicatif::ProgressDrawTarget::hidden());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} simulating [{elapsed_precise}] {bar:40} {percent}% (eta {eta})",
        ) {
            bar.set_style(style);
        }
        if std::io::stderr().is_terminal() {
            let shown = bar.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Self::DELAY);
                if !shown.is_finished() {
                    shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    shown.enable_steady_tick(std::time::Duration::from_millis(100));
                }
            });
        }
        Self { bar }
    }

    /// Sets the fraction done, 0..=1.
    fn set(&self, fraction: f64) {
        self.bar.set_position((fraction.clamp(0.0, 1.0) * Self::STEPS as f64).round() as u64);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Runs the comparison the arguments ask for and reports it.
fn simulate(args: RunArgs) -> anyhow::Result<ExitCode> {
    let Some(machine) = &args.machine else {
        bail!("missing --machine; valid machines: {}", numapilot_topology::presets::names().join(", "))
    };
    let machine = catalog::machine(machine)?;
    let Some(workload) = &args.workload else {
        let names: Vec<&str> = catalog::workloads().iter().map(|w| w.name).collect();
        bail!("missing --workload; valid workloads: {}", names.join(", "))
    };
    let mut spec = catalog::workload(workload, &machine.topo)?;
    let policies = policy_list(&args)?;
    catalog::policies(&policies)?;
    let seeds = seed_list(&args)?;
    let mut opts = numapilot_sim::SimOptions::default();
    if let Some(path) = &args.tunables {
        opts.tunables = numapilot_sim::run::tunables_from_file(path)?;
    }
    if let Some(d) = duration(&args)? {
        // Open-ended workloads run for exactly this long; fixed work must finish within it.
        if spec.duration_s.is_some() {
            spec.duration_s = Some(d);
        } else {
            opts.max_s = d;
        }
    }
    // Staged now, so a bad or busy one fails before the runs, a signal during them leaves nothing,
    // and what was made goes again if they or the report fail (it was only made here, and locked
    // when the files were written: two runs into one directory both wrote it; review helper-62).
    let staged = match &args.output.out {
        Some(dir) => Some(super::Staged::new(dir, &chart_dirs(&args.output))?),
        None => None,
    };
    let names: Vec<&str> = policies.iter().map(String::as_str).collect();
    let progress = Progress::new();
    let result = numapilot_sim::run::simulate(&machine, &spec, &names, &seeds, &opts, &mut |f| progress.set(f));
    progress.finish();
    let result = result.map_err(|e| match e {
        SimError::Unfinished { .. } => anyhow::anyhow!("{e} (a longer --duration gives it more time)"),
        e => e.into(),
    })?;
    report(&result, &args.output, staged)
}

/// `numapilot sim evidence`.
fn evidence(
    quick: bool,
    seeds: Option<u64>,
    threads: Option<usize>,
    out: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if let Some(n) = seeds {
        check_seeds(n)?;
    }
    if threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    // Staged before the runs (see `simulate`).
    let staged = match &out {
        Some(dir) => Some(super::Staged::new(dir, &[])?),
        None => None,
    };
    let matrix = evidence::Matrix::new(quick, seeds);
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let result = evidence::evidence(&matrix, threads, &|line| eprintln!("{line}"))?;
    let mut command = String::from("numapilot sim evidence");
    if quick {
        command.push_str(" --quick");
    }
    command.push_str(&format!(" --seeds {}", matrix.seeds.len()));
    let md = evidence::markdown(&result, &command);
    if let (Some(dir), Some(staged)) = (&out, staged) {
        std::fs::write(staged.path("evidence.md"), &md)
            .with_context(|| format!("writing {}", dir.join("evidence.md").display()))?;
        std::fs::write(staged.path("evidence.json"), serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("writing {}", dir.join("evidence.json").display()))?;
        staged.commit()?;
    }
    if json {
        print_out(&format!("{}\n", serde_json::to_string_pretty(&result)?))
    } else {
        print_out(&md)
    }
}

/// `numapilot sim calibrate`: the published runtime ratios against the simulated ones.
fn calibrate(json: bool) -> anyhow::Result<ExitCode> {
    let progress = Progress::new();
    let rows = numapilot_sim::calibrate(&numapilot_sim::SimOptions::default(), &mut |f| progress.set(f));
    progress.finish();
    let rows = rows?;
    if json {
        print_out(&format!("{}\n", serde_json::to_string_pretty(&rows)?))?;
    } else {
        print_out(&table::calibration(&rows))?;
    }
    let out = rows.iter().filter(|r| !r.within()).count();
    if out > 0 {
        eprintln!("numapilot: {out} of {} simulated ratios are outside their tolerance", rows.len());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("sim").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn seeds_policies_and_duration_from_the_command_line() {
        let a = parse(&["--machine", "m", "--workload", "w", "--policy", "default,autonuma", "--seeds", "4"]).unwrap();
        assert_eq!(seed_list(&a.run).unwrap(), [1, 2, 3, 4]);
        assert_eq!(policy_list(&a.run).unwrap(), ["default", "autonuma"]);
        assert_eq!(duration(&a.run).unwrap(), None);
        let a = parse(&["--machine", "m", "--seed", "9,3", "--duration", "2.5"]).unwrap();
        assert_eq!(seed_list(&a.run).unwrap(), [9, 3]);
        assert_eq!(policy_list(&a.run).unwrap(), ["default"]);
        assert_eq!(duration(&a.run).unwrap(), Some(2.5));
        assert!(parse(&["--seeds", "2", "--seed", "1"]).is_err(), "--seeds and --seed conflict");
    }

    #[test]
    fn progress_is_the_fraction_done_in_tenths_of_a_percent_and_hidden_off_a_terminal() {
        let p = Progress::new();
        p.set(0.5);
        assert_eq!(p.bar.position(), 500);
        p.set(1.7);
        assert_eq!(p.bar.position(), Progress::STEPS);
        p.set(-1.0);
        assert_eq!(p.bar.position(), 0);
        if !std::io::stderr().is_terminal() {
            assert!(p.bar.is_hidden());
        }
        p.finish();
        assert!(p.bar.is_finished());
    }

    #[test]
    fn bad_seeds_policies_and_durations_are_named() {
        let err = |argv: &[&str]| {
            let a = parse(argv).unwrap();
            let e = seed_list(&a.run).err().or(policy_list(&a.run).err()).or(duration(&a.run).err());
            e.map(|e| e.to_string()).unwrap_or_default()
        };
        assert_eq!(err(&["--seeds", "0"]), "--seeds 0: must be in 1..=1000");
        assert_eq!(err(&["--seed", "1,2,1"]), "seed 1 given twice in --seed");
        assert_eq!(err(&["--policy", "autonuma,default,autonuma"]), "policy \"autonuma\" given twice in --policy");
        assert_eq!(err(&["--policy", "default,"]), "empty policy name in --policy");
        assert_eq!(err(&["--duration", "0"]), "--duration must be a number of simulated seconds in (0, 86400], not 0");
        assert_eq!(err(&["--duration=-1"]), "--duration must be a number of simulated seconds in (0, 86400], not -1");
        assert_eq!(
            err(&["--duration", "1e400"]),
            "--duration must be a number of simulated seconds in (0, 86400], not inf"
        );
        assert_eq!(err(&["--seeds", "2"]), "");
    }
}
