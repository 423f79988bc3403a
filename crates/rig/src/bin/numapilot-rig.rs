//! `numapilot-rig`: boot the multi-node guests by hand, and regenerate the guest fixtures.
//!
//! ```text
//! numapilot-rig presets                         the guest specs (JSON)
//! numapilot-rig boot PRESET [SCENARIO.sh]       boot one guest with a scenario (default: rig/scenarios/checks.sh),
//!                                               print a summary; everything lands in rig/out/PRESET/
//! numapilot-rig capture-fixtures [--out DIR] [PRESET...]
//!                                               boot each guest (default: all) with rig/scenarios/capture.sh and
//!                                               replace DIR/rig-<major.minor>-PRESET (DIR default: fixtures/)
//! ```
//! Environment: NUMAPILOT_RIG_KERNEL, NUMAPILOT_RIG_CACHE, NUMAPILOT_RIG_OUT, NUMAPILOT_RIG_NO_INSTALL,
//! NUMAPILOT_RIG_RELEASE (see the crate documentation).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use numapilot_rig::provision::workspace_root;
use numapilot_rig::{GuestSpec, Rig, RigOptions};

const CHECKS: &str = include_str!("../../../../rig/scenarios/checks.sh");
const CAPTURE: &str = include_str!("../../../../rig/scenarios/capture.sh");

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn preset(name: &str) -> Res<GuestSpec> {
    GuestSpec::preset(name).ok_or_else(|| {
        let names: Vec<String> = GuestSpec::presets().into_iter().map(|g| g.name).collect();
        format!("unknown preset {name:?} (have: {})", names.join(", ")).into()
    })
}

fn prepare() -> Res<Rig> {
    let (rig, t) = Rig::prepare(&RigOptions::default())?;
    eprintln!(
        "rig: kernel {} ({}), initramfs {} KiB; prepare: packages {} ms, kernel {} ms, build {} ms, image {} ms",
        rig.kernel().vmlinuz.display(),
        rig.kernel().origin,
        rig.base_image_len() / 1024,
        t.packages_ms,
        t.kernel_ms,
        t.build_ms,
        t.image_ms
    );
    Ok(rig)
}

fn boot(args: &[String]) -> Res<()> {
    let [name, rest @ ..] = args else { return Err("usage: numapilot-rig boot PRESET [SCENARIO.sh]".into()) };
    let spec = preset(name)?;
    let script = match rest {
        [] => CHECKS.to_string(),
        [p] => std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?,
        _ => return Err("usage: numapilot-rig boot PRESET [SCENARIO.sh]".into()),
    };
    let rig = prepare()?;
    let run = rig.boot(&spec, "", &script, &[])?;
    println!(
        "guest {}: userspace after {:.2} s (guest uptime), QEMU wall {} ms, scenario exit {}",
        run.guest,
        run.boot_s.unwrap_or(f64::NAN),
        run.wall_ms,
        run.scenario_rc
    );
    for (name, s) in &run.sections {
        println!("  {name:<40} rc={:<4} {} bytes out, {} bytes err", s.rc, s.out.len(), s.err.len());
    }
    println!("results: {}", run.dir.join("result.json").display());
    Ok(())
}

/// `6.12.107+deb12-cloud-amd64` -> `6.12`.
fn major_minor(release: &str) -> Option<String> {
    let mut it = release.trim().split('.');
    let (a, b) = (it.next()?, it.next()?);
    (a.chars().all(|c| c.is_ascii_digit()) && b.chars().all(|c| c.is_ascii_digit())).then(|| format!("{a}.{b}"))
}

fn capture(args: &[String]) -> Res<()> {
    let mut out = workspace_root().join("fixtures");
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--out" {
            out = PathBuf::from(it.next().ok_or("--out needs a directory")?);
        } else {
            names.push(a.clone());
        }
    }
    let specs: Vec<GuestSpec> =
        if names.is_empty() { GuestSpec::presets() } else { names.iter().map(|n| preset(n)).collect::<Res<_>>()? };
    let rig = prepare()?;
    for spec in specs {
        let run = rig.boot(&spec, "capture", CAPTURE, &[])?;
        let cap = run.section("capture")?;
        if cap.rc != 0 {
            return Err(format!("guest {}: capture-fixtures.sh exit {}: {}", spec.name, cap.rc, cap.stderr()).into());
        }
        let uname = run.section("uname")?.stdout();
        let mm = major_minor(&uname).ok_or_else(|| format!("guest {}: odd uname -r {uname:?}", spec.name))?;
        let tar = run.section("fixture")?;
        if tar.rc != 0 || tar.out.is_empty() {
            return Err(format!("guest {}: tar exit {}: {}", spec.name, tar.rc, tar.stderr()).into());
        }
        let dest = out.join(format!("rig-{mm}-{}", spec.name));
        extract(&tar.out, &dest, &run.dir)?;
        // Say which machine this was: the guest spec and the kernel package, next to the guest's own notes.
        let cmd = dest.join("expected/cmd.txt");
        let mut notes = std::fs::read_to_string(&cmd).map_err(|e| format!("{}: {e}", cmd.display()))?;
        notes += &format!(
            "rig guest (crates/rig GuestSpec::preset({:?}), QEMU TCG): {}\nrig kernel package: {}\n\
             rig scenario: rig/scenarios/capture.sh (the first pid is a rig-toucher bound by numactl --membind=1 \
             --cpunodebind=1)\n",
            spec.name,
            serde_json::to_string(&spec)?,
            rig.kernel().origin
        );
        std::fs::write(&cmd, notes).map_err(|e| format!("{}: {e}", cmd.display()))?;
        println!(
            "{}: {} (guest userspace after {:.2} s, wall {} ms; {}",
            spec.name,
            dest.display(),
            run.boot_s.unwrap_or(f64::NAN),
            run.wall_ms,
            cap.stdout().trim()
        );
    }
    Ok(())
}

/// Replaces `dest` with the tar archive's content (unpacked next to it first, so a failure leaves the old one).
fn extract(tar: &[u8], dest: &Path, scratch: &Path) -> Res<()> {
    let file = scratch.join("fixture.tar");
    std::fs::write(&file, tar).map_err(|e| format!("{}: {e}", file.display()))?;
    let parent = dest.parent().ok_or("fixture directory has no parent")?;
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let tmp = parent.join(format!(".{}.new", dest.file_name().unwrap_or_default().to_string_lossy()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let st = Command::new("tar").arg("-xf").arg(&file).arg("-C").arg(&tmp).arg("--no-same-owner").status()?;
    if !st.success() {
        return Err(format!("tar -xf {} failed: {st}", file.display()).into());
    }
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    std::fs::rename(&tmp, dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let res = match args.first().map(String::as_str) {
        Some("presets") => {
            serde_json::to_string_pretty(&GuestSpec::presets()).map(|s| println!("{s}")).map_err(Into::into)
        }
        Some("boot") => boot(&args[1..]),
        Some("capture-fixtures") => capture(&args[1..]),
        _ => Err("usage: numapilot-rig presets | boot PRESET [SCENARIO.sh] | capture-fixtures [--out DIR] [PRESET...]"
            .into()),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("numapilot-rig: {e}");
            ExitCode::FAILURE
        }
    }
}
