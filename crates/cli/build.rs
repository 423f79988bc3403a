//! Gives the binary the date its manual pages carry (`numapilot man`), so two builds of the same
//! source write the same pages: NUMAPILOT_DATE_EPOCH, seconds since 1970, from SOURCE_DATE_EPOCH
//! when the build sets it, else the date of the commit built (git). Without either (a source tree
//! without git, or one git does not track: a release tarball unpacked inside another project's
//! checkout was dated by that project's last commit) it is not set and the pages carry no date.
//! `numapilot man` itself prefers a SOURCE_DATE_EPOCH set when it runs (docs.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let dir = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    if let Some(v) = std::env::var("SOURCE_DATE_EPOCH").ok().filter(|v| !v.is_empty()) {
        if v.parse::<u64>().is_err() {
            panic!("SOURCE_DATE_EPOCH={v:?}: not a whole number of seconds since 1970-01-01");
        }
        println!("cargo:rustc-env=NUMAPILOT_DATE_EPOCH={v}");
        return;
    }
    // Only a tree git tracks is dated by its commit: an untracked one inside another checkout
    // (a release tarball unpacked there) is no commit of that project's.
    if git(&dir, &["ls-files", "--error-unmatch", "--", "Cargo.toml"]).is_none() {
        return;
    }
    // A new commit changes the date: built again when HEAD or the branch it names moves.
    for name in ["HEAD", "packed-refs", "reftable"] {
        watch(&dir, name);
    }
    if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch_ref(&dir, &branch);
    }
    if let Some(epoch) = git(&dir, &["log", "-1", "--format=%ct"]).filter(|e| e.parse::<u64>().is_ok()) {
        println!("cargo:rustc-env=NUMAPILOT_DATE_EPOCH={epoch}");
    }
}

/// The absolute path of the git file `name` (HEAD, a ref).
fn git_path(dir: &Path, name: &str) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--path-format=absolute", "--git-path", name]).map(PathBuf::from)
}

/// Builds again when the git file `name` (HEAD, packed-refs) changes, if it exists (a missing
/// file would build again every time).
fn watch(dir: &Path, name: &str) {
    if let Some(path) = git_path(dir, name).filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// Builds again when the branch `name` (refs/heads/...) moves. A packed branch has no file of its
/// own until the next commit writes one, which neither HEAD nor packed-refs shows (after `git gc`
/// the pages kept the date of an older commit): then the nearest directory of refs/ that would
/// hold it is watched (cargo scans a directory for changes).
fn watch_ref(dir: &Path, name: &str) {
    let (Some(mut path), Some(refs)) = (git_path(dir, name), git_path(dir, "refs")) else { return };
    while !path.exists() {
        if !path.pop() || !path.starts_with(&refs) {
            return;
        }
    }
    println!("cargo:rerun-if-changed={}", path.display());
}
