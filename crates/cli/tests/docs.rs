//! `numapilot completions` and `numapilot man` as a user runs them: the built binary, its output,
//! its files and its exit codes. And the repository's markdown documents (README.md, ARCHITECTURE.md,
//! docs/, the READMEs of rig/, machines/, workloads/, fixtures/): every relative link leads to a file
//! that exists, and a link to a section to a heading of that file.

mod cli_common;

use std::path::Path;

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
    assert!(page.contains(".TH NUMAPILOT 1"), "{page}");
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

/// The built binary with `args` and the environment changed by `env` (a `None` value removes it).
fn numapilot_env(args: &[&str], env: &[(&str, Option<&str>)]) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_numapilot"));
    c.args(args);
    for (k, v) in env {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.output().expect("run numapilot")
}

/// The fields of a `.TH` line as roff reads them (a quoted field may be empty or hold spaces).
fn th_fields(page: &str) -> Vec<String> {
    let line = page.lines().find(|l| l.starts_with(".TH ")).unwrap_or_else(|| panic!("no .TH: {page}"));
    let mut fields = Vec::new();
    let mut rest = &line[4..];
    loop {
        rest = rest.trim_start_matches(' ');
        if rest.is_empty() {
            break fields;
        }
        let (field, after) = match rest.strip_prefix('"') {
            Some(r) => r.split_once('"').unwrap_or((r, "")),
            None => rest.split_once(' ').unwrap_or((rest, "")),
        };
        fields.push(field.to_string());
        rest = after;
    }
}

/// groff, which `man` formats pages with (scripts/setup.sh installs it: groff-base).
fn groff(args: &[&str], page: &std::path::Path) -> std::process::Output {
    std::process::Command::new("groff")
        .args(["-man", "-Tutf8"])
        .args(args)
        .arg(page)
        .output()
        .expect("groff not found: scripts/setup.sh installs groff-base")
}

/// A page as `man -l` shows it, 120 columns wide, plain text (the minus sign as `-`).
fn rendered(page: &std::path::Path) -> String {
    let o = groff(&["-P-cbou", "-rLL=120n", "-rHY=0"], page);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().replace(['\u{2212}', '\u{2010}'], "-")
}

/// Every page written by `man --out` into `dir`, as (path, text).
fn written_pages(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for sub in ["man1", "man5"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p, text));
        }
    }
    out.sort();
    out
}

/// `.TH` is title, section, date, source, manual. The date was left empty and unquoted, so roff
/// shifted the version into the date's place ("bench 0.1.0" in the middle of the footer). The date
/// is SOURCE_DATE_EPOCH's when set, else the build's (the commit's): never the clock.
#[test]
fn every_page_has_its_date_and_version_in_their_title_fields() {
    let version = stdout(&numapilot(&["--version"])).split_whitespace().nth(1).unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot_env(&["man", "--out", out.to_str().unwrap()], &[("SOURCE_DATE_EPOCH", Some("1700000000"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pages = written_pages(&out);
    assert!(pages.len() > 10, "{pages:?}");
    for (path, text) in &pages {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let (title, section) = name.rsplit_once('.').unwrap();
        // In capitals, as man-pages(7) has it.
        let title = title.to_uppercase();
        let want = [title.as_str(), section, "2023-11-14", &format!("numapilot {version}"), "numapilot"];
        assert_eq!(th_fields(text), want, "{name}");
        // As man shows it: the source on the left of the footer, the date in its middle.
        let footer = rendered(path).lines().rev().find(|l| !l.trim().is_empty()).unwrap().to_string();
        let parts: Vec<&str> = footer.split("  ").map(str::trim).filter(|p| !p.is_empty()).collect();
        assert_eq!(parts, [&format!("numapilot {version}"), "2023-11-14", &format!("{title}({section})")], "{name}");
    }

    // Without SOURCE_DATE_EPOCH: the build's date, the same at every run.
    let first = numapilot_env(&["man"], &[("SOURCE_DATE_EPOCH", None)]);
    let again = numapilot_env(&["man"], &[("SOURCE_DATE_EPOCH", None)]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(first.stdout, again.stdout);
    let date = th_fields(&stdout(&first))[2].clone();
    let digits = date.replace('-', "");
    assert!(date.len() == 10 && digits.len() == 8 && digits.bytes().all(|b| b.is_ascii_digit()), "{date:?}");
    // Built from a git checkout without SOURCE_DATE_EPOCH (as the tests are): the commit's date.
    let commit = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "log", "-1", "--date=format-local:%Y-%m-%d", "--format=%cd"])
        .env("TZ", "UTC")
        .output();
    if let (Ok(c), None) = (commit, option_env!("SOURCE_DATE_EPOCH")) {
        if c.status.success() {
            assert_eq!(date, String::from_utf8_lossy(&c.stdout).trim(), "the commit's date");
        }
    }

    // A SOURCE_DATE_EPOCH that is no number of seconds is named, and nothing is written.
    let bad_out = dir.path().join("bad");
    let bad = numapilot_env(&["man", "--out", bad_out.to_str().unwrap()], &[("SOURCE_DATE_EPOCH", Some("yesterday"))]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("SOURCE_DATE_EPOCH=\"yesterday\""), "{}", stderr(&bad));
    assert!(!bad_out.exists());
}

/// The build script's date (build.rs, compiled and run here as cargo runs it) comes from git only
/// for a tree git tracks: a source tree unpacked untracked inside another project's checkout (a
/// release tarball) was dated by that project's last commit. And a packed branch (after `git gc`)
/// is watched through the directory its next commit writes it in: HEAD and packed-refs do not
/// change at that commit, so the pages kept the older commit's date.
#[test]
fn the_build_dates_the_pages_by_a_commit_of_this_tree_only() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("build-script");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let built = std::process::Command::new(rustc)
        .args(["--edition", "2021", "-o"])
        .arg(&script)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs"))
        .output()
        .expect("rustc");
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let outer = dir.path().join("outer");
    std::fs::create_dir(&outer).unwrap();
    // As git names it (TMPDIR may be a link).
    let outer = outer.canonicalize().unwrap();
    let git = |args: &[&str], date: &str| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&outer)
            .env("GIT_COMMITTER_DATE", date)
            .env("GIT_AUTHOR_DATE", date)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    // (the lines build.rs prints, the date it gives)
    let run = |crate_dir: &Path| -> (Vec<String>, Option<String>) {
        let o = std::process::Command::new(&script)
            .env("CARGO_MANIFEST_DIR", crate_dir)
            .env_remove("SOURCE_DATE_EPOCH")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let lines: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(str::to_string).collect();
        let date = lines.iter().find_map(|l| l.strip_prefix("cargo:rustc-env=NUMAPILOT_DATE_EPOCH=")).map(String::from);
        (lines, date)
    };
    git(&["init", "-q"], "2001-02-03T04:05:06Z");
    std::fs::write(outer.join("other.txt"), "another project\n").unwrap();
    git(&["add", "other.txt"], "2001-02-03T04:05:06Z");
    git(&["commit", "-q", "-m", "another project"], "2001-02-03T04:05:06Z");
    // Unpacked, untracked, inside it: no date (it was 981173106, the other project's commit).
    let tree = outer.join("numapilot-0.1.0/crates/cli");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("Cargo.toml"), "[package]\n").unwrap();
    let (lines, date) = run(&tree);
    assert_eq!(date, None, "{lines:?}");
    // Tracked: its commit's date.
    git(&["add", "numapilot-0.1.0"], "2002-03-04T05:06:07Z");
    git(&["commit", "-q", "-m", "the tree"], "2002-03-04T05:06:07Z");
    let (lines, date) = run(&tree);
    assert_eq!(date.as_deref(), Some("1015218367"), "{lines:?}");
    // Its branch packed: the directory the next commit writes the branch in is watched.
    git(&["pack-refs", "--all"], "2002-03-04T05:06:07Z");
    assert!(!outer.join(".git/refs/heads/main").exists());
    let (lines, _) = run(&tree);
    let heads = format!("cargo:rerun-if-changed={}", outer.join(".git/refs/heads").display());
    assert!(lines.contains(&heads), "{lines:?}");
}

/// groff reads every page without a warning (all of them enabled).
#[test]
fn groff_reads_every_page_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (path, _) in written_pages(&out) {
        let g = groff(&["-ww", "-z"], &path);
        assert!(g.status.success(), "{}", path.display());
        assert_eq!(String::from_utf8_lossy(&g.stderr), "", "{}", path.display());
    }
}

/// mandoc -Tlint (the BSDs' man formatter's checker) finds nothing in any page but input lines
/// longer than 80 bytes (its lowest level, STYLE): it found the pages' titles in lower case, a
/// `.PP` right after `.SH` in numapilot.toml(5) and a `.br` beside a blank line in
/// numapilot-completions(1), which it skips. No page has a blank line either (man-pages(7): roff
/// takes it as a vertical space; numapilot.toml(5) had one where its description parts). Without
/// mandoc the lint is skipped, said on stderr (scripts/setup.sh installs it).
#[test]
fn mandoc_lint_finds_nothing_in_the_pages_but_long_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pages = written_pages(&out);
    for (path, text) in &pages {
        assert!(!text.lines().any(str::is_empty), "{}: a blank line: {text}", path.display());
    }
    let lint = match std::process::Command::new("mandoc").arg("-Tlint").args(pages.iter().map(|(p, _)| p)).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("mandoc not installed: its lint skipped (apt-get install mandoc)");
            return;
        }
        Err(e) => panic!("mandoc: {e}"),
    };
    let said = String::from_utf8_lossy(&lint.stdout).to_string() + &String::from_utf8_lossy(&lint.stderr);
    let found: Vec<&str> =
        said.lines().filter(|l| !l.contains("STYLE: input text line longer than 80 bytes")).collect();
    assert!(found.is_empty(), "mandoc -Tlint:\n{}", found.join("\n"));
}

/// What bash offers for the last of `words` (the command line so far; the last word is the one
/// being completed, "" for a new one): `numapilot completions bash` is sourced and the function
/// it registers for numapilot called as bash's programmable completion calls it.
fn bash_offers(words: &[&str]) -> Vec<String> {
    bash_offers_in(Path::new("."), words)
}

/// [`bash_offers`] with bash in directory `cwd` (the files a file name completion would offer).
fn bash_offers_in(cwd: &Path, words: &[&str]) -> Vec<String> {
    bash_offers_after(cwd, "", words)
}

/// [`bash_offers_in`] with the shell code `prelude` run before the script is sourced.
fn bash_offers_after(cwd: &Path, prelude: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("numapilot.bash");
    let o = numapilot(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(&script, &o.stdout).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        r#"{prelude}
source '{}' || exit 3
spec=$(complete -p numapilot) || exit 4
fn=$(sed -n 's/.*-F \([^ ]*\) .*/\1/p' <<<"$spec")
COMP_WORDS=(numapilot {})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
"$fn" numapilot "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        script.display(),
        quoted.join(" ")
    );
    let o = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(o.status.success(), "bash: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().filter(|l| !l.is_empty()).map(String::from).collect()
}

/// bench's internal `--worker` (its worker processes) was offered by every shell's completion.
#[test]
fn completions_offer_no_internal_option() {
    let offered = bash_offers(&["bench", "--"]);
    assert!(offered.contains(&"--mb".to_string()) && offered.contains(&"--out".to_string()), "{offered:?}");
    assert!(!offered.iter().any(|o| o.contains("worker")), "{offered:?}");
    assert_eq!(bash_offers(&["bench", "--wor"]), Vec::<String>::new());
    for (shell, option) in
        [("zsh", "--worker"), ("fish", "-l worker"), ("elvish", "--worker"), ("powershell", "--worker")]
    {
        let o = numapilot(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains("--force-node") || text.contains("-l force-node"), "{shell}: bench's options: {text}");
        assert!(!text.contains(option), "{shell} offers {option}: {text}");
    }
}

/// Options that take a number, a size, a pid, a name or an address complete nothing (clap's
/// `ValueHint::Other`): bash and zsh offered the directory's file names for `--cpus`, `--mem`,
/// `--pid`, `--seeds` and the like. Options that take a path still offer files. (ProcessId is not
/// used: clap_complete's bash script offers files for it.)
#[test]
fn completions_offer_no_file_for_a_number_size_or_pid() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("100M.img"), "").unwrap();
    std::fs::write(dir.path().join("12.log"), "").unwrap();
    for words in [
        &["advise", "--cpus", ""][..],
        &["advise", "--mem", ""],
        &["advise", "--pid", ""],
        &["advise", "--window-ms", ""],
        &["bench", "numa01", "--mb", ""],
        &["bench", "numa01", "--threads", ""],
        &["bench", "numa01", "--seconds", ""],
        &["bench", "numa01", "--interval", ""],
        &["bench", "numa01", "--force-node", ""],
        &["sim", "--seeds", ""],
        &["sim", "--seed", ""],
        &["sim", "--duration", ""],
        &["sim", "evidence", "--threads", ""],
        &["daemon", "--interval-ms", ""],
        &["daemon", "--exclude-pid", ""],
        &["daemon", "--include", ""],
        &["daemon", "--metrics", ""],
        &["status", "--timeout", ""],
        &["stat", "--interval", ""],
        &["stat", "-p", ""],
        &["replay", "--page-size", ""],
    ] {
        assert_eq!(bash_offers_in(dir.path(), words), Vec::<String>::new(), "{words:?}");
    }
    // A started number is left as typed (bash's file names "100M.img" and "12.log" were offered).
    assert_eq!(bash_offers_in(dir.path(), &["advise", "--mem", "1"]), ["1"]);
    assert_eq!(bash_offers_in(dir.path(), &["sim", "--seeds", "1"]), ["1"]);
    // Paths keep their file names.
    for words in [&["advise", "--root", "1"][..], &["daemon", "--config", "1"], &["sim", "--out", "1"]] {
        let mut offered = bash_offers_in(dir.path(), words);
        offered.sort();
        assert_eq!(offered, ["100M.img", "12.log"], "{words:?}");
    }
    // zsh: each option's spec ends `:VALUE:ACTION'`; `_default` and `_files` offer files, and
    // only a path's value (FILE, DIR, PATH, run's KEYFILE) has them.
    let zsh = stdout(&numapilot(&["completions", "zsh"]));
    let mut files = Vec::new();
    for line in zsh.lines().filter(|l| l.ends_with("' \\")) {
        let spec = line.trim_end_matches("' \\");
        let Some((head, action)) = spec.rsplit_once(':') else { continue };
        let value = head.rsplit_once(':').map_or("", |(_, v)| v);
        if action.starts_with("_default") || action.starts_with("_files") {
            files.push(value.to_string());
        }
    }
    let mut kinds: Vec<&str> = files.iter().map(String::as_str).collect();
    kinds.sort();
    kinds.dedup();
    assert!(kinds.len() >= 3, "no path options found in zsh's spec: {files:?}");
    for v in &kinds {
        let path = ["FILE", "DIR", "PATH", "KEYFILE"].contains(v) || v.starts_with("file -- ");
        assert!(path, "{v}: {files:?}");
    }
    assert!(
        zsh.contains("'--cpus=[CPUs the job needs, 0 to 65536 (a fraction too, as numad -w takes 1.5)]:N:' \\"),
        "{zsh}"
    );
}

/// The text of section `name` of a rendered page, its lines joined by one space.
fn section(rendered: &str, name: &str) -> String {
    let mut lines = rendered.lines().skip_while(|l| l.trim_end() != name).skip(1);
    let body: Vec<&str> = lines.by_ref().take_while(|l| l.is_empty() || l.starts_with(' ')).collect();
    body.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The synopsis shows what each option takes (clap_mangen's had `--cpus` without its `N`).
#[test]
fn the_synopsis_shows_the_values_options_take() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (page, want) in [
        ("numapilot-advise.1", &["[--mem SIZE]", "[--machine PRESET|FILE]", "[--json]", "--cpus N"][..]),
        ("numapilot-stat.1", &["[-p PID|PATTERN]...", "[-s[=NODE]]", "[--interval MS]", "[PID|PATTERN]..."]),
        ("numapilot-daemon.1", &["[--exclude COMM]...", "[--metrics ADDR|off]", "[--dry-run]"]),
        ("numapilot-sim.1", &["[--policy P[,P...]]...", "[--seeds N]", "[COMMAND]"]),
        ("numapilot-bench.1", &["numapilot bench [--mb MiB]", "[-h|--help]", "TEST"]),
    ] {
        let synopsis = section(&rendered(&out.join("man1").join(page)), "SYNOPSIS");
        for w in want {
            assert!(synopsis.contains(w), "{page}: {w} missing from {synopsis}");
        }
    }
}

/// Markdown's code spans in the help texts (`perf script`) are bold in the pages; roff printed
/// their backticks (groff as quotes: 'perf script').
#[test]
fn code_spans_are_bold_not_backticks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (path, text) in written_pages(&out) {
        assert!(!text.contains('`'), "{}: {text}", path.display());
        let shown = rendered(&path);
        assert!(!shown.contains(['`', '\u{2018}']), "{}: {shown}", path.display());
    }
    let replay = std::fs::read_to_string(out.join("man1/numapilot-replay.1")).unwrap();
    assert!(replay.contains("a \\fBperf mem\\fR recording (\\fBperf script\\fR text)"), "{replay}");
    // NAME, which whatis reads, plain.
    let name = section(&rendered(&out.join("man1/numapilot-replay.1")), "NAME");
    assert!(
        name.starts_with("numapilot-replay - Drive the model with a perf mem recording (perf script text)"),
        "{name}"
    );
    let config = std::fs::read_to_string(out.join("man5/numapilot.toml.5")).unwrap();
    assert!(config.contains("(or \\fBnumapilot daemon \\-\\-config FILE\\fR)"), "{config}");
}

/// numapilot-run(1) documents numactl's options, which the launcher parses with its own parser (not
/// clap): the page had one entry, "[OPTIONS] [--] [COMMAND]".
#[test]
fn the_run_page_documents_the_numactl_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let o = numapilot(&["man", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = rendered(&out.join("man1/numapilot-run.1"));
    let synopsis = section(&page, "SYNOPSIS");
    assert!(
        synopsis.starts_with("numapilot run [OPTIONS] [--] COMMAND [ARG]... numapilot run [OPTIONS] --show"),
        "{synopsis}"
    );
    let options = section(&page, "OPTIONS");
    // docs/tools.md's `numapilot run` options (README.md's row names them in short).
    for entry in [
        "-m, --membind <NODES>",
        "-p, --preferred <NODE>",
        "-P, --preferred-many <NODES>",
        "-i, --interleave <NODES>",
        "-w, --weighted-interleave <NODES>",
        "-l, --localalloc",
        "-N, --cpunodebind <NODES>",
        "-C, --physcpubind <CPUS>",
        "-a, --all",
        "-s, --show",
        "-H, --hardware",
        "-b, --balancing",
        "-S, --shm <KEYFILE>",
        "-f, --file <FILE>",
        "-L, --length <SIZE>",
        "-o, --offset <SIZE>",
        "-M, --shmmode <MODE>",
        "-I, --shmid <ID>",
        "-u, --huge",
        "-t, --strict",
        "-T, --touch",
        "-d, --dump",
        "-D, --dump-nodes",
        "-V, --verify",
        "--version",
        "-h, --help",
    ] {
        assert!(options.contains(entry), "{entry} missing: {options}");
    }
    let lists = section(&page, "NODE AND CPU LISTS");
    assert!(lists.contains("netdev:DEV") && lists.contains("same is the previous NODES"), "{lists}");
}

/// The names under `heading` in `numapilot sim list` (the first word of each indented line).
fn listed(heading: &str) -> Vec<String> {
    let list = stdout(&numapilot(&["sim", "list"]));
    let mut lines = list.lines().skip_while(|l| !l.starts_with(heading)).skip(1);
    let names: Vec<String> = lines
        .by_ref()
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(!names.is_empty(), "{heading}: {list}");
    names
}

/// Where the values of an argument are a known set (presets, workloads, policies, tests, shells,
/// log levels), completions offer them; they offered file names.
#[test]
fn completions_offer_the_known_values_of_an_argument() {
    let presets = listed("machines");
    let policies = listed("policies");
    let workloads = listed("workloads");
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    for words in [
        &["topo", "--preset", ""][..],
        &["sim", "--machine", ""],
        &["advise", "--machine", ""],
        &["replay", "--machine", ""],
    ] {
        assert_eq!(sorted(bash_offers(words)), sorted(presets.clone()), "{words:?}");
    }
    assert_eq!(sorted(bash_offers(&["sim", "--policy", ""])), sorted(policies.clone()));
    assert_eq!(bash_offers(&["sim", "--policy", "numa"]), ["numapilot", "numad"]);
    assert_eq!(sorted(bash_offers(&["sim", "--workload", ""])), sorted(workloads));
    assert_eq!(bash_offers(&["sim", "--workload", "redis-"]), ["redis-set", "redis-get"]);
    assert_eq!(bash_offers(&["daemon", "--log", "t"]), ["trace"]);
    assert_eq!(bash_offers(&["completions", "f"]), ["fish"]);
    let tests = bash_offers(&["bench", "numa02_S"]);
    assert_eq!(tests, ["numa02_SMT", "numa02_SMT_HARD_BIND", "numa02_SMT_INVERSE_BIND"]);
    // zsh and fish offer them with what each is.
    // (Their values, one a line, up to the end of the argument's entry.)
    let entry = |script: &str, start: &str, end: &str| -> String {
        let at = script.find(start).unwrap_or_else(|| panic!("{start}: {script}"));
        let len = script[at..].find(end).unwrap_or_else(|| panic!("{end} after {start}"));
        script[at..at + len].to_string()
    };
    let zsh = entry(&stdout(&numapilot(&["completions", "zsh"])), "'--preset=", "))'");
    assert!(
        presets.iter().all(|p| zsh.contains(&format!("\n{p}\\:\"")) || zsh.contains(&format!("(({p}\\:\""))),
        "{zsh}"
    );
    let fish = entry(&stdout(&numapilot(&["completions", "fish"])), "-l policy", "'\"\n");
    assert!(
        policies.iter().all(|p| fish.contains(&format!("{p}\\t'kernel")) || fish.contains(&format!("{p}\\t'engine"))),
        "{fish}"
    );
}

/// An option that takes a known name or a file path (`--machine`, `--workload`) completes both in
/// zsh and fish. Given its names, they offered the names alone, and a machine or workload file could
/// not be completed there (bash falls back to file names when no name fits). An option that takes
/// a name only (`topo --preset`, `daemon --log`) still offers no file. Each shell is skipped, said,
/// when not installed.
#[test]
fn completions_offer_names_and_files_where_either_goes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("my-machine.toml"), "").unwrap();
    let presets = listed("machines");
    let workloads = listed("workloads");
    // fish: what `complete -C` lists for a command line, the values without their descriptions.
    let fish = |line: &str| fish_offers(dir.path(), "", line);
    let with_file = |names: &[String]| {
        let mut v = names.to_vec();
        v.push("my-machine.toml".into());
        v.sort();
        v
    };
    match fish("numapilot sim --machine ") {
        None => eprintln!("fish not installed: its completions not run"),
        Some(offered) => {
            assert_eq!(offered, with_file(&presets));
            assert_eq!(fish("numapilot sim --workload ").unwrap(), with_file(&workloads));
            for line in ["numapilot advise --machine my", "numapilot replay --machine my"] {
                assert_eq!(fish(line).unwrap(), ["my-machine.toml"], "{line}");
            }
            let mut sorted = presets.clone();
            sorted.sort();
            assert_eq!(fish("numapilot topo --preset ").unwrap(), sorted);
            assert!(!fish("numapilot daemon --log ").unwrap().contains(&"my-machine.toml".to_string()));
        }
    }
    // zsh: its completion system in a terminal of its own, asked for `--machine`'s values.
    let Some((shown, said)) = zsh_shows(dir.path(), "", "numapilot sim --machine ", "*my-machine.toml*") else {
        eprintln!("zsh not installed: its completions not run");
        return;
    };
    assert!(shown, "zsh listed no file for sim --machine: {said}");
    for p in &presets {
        assert!(said.contains(p.as_str()), "{p} not offered: {said}");
    }
}

/// A command on no system's PATH, for the tests of `run`'s completion: only a completion of
/// command names offers it.
const PROBE: &str = "zz-numapilot-probe";

/// A directory holding the file `my-input.txt` and `bin/` with the executable [`PROBE`].
fn run_completion_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("my-input.txt"), "").unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let probe = dir.path().join("bin").join(PROBE);
    std::fs::write(&probe, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// After `numapilot run`, bash completes numactl's options (read as getopt reads them), then a
/// command's name, as sudo's completion does, then the command's arguments. clap's script offered
/// nothing there (the command line is one pass-through argument), so bash fell back to the
/// directory's file names, for the command too.
#[test]
fn bash_completes_run_options_then_a_command_then_its_arguments() {
    let dir = run_completion_dir();
    let path = format!("PATH='{}':$PATH", dir.path().join("bin").display());
    let offers = |words: &[&str]| bash_offers_after(dir.path(), &path, words);
    for words in [
        &["run", "-N", "0", "zz-"][..],
        &["run", "-lN", "0", "zz-"],
        &["run", "-N0", "zz-"],
        // bash parts `--membind=0` at the `=`.
        &["run", "--membind", "=", "0", "zz-"],
        &["run", "--mem", "0", "--", "zz-"],
        &["run", "--", "zz-"],
        &["run", "zz-"],
    ] {
        assert_eq!(offers(words), [PROBE], "{words:?}");
    }
    let commands = offers(&["run", "-N", "0", "l"]);
    assert!(commands.contains(&"ls".to_string()) && commands.iter().all(|c| c.starts_with('l')), "{commands:?}");
    // numactl's options before the command.
    let options = offers(&["run", "-"]);
    for o in ["--membind", "--cpunodebind", "--physcpubind", "--interleave", "--show", "--hardware", "--help", "-N"] {
        assert!(options.contains(&o.to_string()), "{o}: {options:?}");
    }
    assert_eq!(offers(&["run", "-N", "0", "--memb"]), ["--membind"]);
    // An option's value: file names for --file and --shm (prefixes and letters too), none for a list.
    let mut files = offers(&["run", "--file", ""]);
    files.sort();
    assert_eq!(files, ["bin", "my-input.txt"]);
    for words in [&["run", "-S", "my"][..], &["run", "--fi", "my"], &["run", "--shm", "=", "my"]] {
        assert_eq!(offers(words), ["my-input.txt"], "{words:?}");
    }
    assert_eq!(offers(&["run", "-N", ""]), Vec::<String>::new());
    assert_eq!(offers(&["run", "--cpun", "m"]), ["m"]);
    // The command's arguments: file names (its own completion with bash-completion, below), never
    // numactl's options.
    assert_eq!(offers(&["run", "-N", "0", PROBE, "my"]), ["my-input.txt"]);
    assert_eq!(offers(&["run", "--", PROBE, "--memb"]), Vec::<String>::new());
}

/// With bash-completion loaded (it loads the installed script), the command after `numapilot run`
/// completes its arguments with its own completion (bash-completion's `_command_offset`, as sudo's
/// completion does). Skipped, said, without bash-completion.
#[test]
fn bash_completes_the_run_command_with_its_own_completion() {
    let main = Path::new("/usr/share/bash-completion/bash_completion");
    if !main.exists() {
        eprintln!("bash-completion not installed: the command's own completion not tried");
        return;
    }
    let dir = run_completion_dir();
    let prelude = format!(
        "source '{}' || exit 5; PATH='{}':$PATH; complete -W 'alpha beta' {PROBE}",
        main.display(),
        dir.path().join("bin").display()
    );
    let offers = |words: &[&str]| bash_offers_after(dir.path(), &prelude, words);
    assert_eq!(offers(&["run", "-N", "0", PROBE, "a"]), ["alpha"]);
    assert_eq!(offers(&["run", "-N", "0", "zz-"]), [PROBE]);
    assert_eq!(offers(&["run", "-N", "0", "--memb"]), ["--membind"]);
}

/// What fish's `complete -C LINE` lists (the values, without their descriptions), with `setup` run
/// after the script is sourced, in `dir`; `None` when fish is not installed.
fn fish_offers(dir: &Path, setup: &str, line: &str) -> Option<Vec<String>> {
    let script = dir.join("numapilot.fish");
    std::fs::write(&script, numapilot(&["completions", "fish"]).stdout).unwrap();
    let o = std::process::Command::new("fish")
        .args(["--no-config", "-c", &format!("source '{}'; {setup}; complete -C '{line}'", script.display())])
        .current_dir(dir)
        .output()
        .ok()?;
    assert!(o.status.success(), "fish: {}", String::from_utf8_lossy(&o.stderr));
    let mut v: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .filter(|v| v != "numapilot.fish")
        .collect();
    v.sort();
    Some(v)
}

/// fish after `numapilot run`: numactl's options, then a command's name, then the command's own
/// completion; an option's value offers no file unless it is one. clap's script had nothing for
/// `run` (fish offered file names everywhere). Skipped, said, when fish is not installed.
#[test]
fn fish_completes_run_options_then_a_command_then_its_arguments() {
    let dir = run_completion_dir();
    let setup =
        format!("set -x PATH '{}' $PATH; complete -c {PROBE} -x -a 'alpha beta'", dir.path().join("bin").display());
    let Some(options) = fish_offers(dir.path(), &setup, "numapilot run --") else {
        eprintln!("fish not installed: its completions not run");
        return;
    };
    for o in ["--membind", "--cpunodebind", "--physcpubind", "--show", "--help"] {
        assert!(options.contains(&o.to_string()), "{o}: {options:?}");
    }
    let offers = |line: &str| fish_offers(dir.path(), &setup, line).unwrap();
    for line in
        ["numapilot run -N 0 zz-", "numapilot run -lN 0 zz-", "numapilot run --membind=0 zz-", "numapilot run -- zz-"]
    {
        assert_eq!(offers(line), [PROBE], "{line}");
    }
    assert_eq!(offers(&format!("numapilot run -N 0 {PROBE} a")), ["alpha"]);
    assert_eq!(offers("numapilot run -N0 --memb"), ["--membind"]);
    assert_eq!(offers("numapilot run -N "), Vec::<String>::new());
    assert_eq!(offers("numapilot run --file my"), ["my-input.txt"]);
}

/// What zsh's completion system, in a terminal of its own (zsh/zpty), shows after `line` and a tab,
/// with `setup` run first: `Some(true, screen)` once the screen matches the pattern `want`, `Some(false,
/// screen)` when it never does (at the limit, 60 s); `None` when zsh is not installed.
fn zsh_shows(dir: &Path, setup: &str, line: &str, want: &str) -> Option<(bool, String)> {
    let fpath = dir.join("fpath");
    let _ = std::fs::create_dir(&fpath);
    std::fs::write(fpath.join("_numapilot"), numapilot(&["completions", "zsh"]).stdout).unwrap();
    let program = format!(
        r#"zmodload zsh/zpty || exit 3
zpty z "zsh -f -i"
zpty -w z "PS1='> '; fpath=('{}' \$fpath); autoload -U compinit; compinit -u -D; LISTMAX=1000; numapilot() {{ :; }}; {setup}"
zpty -w -n z $'{line}\t'
zpty -r -m z out '{want}' || exit 4
print -r -- "$out"
zpty -d z"#,
        fpath.display()
    );
    let o =
        match std::process::Command::new("timeout").args(["60", "zsh", "-f", "-c", &program]).current_dir(dir).output()
        {
            Ok(o) if o.status.code() == Some(127) => return None,
            Ok(o) => o,
            Err(e) => panic!("timeout: {e}"),
        };
    Some((o.status.success(), String::from_utf8_lossy(&o.stdout).replace('\r', "")))
}

/// zsh after `numapilot run`: numactl's options, then a command's name (`_command_names`), then the
/// command's own completion (`_normal`), as zsh's _sudo and _nice do; clap's script offered file
/// names for all of it. Skipped, said, when zsh is not installed.
#[test]
fn zsh_completes_run_options_then_a_command_then_its_arguments() {
    let dir = run_completion_dir();
    let setup = format!(
        "PATH='{}':\\$PATH; rehash; _probe() {{ compadd alpha-value }}; compdef _probe {PROBE}",
        dir.path().join("bin").display()
    );
    for (line, want) in [
        ("numapilot run -N 0 zz-", format!("*{PROBE}*")),
        ("numapilot run -lN 0 zz-", format!("*{PROBE}*")),
        ("numapilot run --membind=0 zz-", format!("*{PROBE}*")),
        ("numapilot run -- zz-", format!("*{PROBE}*")),
        ("numapilot run -N0 --memb", "*--membind*".to_string()),
        (&format!("numapilot run -N 0 {PROBE} al") as &str, "*alpha-value*".to_string()),
        ("numapilot run --file my-", "*my-input.txt*".to_string()),
    ] {
        let Some((shown, screen)) = zsh_shows(dir.path(), &setup, line, &want) else {
            eprintln!("zsh not installed: its completions not run");
            return;
        };
        assert!(shown, "{line}: {want} not shown: {screen}");
    }
}

/// The text `--help` gives the option `flag` of `numapilot SUB`, its continuation lines joined.
fn help_of(sub: &str, flag: &str) -> String {
    let o = numapilot(&[sub, "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let mut lines = text.lines().skip_while(|l| !l.trim_start().starts_with(&format!("{flag} ")));
    let first = lines.next().unwrap_or_else(|| panic!("{flag} in `{sub} --help`: {text}"));
    let rest = lines.take_while(|l| !l.trim_start().starts_with('-') && !l.trim().is_empty());
    std::iter::once(first).chain(rest).map(str::trim).collect::<Vec<_>>().join(" ")
}

/// Each daemon flag that overrides a configuration key says what it is without the flag: the
/// key, and the built-in default the daemon uses (`--journal`, `--state`, `--socket`, `--metrics`
/// and `--interval-ms` named neither; only the top page's Files paragraph had three of them).
#[test]
fn daemon_help_gives_the_default_of_each_path_and_address() {
    let d = numapilot_daemon::config::Config::default();
    let defaults = [
        ("--interval-ms", "interval_ms", d.tunables.interval_ms.to_string()),
        ("--journal", "journal", d.daemon.journal.display().to_string()),
        ("--state", "state", d.daemon.state.display().to_string()),
        ("--socket", "socket", d.daemon.socket.display().to_string()),
        ("--metrics", "metrics", d.daemon.metrics.clone()),
    ];
    for (flag, key, default) in defaults {
        let help = help_of("daemon", flag);
        assert!(help.contains(&format!("`[daemon] {key}`")), "{flag} names its key: {help}");
        assert!(help.contains(&format!("else {default}]")), "{flag} names its default {default}: {help}");
    }
}

/// `advise --mem` may be left out (a CPUs-only request, as numad's `-w NCPUS`); its help says so,
/// and such a request is taken (on a preset machine, where it fits).
#[test]
fn advise_help_gives_the_default_of_mem() {
    let help = help_of("advise", "--mem");
    assert!(help.contains("[default: none, CPUs only"), "--mem names its default: {help}");
    let o = numapilot(&["advise", "--cpus", "1", "--machine", "autonuma-2s12c-24g", "--json", "--strict"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["fits"], true, "{v}");
}

/// The workspace's markdown files, found by walking it (so a new document is checked without being
/// named here); build output, caches and guest output are left out, and no symbolic link is followed.
fn markdown_files(root: &Path) -> Vec<std::path::PathBuf> {
    const SKIP: [&str; 5] = ["target", "rig/cache", "rig/out", "demo-out", "third-party"];
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() && !name.starts_with('.') && !SKIP.contains(&rel.as_str()) {
                dirs.push(path);
            } else if kind.is_file() && name.ends_with(".md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The text outside fenced code blocks, with code spans blanked, line by line: a `[x](y)` inside
/// code is an example, not a link.
fn prose_lines(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            lines.push(String::new());
            continue;
        }
        if fenced {
            lines.push(String::new());
            continue;
        }
        let mut out = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                out.push(' ');
            } else {
                out.push(if in_code { ' ' } else { c });
            }
        }
        lines.push(out);
    }
    lines
}

/// The inline links' targets of a markdown text, with their line numbers: `[text](target)`.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    for (n, line) in prose_lines(text).iter().enumerate() {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push((n + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    targets
}

/// The anchors GitHub gives a markdown file's headings: lower case, every character but letters,
/// digits, `-`, `_` and spaces dropped, spaces made `-`; a repeated one gets `-1`, `-2`, ...
fn heading_anchors(text: &str) -> Vec<String> {
    let mut anchors: Vec<String> = Vec::new();
    let mut times: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let title = line.trim_start_matches('#');
        if fenced || title.len() == line.len() || !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let seen = times.entry(slug.clone()).or_insert(0);
        anchors.push(if *seen == 0 { slug } else { format!("{slug}-{seen}") });
        *seen += 1;
    }
    anchors
}

/// Every relative link in the workspace's markdown files leads to a file or directory that exists,
/// and a link to a section (`file.md#anchor`, `#anchor`) to a heading of that file: README.md points
/// into docs/ for the detail it no longer holds, and a heading renamed or a document moved must not
/// leave a reader at a dead end.
#[test]
fn every_relative_link_in_the_markdown_files_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let files = markdown_files(&root);
    for must in ["README.md", "ARCHITECTURE.md", "docs/daemon.md", "rig/README.md"] {
        assert!(files.contains(&root.join(must)), "{must} was not found among {files:?}");
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for (line, target) in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let dest = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !dest.exists() {
                broken.push(format!("{shown}:{line}: {target}: no file {}", dest.display()));
                continue;
            }
            if !anchor.is_empty() {
                let anchors = heading_anchors(&std::fs::read_to_string(&dest).unwrap_or_default());
                if !anchors.iter().any(|a| a == anchor) {
                    broken.push(format!("{shown}:{line}: {target}: no heading with anchor #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 50, "only {checked} relative links found: is the link reader broken?");
}
