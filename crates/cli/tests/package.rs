//! The Debian package (`scripts/package-deb.sh`), built from this build's binary and installed with
//! Debian's own dpkg into a root of its own (`dpkg --root`, the maintainer scripts run outside it
//! with DPKG_ROOT set, as for a system being built): the files where Debian puts them, the unit
//! naming the installed binary and verifying, the shipped configuration valid, the pages and
//! completions there; upgraded to a build with a changed example, asking nothing; then removed and
//! purged with nothing left behind. The maintainer scripts' systemd calls are checked for every
//! action dpkg gives them. The machine's own systemd and dpkg database are not touched. lintian,
//! when installed, finds no error in it.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_numapilot");

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed: {text}");
    text
}

/// The package of this build's binary, written under `dir`; None without dpkg-deb.
fn build(dir: &Path) -> Option<PathBuf> {
    if Command::new("dpkg-deb").arg("--version").output().is_err() {
        eprintln!("skipped: no dpkg-deb (not a Debian system)");
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/package-deb.sh");
    let out = dir.join("out");
    let built = run(Command::new("bash")
        .arg(&script)
        .arg("--binary")
        .arg(BIN)
        .arg("--out")
        .arg(&out)
        .args(["--compress", "gzip"]));
    let deb = PathBuf::from(built.lines().last().unwrap().trim());
    assert!(deb.starts_with(&out) && deb.extension().is_some_and(|e| e == "deb"), "{built}");
    Some(deb)
}

#[test]
fn the_debian_package_installs_verifies_and_purges_clean() {
    let dir = tempfile::tempdir().unwrap();
    let Some(deb) = build(dir.path()) else { return };
    let deb = deb.as_path();

    // What dpkg reads: the fields, the conffile, the scripts.
    let info = run(Command::new("dpkg-deb").arg("--info").arg(deb));
    let version = run(Command::new(BIN).arg("--version")).split_whitespace().nth(1).unwrap().to_string();
    for field in [
        "Package: numapilot".to_string(),
        format!("Version: {version}-1"),
        "Depends: libc6 (>= 2.".into(),
        "Section: admin".into(),
    ] {
        assert!(info.contains(&field), "{field} missing: {info}");
    }
    let field = |name: &str| run(Command::new("dpkg-deb").arg("--field").arg(deb).arg(name)).trim().to_string();
    assert_eq!(field("Package"), "numapilot");
    // Nothing in the package runs numactl (`numapilot run` is its compatible launcher, the daemon
    // places with system calls): suggested, not recommended (packaging review).
    assert_eq!(field("Recommends"), "", "{info}");
    assert!(field("Suggests").split(", ").any(|p| p == "numactl"), "{info}");
    // The binary links libgcc_s: its package is a dependency too (review helper-64).
    let needed = run(Command::new("objdump").arg("-p").arg(BIN));
    if needed.contains("libgcc_s.so.1") {
        assert!(info.contains("libgcc-s1 (>= 4.2)"), "{info}");
    }

    // Installed into a root of its own: an empty dpkg database there (libc6 is not in it: the
    // dependency is forced, the binary runs on this machine's).
    let root = dir.path().join("root");
    let admin = root.join("var/lib/dpkg");
    for d in ["info", "updates"] {
        std::fs::create_dir_all(admin.join(d)).unwrap();
    }
    std::fs::write(admin.join("status"), "").unwrap();
    std::fs::write(admin.join("available"), "").unwrap();
    let dpkg = |args: &[&str]| {
        let mut c = Command::new("dpkg");
        c.arg(format!("--root={}", root.display())).args(["--force-script-chrootless", "--force-depends"]).args(args);
        run(&mut c)
    };
    dpkg(&["-i", deb.to_str().unwrap()]);
    let status = dpkg(&["--status", "numapilot"]);
    assert!(status.contains("Status: install ok installed"), "{status}");
    assert!(status.contains("Conffiles:\n /etc/numapilot.toml "), "the configuration is a conffile: {status}");

    // Every file as packaged (the md5sums).
    assert_eq!(dpkg(&["--verify", "numapilot"]).trim(), "", "dpkg --verify");

    let installed = root.join("usr/bin/numapilot");
    assert_eq!(run(Command::new(&installed).arg("--version")).trim(), format!("numapilot {version}"));
    // The conffile is a few lines that set no key and name the full example, which is there,
    // uncompressed, as in the source (packaging review: the 33 KB example was the conffile, and
    // each change to it made every upgrade ask the admin); both are valid.
    let conf = root.join("etc/numapilot.toml");
    let example = root.join("usr/share/doc/numapilot/examples/numapilot.toml");
    let conf_text = std::fs::read_to_string(&conf).unwrap();
    assert!(conf_text.len() < 1024, "/etc/numapilot.toml is {} bytes", conf_text.len());
    assert!(conf_text.contains("/usr/share/doc/numapilot/examples/numapilot.toml"), "{conf_text}");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/numapilot.toml");
    assert_eq!(std::fs::read(&example).unwrap(), std::fs::read(&source).unwrap(), "the full example");
    for file in [&conf, &example] {
        let checked = run(Command::new(&installed).args(["daemon", "--check", "--config"]).arg(file));
        assert!(checked.contains("configuration OK"), "{checked}");
    }
    // The unit names the installed binary, and verifies (pointed at it, with the pages installed).
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/numapilot.service")).unwrap();
    assert!(unit.lines().any(|l| l == "ExecStart=/usr/bin/numapilot daemon"), "{unit}");
    assert!(!unit.contains("/usr/local/"), "{unit}");
    if Command::new("systemd-analyze").arg("--version").output().is_ok() {
        let copy = dir.path().join("numapilot.service");
        std::fs::write(&copy, unit.replace("/usr/bin/numapilot", installed.to_str().unwrap())).unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&copy)
            .env("MANPATH", root.join("usr/share/man"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("numapilot.service"), "{err}");
    }
    for file in [
        "usr/share/man/man1/numapilot-daemon.1.gz",
        "usr/share/man/man1/numapilot.1.gz",
        "usr/share/man/man5/numapilot.toml.5.gz",
        "usr/share/bash-completion/completions/numapilot",
        "usr/share/zsh/vendor-completions/_numapilot",
        "usr/share/fish/vendor_completions.d/numapilot.fish",
        "usr/share/doc/numapilot/copyright",
        // README.md's links to the detail it no longer holds: the daemon's operating guide first.
        "usr/share/doc/numapilot/README.md.gz",
        "usr/share/doc/numapilot/docs/daemon.md.gz",
        "usr/share/doc/numapilot/docs/tools.md.gz",
        "usr/share/doc/numapilot/examples/prometheus-rules.yml",
    ] {
        let m = std::fs::metadata(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(m.len() > 0, "{file} is empty");
    }
    // Every crate linked into the binary is named in the copyright with its licence, its licence
    // files beside it (review helper-64: only numapilot's own licence was, and some crates are
    // Apache-2.0 only, compatible with the GPL-3.0 numapilot's "or later" allows).
    let copyright = std::fs::read_to_string(root.join("usr/share/doc/numapilot/copyright")).unwrap();
    assert!(copyright.contains("License: GPL-2.0-or-later"), "{copyright}");
    assert!(copyright.contains("\n clap_builder ") && copyright.contains("\n ab_glyph "), "{copyright}");
    let third = root.join("usr/share/doc/numapilot/third-party");
    assert!(std::fs::read_dir(&third).unwrap().count() > 10, "licence files under {}", third.display());
    // Owned by root, writable by no one else (lintian's and dpkg's expectation for system files).
    let listed = run(Command::new("dpkg-deb").arg("--contents").arg(deb));
    for line in listed.lines() {
        assert!(line.contains(" root/root "), "{line}");
        assert!(!line.starts_with("-rw-rw") && !line.starts_with("drwxrwx"), "{line}");
    }

    // The admin edits the conffile; the next build changes the example (the same package
    // unpacked, its example changed, repacked as version -2 with dpkg-deb): the upgrade asks
    // nothing (dpkg reads its answer from stdin, /dev/null here: a question fails the upgrade)
    // and keeps the admin's file.
    let edited = conf_text + "\n[daemon]\ndry_run = true\n";
    std::fs::write(&conf, &edited).unwrap();
    let next = dir.path().join("next");
    run(Command::new("dpkg-deb").arg("--raw-extract").arg(deb).arg(&next));
    let next_example = next.join("usr/share/doc/numapilot/examples/numapilot.toml");
    let changed = std::fs::read_to_string(&next_example).unwrap() + "\n# A key the next version documents.\n";
    std::fs::write(&next_example, &changed).unwrap();
    let control = std::fs::read_to_string(next.join("DEBIAN/control")).unwrap();
    let bumped = control.replace(&format!("Version: {version}-1\n"), &format!("Version: {version}-2\n"));
    assert_ne!(bumped, control);
    std::fs::write(next.join("DEBIAN/control"), bumped).unwrap();
    run(Command::new("sh")
        .arg("-c")
        .arg("find usr lib -type f | LC_ALL=C sort | xargs md5sum > DEBIAN/md5sums")
        .current_dir(&next));
    let next_deb = dir.path().join("next.deb");
    run(Command::new("dpkg-deb").args(["--root-owner-group", "-Znone", "--build"]).arg(&next).arg(&next_deb));
    dpkg(&["-i", next_deb.to_str().unwrap()]);
    let status = dpkg(&["--status", "numapilot"]);
    assert!(status.contains(&format!("Version: {version}-2\n")), "{status}");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), edited, "the admin's configuration");
    assert_eq!(std::fs::read_to_string(&example).unwrap(), changed, "the new example");
    // Every file as packaged but the conffile, which dpkg knows the admin changed.
    assert_eq!(dpkg(&["--verify", "numapilot"]).trim(), "??5?????? c /etc/numapilot.toml", "dpkg --verify");

    // Removed: the files go, the edited conffile stays; purged: it and the journal directory go.
    std::fs::create_dir_all(root.join("var/log/numapilot")).unwrap();
    std::fs::write(root.join("var/log/numapilot/journal.jsonl"), "{}\n").unwrap();
    // The unit preserves its runtime directory across stops (RuntimeDirectoryPreserve): the purge
    // removes it (review helper-64: the state file stayed until a reboot).
    std::fs::create_dir_all(root.join("run/numapilot")).unwrap();
    std::fs::write(root.join("run/numapilot/state.json"), "{}\n").unwrap();
    dpkg(&["--remove", "numapilot"]);
    assert!(!installed.exists());
    assert!(conf.exists(), "a removal keeps the configuration");
    dpkg(&["--purge", "numapilot"]);
    assert!(!conf.exists(), "a purge removes the configuration");
    assert!(!root.join("var/log/numapilot").exists(), "a purge removes the journal directory");
    assert!(!root.join("run/numapilot").exists(), "a purge removes the runtime directory");
    let left: Vec<_> = walk(&root).into_iter().filter(|p| !p.starts_with(&admin)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // lintian (not installed by scripts/setup.sh: 128 packages) finds no error and no warning but
    // that a first upload closes no bug report, when present.
    if let Ok(out) = Command::new("lintian").args(["--tag-display-limit", "0"]).arg(deb).output() {
        let said = String::from_utf8_lossy(&out.stdout);
        let bad: Vec<&str> = said
            .lines()
            .filter(|l| l.starts_with("E: ") || (l.starts_with("W: ") && !l.contains("initial-upload-closes-no-bugs")))
            .collect();
        assert!(bad.is_empty(), "lintian: {said}");
    }
}

/// What the maintainer scripts ask of systemd for each action dpkg gives them (Debian Policy
/// ch. 6; packaging review: the postinst did nothing on abort-upgrade, abort-remove and
/// abort-deconfigure, so a failed removal left stopped the daemon its prerm had stopped; the prerm
/// and postrm took any action, a mistyped one too, and did nothing for it, silently). systemd is
/// not this machine's init (nor a container's): the package's own scripts run in a mount namespace
/// of their own where /run/systemd/system exists and /var/log is empty, with stand-ins for
/// systemctl, deb-systemd-invoke and deb-systemd-helper first in PATH that log what they are asked.
/// Root only (the namespace).
#[test]
fn the_maintainer_scripts_answer_every_action_dpkg_gives_them() {
    if Command::new("unshare").args(["--mount", "true"]).output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("skipped: no mount namespace (not root, or no unshare)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(deb) = build(dir.path()) else { return };
    let control = dir.path().join("control");
    run(Command::new("dpkg-deb").arg("--control").arg(&deb).arg(&control));
    let stubs = dir.path().join("stubs");
    std::fs::create_dir(&stubs).unwrap();
    for tool in ["systemctl", "deb-systemd-invoke", "deb-systemd-helper"] {
        // The helper's questions (installed by the package before? enabled?) answered from STUB_ENABLED.
        let stub = format!(
            "#!/bin/sh\necho \"{tool} $*\" >> \"$STUB_LOG\"\n\
             case \" $* \" in *\" debian-installed \"* | *\" was-enabled \"*) [ \"$STUB_ENABLED\" = 1 ]; exit ;; esac\n"
        );
        let path = stubs.join(tool);
        std::fs::write(&path, stub).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let log = dir.path().join("log");
    // The package's directories the namespace starts with, listed after the script if still there.
    let left = dir.path().join("left");
    // (script, its arguments, the unit enabled, DPKG_ROOT) -> (exit 0, stdout + stderr, what it asked)
    let call = |script: &str, args: &[&str], enabled: bool, dpkg_root: &str| {
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&left);
        let out = Command::new("unshare")
            .args([
                "--mount",
                "sh",
                "-c",
                "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system /run/numapilot \
                 && mount -t tmpfs tmpfs /var/log && mkdir /var/log/numapilot || exit 99
                 \"$@\"; rc=$?
                 for d in /run/numapilot /var/log/numapilot; do if [ -e $d ]; then echo $d >> \"$LEFT\"; fi; done
                 exit $rc",
                "sh",
            ])
            .arg(control.join(script))
            .args(args)
            .env("PATH", format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", stubs.display()))
            .env("STUB_LOG", &log)
            .env("LEFT", &left)
            .env("STUB_ENABLED", if enabled { "1" } else { "0" })
            .env("DPKG_ROOT", dpkg_root)
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), said, std::fs::read_to_string(&log).unwrap_or_default())
    };
    let unit = "numapilot.service";
    let record = |enabled: bool| {
        let mut v = vec![format!("deb-systemd-helper debian-installed {unit}")];
        if enabled {
            v.push(format!("deb-systemd-helper --quiet was-enabled {unit}"));
            v.push(format!("deb-systemd-helper enable {unit}"));
        }
        v.push(format!("deb-systemd-helper update-state {unit}"));
        v.push("systemctl --system daemon-reload".into());
        v
    };
    let then = |mut v: Vec<String>, invoke: &str| {
        v.push(format!("deb-systemd-invoke {invoke} {unit}"));
        v.join("\n") + "\n"
    };
    // A first install: recorded, not started, the operator told how.
    let (ok, said, asked) = call("postinst", &["configure", ""], false, "");
    assert!(ok && said.contains("installed, not started"), "{said}");
    assert_eq!(asked, record(false).join("\n") + "\n");
    // An upgrade, and dpkg undoing a failed upgrade or deconfiguration: a running daemon restarted
    // (an enabled unit gets its links again).
    for (args, enabled) in [
        (&["configure", "0.1.0-1"][..], true),
        (&["abort-upgrade", "0.1.0-2"][..], false),
        (&["abort-upgrade", "0.1.0-2"][..], true),
        (&["abort-deconfigure", "in-favour", "other", "1.0"][..], false),
    ] {
        let (ok, said, asked) = call("postinst", args, enabled, "");
        assert!(ok, "{args:?}: {said}");
        assert_eq!(asked, then(record(enabled), "try-restart"), "{args:?}");
    }
    // A removal stops the daemon; when dpkg undoes it the daemon is started again (deb-systemd-invoke
    // starts it only if enabled). An upgrade's prerm leaves it running.
    let (ok, _, asked) = call("prerm", &["remove"], true, "");
    assert!(ok);
    assert_eq!(asked, format!("deb-systemd-invoke stop {unit}\n"));
    for (args, enabled) in [(&["abort-remove"][..], true), (&["abort-remove", "in-favour", "other", "1.0"][..], false)]
    {
        let (ok, said, asked) = call("postinst", args, enabled, "");
        assert!(ok, "{args:?}: {said}");
        assert_eq!(asked, then(record(enabled), "start"), "{args:?}");
    }
    let (ok, _, asked) = call("prerm", &["upgrade", "0.1.0-2"], true, "");
    assert!(ok && asked.is_empty(), "{asked}");
    // Installed into another root: nothing asked of this machine's systemd.
    let (ok, said, asked) = call("postinst", &["abort-remove"], true, "/tmp/elsewhere");
    assert!(ok && asked.is_empty(), "{said}{asked}");
    // The prerm's other actions: removal in favour of a conflicting package stops the daemon as a
    // removal does; the new package's failed-upgrade (after the old prerm failed) and a
    // deconfiguration (for a package that breaks this one) leave it running, as debhelper does.
    let (ok, said, asked) = call("prerm", &["remove", "in-favour", "other", "1.0"], true, "");
    assert!(ok, "{said}");
    assert_eq!(asked, format!("deb-systemd-invoke stop {unit}\n"));
    for args in [&["failed-upgrade", "0.1.0-1", "0.1.0-2"][..], &["deconfigure", "in-favour", "other", "1.0"]] {
        let (ok, said, asked) = call("prerm", args, true, "");
        assert!(ok && asked.is_empty(), "{args:?}: {said}{asked}");
    }
    // The postrm: systemd forgets the unit where its file went or changed back; an upgrade's is the
    // new postinst's to reload; a purge removes the journal and runtime directories and the unit's
    // enablement (and only a purge removes them).
    let reload = "systemctl --system daemon-reload\n";
    let both = "/run/numapilot\n/var/log/numapilot\n";
    for args in [
        &["remove"][..],
        &["abort-install"],
        &["abort-install", "0.1.0-1", "0.1.0-2"],
        &["abort-upgrade", "0.1.0-1", "0.1.0-2"],
        &["disappear", "other", "1.0"],
    ] {
        let (ok, said, asked) = call("postrm", args, true, "");
        assert!(ok, "{args:?}: {said}");
        assert_eq!(asked, reload, "{args:?}");
        assert_eq!(std::fs::read_to_string(&left).unwrap_or_default(), both, "{args:?}");
    }
    for args in [&["upgrade", "0.1.0-2"][..], &["failed-upgrade", "0.1.0-1", "0.1.0-2"]] {
        let (ok, said, asked) = call("postrm", args, true, "");
        assert!(ok && asked.is_empty(), "{args:?}: {said}{asked}");
        assert_eq!(std::fs::read_to_string(&left).unwrap_or_default(), both, "{args:?}");
    }
    let (ok, said, asked) = call("postrm", &["purge"], true, "");
    assert!(ok, "{said}");
    assert_eq!(asked, format!("deb-systemd-helper purge {unit}\n"));
    assert_eq!(std::fs::read_to_string(&left).unwrap_or_default(), "", "a purge leaves them");
    // Purged in another root: its directories go, this machine's stay, nothing asked of systemd.
    let other = dir.path().join("root");
    for d in ["var/log/numapilot", "run/numapilot"] {
        std::fs::create_dir_all(other.join(d)).unwrap();
    }
    let (ok, said, asked) = call("postrm", &["purge"], true, other.to_str().unwrap());
    assert!(ok && asked.is_empty(), "{said}{asked}");
    assert!(!other.join("var/log/numapilot").exists() && !other.join("run/numapilot").exists());
    assert_eq!(std::fs::read_to_string(&left).unwrap_or_default(), both);
    // An action dpkg does not give, or none: named, refused, and nothing done.
    for script in ["postinst", "prerm", "postrm"] {
        for action in ["bogus", "", "Remove"] {
            let (ok, said, asked) = call(script, &[action], true, "");
            assert!(!ok && said.contains(&format!("numapilot {script}: unknown action '{action}'")), "{said}");
            assert!(asked.is_empty(), "{script} {action:?}: {asked}");
            assert_eq!(std::fs::read_to_string(&left).unwrap_or_default(), both, "{script} {action:?}");
        }
    }
}

/// Every file (not directory) under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
