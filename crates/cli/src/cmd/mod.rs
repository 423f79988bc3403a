//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`.

pub mod bench;
pub mod daemon;
pub mod replay;
pub mod run;
pub mod sim;
pub mod stat;
pub mod topo;
