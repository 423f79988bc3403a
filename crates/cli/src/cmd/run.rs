//! Subcommand (being written).

use std::process::ExitCode;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet available")
}

/// Entry point when started as `numactl`.
pub fn numactl_main(_args: &[std::ffi::OsString]) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet available")
}
