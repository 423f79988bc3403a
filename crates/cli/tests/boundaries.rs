//! The crate boundaries ARCHITECTURE.md states, checked in the sources themselves, so a change that
//! crosses one fails here instead of waiting for a reader to notice:
//!
//! - only `actuate` makes the system calls that change where work runs or where memory lives
//!   (affinity, memory policy, page moves); the others call `actuate`'s wrappers;
//! - only the binary crate (`cli`) depends on `anyhow`; the libraries' errors are typed.
//!
//! A call inside a test module (`#[cfg(test)]` to the end of the file, this workspace's layout) or
//! in `tests/`, `examples/` and `benches/` is a test's own set-up, not the product's, and is not
//! counted. The one call outside `actuate` that the rule allows is listed with its reason.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The product's source of a file: up to its test module, with `//` comments cut from each line
/// (a doc comment may name a system call it does not make).
fn product_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        out.push((i + 1, code.to_string()));
    }
    out
}

/// System calls that move threads or memory, by the names the sources reach them by.
const PLACEMENT_CALLS: [&str; 8] = [
    "libc::sched_setaffinity",
    "libc::SYS_sched_setaffinity",
    "libc::SYS_mbind",
    "libc::SYS_set_mempolicy",
    "libc::SYS_set_mempolicy_home_node",
    "libc::SYS_migrate_pages",
    "libc::SYS_move_pages",
    "libc::SYS_sched_setattr",
];

/// Allowed outside `actuate`, with why: (file, call, reason).
const ALLOWED: [(&str, &str, &str); 1] = [(
    "crates/observe/src/pmu.rs",
    "libc::SYS_move_pages",
    "query_nodes: move_pages with a NULL node list only asks where pages are; nothing moves",
)];

fn crossings(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        if krate.file_name().is_some_and(|n| n == "actuate") {
            continue;
        }
        let mut files = Vec::new();
        let src = krate.join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
        for f in files {
            let rel = f.strip_prefix(root).unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(&f).unwrap();
            for (n, code) in product_lines(&text) {
                for call in PLACEMENT_CALLS {
                    if code.contains(call) && !ALLOWED.iter().any(|(file, c, _)| *file == rel && *c == call) {
                        found.push(format!("{rel}:{n}: {call}"));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn only_actuate_makes_placement_system_calls() {
    let root = workspace();
    let found = crossings(&root);
    assert!(
        found.is_empty(),
        "placement system calls outside crates/actuate (call actuate's wrapper, or list the call in ALLOWED with \
         its reason):\n{}",
        found.join("\n")
    );
    // Every allowance is still needed: a call that went away takes its allowance with it.
    for (file, call, why) in ALLOWED {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            product_lines(&text).iter().any(|(_, c)| c.contains(call)),
            "{file} no longer calls {call}; drop its allowance ({why})"
        );
    }
}

/// The scan sees what it is for: a product line with a raw call is found, the same call in a
/// comment or in a test module is not.
#[test]
fn the_scan_finds_a_raw_call_and_only_in_the_product() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("crates/policy/src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(dir.path().join("crates/actuate/src")).unwrap();
    std::fs::write(dir.path().join("crates/actuate/src/lib.rs"), "unsafe { libc::syscall(libc::SYS_mbind) };\n")
        .unwrap();
    std::fs::write(
        src.join("place.rs"),
        "// libc::SYS_mbind in a comment\nfn f() { unsafe { libc::syscall(libc::SYS_migrate_pages) }; }\n\
         #[cfg(test)]\nmod tests { fn t() { unsafe { libc::sched_setaffinity(0, 0, std::ptr::null()) }; } }\n",
    )
    .unwrap();
    assert_eq!(crossings(dir.path()), vec!["crates/policy/src/place.rs:2: libc::SYS_migrate_pages".to_string()]);
}

#[test]
fn only_the_binary_depends_on_anyhow() {
    let root = workspace();
    let mut users = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        let Ok(toml) = std::fs::read_to_string(krate.join("Cargo.toml")) else { continue };
        let mut section = String::new();
        for line in toml.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                section = t.to_string();
            } else if section == "[dependencies]" && t.starts_with("anyhow") {
                users.push(krate.file_name().unwrap().to_string_lossy().to_string());
            }
        }
    }
    assert_eq!(users, vec!["cli".to_string()], "crates depending on anyhow outside dev-dependencies");
}
