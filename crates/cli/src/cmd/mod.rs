//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`.

pub mod bench;
pub mod daemon;
pub mod replay;
pub mod run;
pub mod sim;
pub mod stat;
pub mod topo;

use std::path::Path;

/// Makes an `--out` directory and the `subdirs` under it, once every other argument has been
/// checked and before any work: a path that cannot be one fails in a moment, not after the run
/// (`sim evidence` ran all its simulations before `--out /proc/nope` failed), and a file in the
/// way is named as such ("File exists" said nothing of what was wrong).
pub fn out_dir(dir: &Path, subdirs: &[&str]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    for d in std::iter::once(dir.to_path_buf()).chain(subdirs.iter().map(|s| dir.join(s))) {
        if d.exists() && !d.is_dir() {
            anyhow::bail!("--out: {} exists and is not a directory", d.display());
        }
        std::fs::create_dir_all(&d).with_context(|| format!("--out: creating {}", d.display()))?;
    }
    Ok(())
}
