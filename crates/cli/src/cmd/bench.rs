//! `numapilot bench` (being written).

use std::process::ExitCode;

/// `numapilot bench`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("bench: not built yet")
}
