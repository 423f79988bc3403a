//! Gives the binary the date its manual pages carry (`numapilot man`), so two builds of the same
//! source write the same pages: NUMAPILOT_DATE_EPOCH, seconds since 1970, from SOURCE_DATE_EPOCH
//! when the build sets it, else the date of the commit built (git). Without either (a source tree
//! without git) it is not set and the pages carry no date. `numapilot man` itself prefers a
//! SOURCE_DATE_EPOCH set when it runs (docs.rs).

use std::path::Path;
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
    // A new commit changes the date: built again when HEAD or the branch it names moves.
    for name in ["HEAD", "packed-refs"] {
        watch(&dir, name);
    }
    if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch(&dir, &branch);
    }
    if let Some(epoch) = git(&dir, &["log", "-1", "--format=%ct"]).filter(|e| e.parse::<u64>().is_ok()) {
        println!("cargo:rustc-env=NUMAPILOT_DATE_EPOCH={epoch}");
    }
}

/// Builds again when the git file `name` (HEAD, a ref) changes, if it exists (a missing file
/// would build again every time).
fn watch(dir: &Path, name: &str) {
    if let Some(path) = git(dir, &["rev-parse", "--path-format=absolute", "--git-path", name]) {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
