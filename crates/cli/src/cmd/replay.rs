//! `numapilot replay` (being written).

use std::process::ExitCode;

/// `numapilot replay`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("replay: not built yet")
}
