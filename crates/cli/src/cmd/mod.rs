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

/// The value parser of an argument whose usual values are a known set (a preset, a policy, a test):
/// clap takes the value as it is (UTF-8 text, as a `String` argument), the command checks it and
/// names the valid ones in its error, and the completion scripts offer the set with each value's
/// description (clap_complete reads it here). The arguments set `hide_possible_values`, so help
/// and pages stay as they were. Where a file may stand in for a name (`--machine`, `--workload`)
/// the argument also says `ValueHint::AnyPath`, which the generators pass over when there are
/// values: bash completes paths when no name fits, and `completions` adds them for zsh and fish
/// (`docs::names_or_files`).
#[derive(Debug, Clone, Copy)]
pub struct Known(pub fn() -> Vec<(&'static str, String)>);

impl clap::builder::TypedValueParser for Known {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new((self.0)().into_iter().map(|(name, about)| {
            let value = clap::builder::PossibleValue::new(name);
            if about.is_empty() {
                value
            } else {
                value.help(about)
            }
        })))
    }
}

/// A count and its noun for a message: "1 CPU", "2 CPUs" (the topology crate's, shared with the
/// daemon and the policy). numactl's and numastat's own words stay as those tools print them.
pub use numapilot_topology::plural;

/// The machine presets, for [`Known`].
pub fn preset_values() -> Vec<(&'static str, String)> {
    numapilot_topology::presets::list()
}

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
        anyhow::bail!("machine file {arg:?}: no such file");
    }
    anyhow::bail!(
        "unknown machine {arg:?}; valid machines: {}, or the path of a machine file",
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
///
/// The directory is locked for the run (`flock` on it, released when the process ends however it
/// ends): a second run into it is refused before it starts (two `bench` runs into one directory
/// both said "wrote 3 files", one's result.json replaced by the other's; review helper-58). Under
/// the lock, a staging directory left by a run that was killed is removed. SIGINT, SIGTERM and
/// SIGHUP (unless ignored when the run started) remove the staging directory and what was made
/// for it, then end the process by the same signal ([`interrupt`]).
pub struct Staged {
    dir: PathBuf,
    stage: PathBuf,
    /// The topmost directory made for it (the directory or one above), removed again with every
    /// one below it on the way to the directory when nothing was committed.
    made: Option<PathBuf>,
    done: bool,
    /// The directory, open and locked.
    _lock: std::fs::File,
}

/// Prefix of a staging directory's name (`.numapilot-out.PID`).
const STAGE_PREFIX: &str = ".numapilot-out.";

impl Staged {
    /// Stages an `--out` directory (made when missing, checked as [`out_dir`] does, with the
    /// `subdirs` the output will make). Made before the run, so a bad or busy directory fails in a
    /// moment and a signal during the run leaves nothing behind.
    pub fn new(dir: &Path, subdirs: &[&str]) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let mut prepared = out_dir(dir, subdirs)?;
        let lock = std::fs::File::open(dir).with_context(|| format!("--out: opening {}", dir.display()))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                anyhow::bail!(
                    "--out {}: another numapilot run is writing there; wait for it to end or give another directory",
                    dir.display()
                );
            }
            anyhow::bail!("--out {}: locking it: {e}", dir.display());
        }
        let made = prepared.made.take();
        prepared.keep = true;
        // Under the lock, any staging directory is a killed run's (SIGKILL leaves it).
        for e in std::fs::read_dir(dir).with_context(|| format!("--out: reading {}", dir.display()))?.flatten() {
            let name = e.file_name();
            let stale = name
                .to_str()
                .and_then(|n| n.strip_prefix(STAGE_PREFIX))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
            if stale && e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let stage = dir.join(format!("{STAGE_PREFIX}{}", std::process::id()));
        let staged = Self { dir: dir.to_path_buf(), stage, made, done: false, _lock: lock };
        std::fs::create_dir(&staged.stage).with_context(|| format!("--out: creating {}", staged.stage.display()))?;
        interrupt::register(&staged.stage, &staged.dir, staged.made.as_deref());
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
        // From here a signal leaves the staging directory to the next run (which removes it): a
        // clean-up between two renames deleted the files not moved yet (review helper-62).
        interrupt::unregister(&self.stage);
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
        interrupt::unregister(&self.stage);
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.stage);
            remove_made(&self.dir, self.made.as_deref());
        }
    }
}

/// Staging directories removed when the process is ended by SIGINT, SIGTERM or SIGHUP, before it
/// ends: a Ctrl-C during `bench` or `sim evidence` left `.numapilot-out.PID` and the directories
/// made for `--out` (review helper-58).
///
/// The handler only writes the signal's number to a pipe; a thread reading the pipe removes what
/// is registered, restores the signal's default action and sends the signal to the process again,
/// so it ends as it would have (a shell sees 130 or 143). A signal ignored when the first
/// directory is registered (a job started with `&` by a shell without job control ignores
/// SIGINT) stays ignored.
mod interrupt {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::{Mutex, Once};

    type Entry = (PathBuf, PathBuf, Option<PathBuf>);

    static REGISTERED: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    static PIPE_W: AtomicI32 = AtomicI32::new(-1);
    /// The process that installed the handler: a child between fork and exec inherits the handler
    /// and the pipe, and a signal sent to it alone must not end its parent (review helper-62).
    static OWNER: AtomicI32 = AtomicI32::new(0);
    static INSTALL: Once = Once::new();
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn on_signal(sig: libc::c_int) {
        let b = sig as u8;
        // SAFETY: getpid, signal, raise and write are async-signal-safe; the byte lives on this
        // stack.
        unsafe {
            if libc::getpid() != OWNER.load(Ordering::Relaxed) {
                // A forked child not yet exec'd: the signal's default action, as after its exec.
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
                return;
            }
            libc::write(PIPE_W.load(Ordering::Relaxed), (&b as *const u8).cast(), 1);
        }
    }

    fn install() {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors of a live array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        PIPE_W.store(fds[1], Ordering::Relaxed);
        // SAFETY: getpid has no preconditions.
        OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        let reader = fds[0];
        let spawned = std::thread::Builder::new().name("numapilot-interrupt".into()).spawn(move || loop {
            let mut b = 0u8;
            // SAFETY: reads one byte into a live local.
            let n = unsafe { libc::read(reader, (&mut b as *mut u8).cast(), 1) };
            if n == 1 {
                let sig = libc::c_int::from(b);
                clean_up();
                // SAFETY: the default action back, then the signal to the whole process.
                unsafe {
                    libc::signal(sig, libc::SIG_DFL);
                    libc::kill(libc::getpid(), sig);
                }
            } else if n == 0 {
                return;
            }
        });
        if spawned.is_err() {
            return;
        }
        for sig in SIGNALS {
            // SAFETY: sigaction with zeroed structures, a handler of the right type.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
                    continue;
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(sig, &act, std::ptr::null_mut());
            }
        }
    }

    fn clean_up() {
        let entries = REGISTERED.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
        for (stage, dir, made) in entries {
            let _ = std::fs::remove_dir_all(&stage);
            super::remove_made(&dir, made.as_deref());
        }
    }

    /// Removes `stage`, and `dir` up to `made` while empty, if a signal ends the process.
    pub(super) fn register(stage: &Path, dir: &Path, made: Option<&Path>) {
        INSTALL.call_once(install);
        if let Ok(mut r) = REGISTERED.lock() {
            r.push((stage.to_path_buf(), dir.to_path_buf(), made.map(Path::to_path_buf)));
        }
    }

    /// `stage` is committed or dropped: nothing of it to remove any more.
    pub(super) fn unregister(stage: &Path) {
        if let Ok(mut r) = REGISTERED.lock() {
            r.retain(|(s, _, _)| s != stage);
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
/// of what was wrong). What it made goes again, while empty, unless its `keep` is set (`Staged` takes it over):
/// a run that fails leaves nothing (review helper-53: a `charts` directory, and the parents of a
/// new nested path, were left after a failed run).
fn out_dir(dir: &Path, subdirs: &[&str]) -> anyhow::Result<OutDir> {
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
struct OutDir {
    dir: PathBuf,
    made: Option<PathBuf>,
    keep: bool,
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
