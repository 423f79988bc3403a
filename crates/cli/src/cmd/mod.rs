//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`.

pub mod bench;
pub mod daemon;
pub mod docs;
pub mod replay;
pub mod run;
pub mod sim;
pub mod stat;
pub mod topo;

use std::path::Path;

use numapilot_topology::Topology;

/// Whether a name given where a built-in or a file is accepted (`--machine`, `--workload`) is meant
/// as a file: it has a directory part or a file suffix. Such a name that does not exist is
/// reported as a missing file, not as an unknown built-in.
pub fn looks_like_path(arg: &str) -> bool {
    arg.contains('/') || arg.ends_with(".toml") || arg.ends_with(".json")
}

/// `--machine` of the commands that need only a topology (replay, advise): a preset name, else a
/// machine file.
pub fn machine_topology(arg: &str) -> anyhow::Result<Topology> {
    if numapilot_topology::presets::names().contains(&arg) {
        return Ok(Topology::preset(arg)?);
    }
    let path = Path::new(arg);
    if path.exists() {
        return Ok(Topology::from_machine_file(path)?);
    }
    if looks_like_path(arg) {
        anyhow::bail!("machine file {arg}: no such file");
    }
    anyhow::bail!(
        "unknown machine '{arg}'; valid machines: {}, or the path of a machine file",
        numapilot_topology::presets::names().join(", ")
    )
}

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
