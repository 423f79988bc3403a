//! `numapilot daemon | status | explain | advise` (being written).

use std::process::ExitCode;

/// `numapilot daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {}
/// `numapilot status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {}
/// `numapilot explain PID`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {}
/// `numapilot advise`.
#[derive(Debug, clap::Args)]
pub struct AdviseArgs {}

pub fn run_daemon(_: DaemonArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("daemon: not built yet")
}
pub fn run_status(_: StatusArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("status: not built yet")
}
pub fn run_explain(_: ExplainArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("explain: not built yet")
}
pub fn run_advise(_: AdviseArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("advise: not built yet")
}
