//! `numapilot completions` and `numapilot man` as a user runs them: the built binary, its output,
//! its files and its exit codes.

mod cli_common;
use cli_common::{numapilot, stderr, stdout};

#[test]
fn completion_scripts_know_the_subcommands_and_their_options() {
    let bash = numapilot(&["completions", "bash"]);
    assert!(bash.status.success(), "{}", stderr(&bash));
    let text = stdout(&bash);
    assert!(text.contains("complete -F _numapilot"), "a bash completion function: {text}");
    assert!(text.contains("daemon") && text.contains("--dry-run"), "subcommands and options: {text}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = numapilot(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains("numapilot"), "{shell}: {}", stdout(&o));
    }
    let bad = numapilot(&["completions", "tcsh"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("tcsh"), "the bad shell is named: {}", stderr(&bad));
    assert!(stdout(&bad).is_empty());
}

#[test]
fn man_prints_the_top_page_and_writes_every_page_with_out() {
    let top = numapilot(&["man"]);
    assert!(top.status.success(), "{}", stderr(&top));
    let page = stdout(&top);
    assert!(page.contains(".TH numapilot 1"), "{page}");
    assert!(page.contains("/etc/numapilot.toml"), "the files are named: {page}");
    assert!(page.contains("numapilot\\-daemon(1)"), "the subcommands' pages are referred to: {page}");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list = |sub: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(out.join(sub))
            .unwrap()
            .map(|e| format!("{sub}/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(list("man5"), ["man5/numapilot.toml.5"]);
    let names: Vec<String> = [list("man1"), list("man5")].concat();
    for want in ["numapilot.1", "numapilot-daemon.1", "numapilot-sim.1", "numapilot-sim-evidence.1", "numapilot-run.1"]
    {
        assert!(names.contains(&format!("man1/{want}")), "{want} missing from {names:?}");
    }
    assert!(stdout(&o).contains(&format!("{} manual pages", names.len())), "{}", stdout(&o));
    let config = std::fs::read_to_string(out.join("man5/numapilot.toml.5")).unwrap();
    assert!(config.contains(".TH NUMAPILOT.TOML 5") && config.contains("migrate_mb_per_s"), "{config}");
    let daemon = std::fs::read_to_string(out.join("man1/numapilot-daemon.1")).unwrap();
    assert!(daemon.contains("dry\\-run") && daemon.contains("/etc/numapilot.toml"), "{daemon}");
}

#[test]
fn man_out_onto_a_file_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, "mine").unwrap();
    let o = numapilot(&["man", "--out", file.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("taken") && stderr(&o).contains("not a directory"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing else written");
}
