//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`.

pub mod bench;
pub mod daemon;
pub mod docs;
pub mod replay;
pub mod run;
pub mod sim;
pub mod stat;
pub mod topo;

use std::path::{Path, PathBuf};

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

/// The topology read from the sysfs under `root` (`--root`): a root that is not a directory is
/// named as such (it read "no NUMA nodes found (kernel without NUMA support, or sysfs not
/// mounted?)", blaming the kernel for a mistyped path).
pub fn topology_under(root: &Path) -> anyhow::Result<Topology> {
    use anyhow::Context as _;
    if !root.is_dir() {
        anyhow::bail!("--root {}: not a directory", root.display());
    }
    Topology::from_sysfs(root).with_context(|| format!("reading the topology under {}", root.display()))
}

/// An `--out` directory written all or nothing: every file goes first into a staging directory
/// inside it (`.numapilot-out.PID`), and only when all are written are they renamed into place; a
/// failure before that (a full disk, a chart that cannot be drawn) leaves the directory as it was,
/// and a directory made for the run that ends up empty is removed. Before, `sim --out` on a full
/// disk left result.json, table.txt and a truncated PNG, `evidence --out` a truncated JSON, and
/// `man --out` 9 of its 18 pages.
pub struct Staged {
    dir: PathBuf,
    stage: PathBuf,
    /// The topmost directory made for it (the directory or one above), removed again with every
    /// one below it on the way to the directory when nothing was committed.
    made: Option<PathBuf>,
    done: bool,
}

impl Staged {
    /// Stages an `--out` directory (made when missing, checked as [`out_dir`] does).
    pub fn new(dir: &Path) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let mut prepared = out_dir(dir, &[])?;
        let made = prepared.made.take();
        prepared.keep = true;
        let stage = dir.join(format!(".numapilot-out.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&stage);
        let staged = Self { dir: dir.to_path_buf(), stage, made, done: false };
        std::fs::create_dir(&staged.stage).with_context(|| format!("--out: creating {}", staged.stage.display()))?;
        Ok(staged)
    }

    /// Where to write what will be `rel` under the directory.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.stage.join(rel)
    }

    /// Moves every staged file into place and returns their final paths. Every target is checked
    /// first (a directory in a file's way is an error before anything moves).
    pub fn commit(mut self) -> anyhow::Result<Vec<PathBuf>> {
        use anyhow::Context as _;
        let mut rels = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let from = self.stage.join(&rel);
            for e in std::fs::read_dir(&from).with_context(|| format!("reading {}", from.display()))? {
                let e = e?;
                let r = rel.join(e.file_name());
                if e.file_type()?.is_dir() {
                    stack.push(r);
                } else {
                    rels.push(r);
                }
            }
        }
        rels.sort();
        for r in &rels {
            let to = self.dir.join(r);
            if to.is_dir() {
                anyhow::bail!("--out: {} is a directory; nothing was written", to.display());
            }
            if let Some(parent) = to.parent() {
                if parent.exists() && !parent.is_dir() {
                    anyhow::bail!("--out: {} exists and is not a directory; nothing was written", parent.display());
                }
            }
        }
        let mut out = Vec::with_capacity(rels.len());
        for r in &rels {
            let to = self.dir.join(r);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("--out: creating {}", parent.display()))?;
            }
            std::fs::rename(self.stage.join(r), &to).with_context(|| format!("--out: moving into {}", to.display()))?;
            out.push(to);
        }
        self.done = true;
        let _ = std::fs::remove_dir_all(&self.stage);
        Ok(out)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.stage);
            remove_made(&self.dir, self.made.as_deref());
        }
    }
}

/// The topmost directory of `dir` and the ones above it that do not exist yet (what
/// `create_dir_all` would make first); `None` when `dir` exists.
fn topmost_missing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).last().map(Path::to_path_buf)
}

/// Makes an `--out` directory (checking the `subdirs` under it, which the run's staged output
/// makes), once every other argument has been checked and before any work: a path that cannot be
/// one fails in a moment, not after the run (`sim evidence` ran all its simulations before
/// `--out /proc/nope` failed), and a file in the way is named as such ("File exists" said nothing
/// of what was wrong). What it made goes again, while empty, unless [`OutDir::keep`] is called:
/// a run that fails leaves nothing (review helper-53: a `charts` directory, and the parents of a
/// new nested path, were left after a failed run).
pub fn out_dir(dir: &Path, subdirs: &[&str]) -> anyhow::Result<OutDir> {
    use anyhow::Context as _;
    for d in std::iter::once(dir.to_path_buf()).chain(subdirs.iter().map(|s| dir.join(s))) {
        if d.exists() && !d.is_dir() {
            anyhow::bail!("--out: {} exists and is not a directory", d.display());
        }
    }
    let made = topmost_missing(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("--out: creating {}", dir.display()))?;
    Ok(OutDir { dir: dir.to_path_buf(), made, keep: false })
}

/// An `--out` directory [`out_dir`] made ready: removed again on drop (what of it was made, while
/// empty) unless kept.
pub struct OutDir {
    dir: PathBuf,
    made: Option<PathBuf>,
    keep: bool,
}

impl OutDir {
    /// The run succeeded: keep what was made.
    pub fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.keep {
            remove_made(&self.dir, self.made.as_deref());
        }
    }
}

/// Removes `dir` and the directories above it up to `top` (made for an output), deepest first,
/// each only while empty.
fn remove_made(dir: &Path, top: Option<&Path>) {
    let Some(top) = top else { return };
    for d in dir.ancestors() {
        if std::fs::remove_dir(d).is_err() || d == top {
            break;
        }
    }
}
