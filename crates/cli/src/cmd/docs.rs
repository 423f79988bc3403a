//! `numapilot completions SHELL` and `numapilot man`: the shell completion scripts and the manual
//! pages, generated from the same argument definitions the commands parse with, so they cannot
//! drift from what the binary accepts.
//!
//! `numactl` and `numastat`, the names numapilot answers to through a symlink, parse their own
//! options (getopt, as Debian's tools do): their manual pages are Debian's own (numactl(8),
//! numastat(8)), and `numapilot run` documents the same options.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Command;

/// `numapilot completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// `numapilot man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write numapilot.1 and one page per subcommand (numapilot-daemon.1, numapilot-sim-evidence.1,
    /// ...) into this directory (made if missing) instead of printing numapilot.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Prints the completion script for `a.shell` to stdout.
pub fn completions(a: CompletionsArgs, mut cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "numapilot", &mut buf);
    std::io::stdout().write_all(&buf).context("writing the completion script")?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Prints numapilot(1), or with `--out` writes every page into the directory. Every page is
/// rendered before the first file is written, so a failure leaves no partial set behind it.
pub fn man(a: ManArgs, cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    let pages = pages(cmd)?;
    match a.out {
        None => {
            let (_, top) = pages.last().context("no manual page rendered")?;
            std::io::stdout().write_all(top).context("writing the manual page")?;
        }
        Some(dir) => {
            super::out_dir(&dir, &[])?;
            for (name, text) in &pages {
                let path = dir.join(name);
                std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            }
            println!("{} manual pages in {}", pages.len(), dir.display());
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Every page, as (file name, roff text): the subcommands' first (depth first), numapilot.1 last.
fn pages(cmd: Command) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: Command, out: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            walk(sub, out)?;
        }
        let man = clap_mangen::Man::new(cmd).manual("numapilot");
        let mut text = Vec::new();
        man.render(&mut text).with_context(|| format!("rendering {}", man.get_filename()))?;
        out.push((man.get_filename(), text));
        Ok(())
    }
    // Built, the subcommands carry their display names (numapilot-sim-evidence), which name
    // their pages; the `help` subcommand clap adds has no page of its own.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    walk(cmd, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        Command::new("numapilot")
            .about("Adaptive NUMA placement for Linux.")
            .subcommand(Command::new("sim").about("Simulate").subcommand(Command::new("evidence").about("Evidence")))
            .subcommand(Command::new("daemon").about("Daemon").arg(clap::Arg::new("dry-run").long("dry-run")))
    }

    #[test]
    fn a_page_per_command_named_by_its_path_the_top_one_last() {
        let p = pages(cli()).expect("pages");
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["numapilot-sim-evidence.1", "numapilot-sim.1", "numapilot-daemon.1", "numapilot.1"]);
        let daemon = String::from_utf8(p[2].1.clone()).expect("utf-8");
        assert!(daemon.starts_with(".ie"), "roff: {daemon}");
        assert!(daemon.contains("dry\\-run"), "the option is on its page: {daemon}");
    }
}
