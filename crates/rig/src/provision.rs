//! Getting what the rig needs onto the host: Debian packages, the guest kernel, and the project's binaries.
//!
//! * Packages: `qemu-system-x86` (the emulator), `busybox-static` (the guest's userland), `cpio` (to cross-check our
//!   archives), `numactl` and `numad` (the reference tools the guest runs next to ours), `xz-utils` (to unpack kernel
//!   modules), `binutils` (`objcopy`, to strip debug info from our binaries). Missing ones are installed with
//!   `apt-get install --no-install-recommends` when running as root; otherwise the error names them.
//! * Kernel: the newest installable `linux-image-6.12.*-cloud-amd64-unsigned`, resolved with `apt-cache` (running
//!   `apt-get update` once if the package lists are missing), fetched with `apt-get download` and unpacked with
//!   `dpkg -x` into the cache directory. It is never installed on the host. `NUMAPILOT_RIG_KERNEL=/path/vmlinuz`
//!   overrides all of this for the default series (its modules are then looked up next to it, in
//!   `../lib/modules/*`). Without network, an already unpacked kernel in the cache is used.
//! * A second series, [`KernelSeries::Debian12`]: Debian 12's own 6.1 LTS kernel
//!   (`linux-image-6.1.0-N-cloud-amd64-unsigned`, newest ABI number N), the kernel most Debian servers run, from
//!   before 6.2 changed what `sched_setaffinity` keeps (the mask a task asked for survives cpuset changes since 6.2,
//!   `user_cpus_ptr`; on 6.1 a cpuset change resets it). Rig tests that ask for it boot it beside the default.
//!
//! ```text
//!   apt-cache pkgnames linux-image-6.12.  ->  filter *-cloud-amd64-unsigned with a candidate  ->  newest
//!   apt-get download PKG  ->  dpkg -x PKG.deb cache/kernel/PKG/  ->  cache/kernel/PKG/boot/vmlinuz-*
//! ```
//!
//! The cloud kernel is used because it has what the rig needs built in (NUMA, NUMA balancing, page migration,
//! `SCHED_DEBUG` for `/proc/PID/sched`, PSI, cpusets, NVMe, virtio-pci) and boots fast (few drivers).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, RigError};

/// Debian packages the rig needs on the host, with a program each provides (used to tell whether it is installed).
pub const PACKAGES: &[(&str, &str)] = &[
    ("qemu-system-x86", "qemu-system-x86_64"),
    ("busybox-static", "busybox"),
    ("cpio", "cpio"),
    ("numactl", "numactl"),
    ("numad", "numad"),
    ("xz-utils", "xz"),
    ("binutils", "objcopy"),
];

/// Suffix of the kernel package names (the cloud flavour, without the signed shim's dependency).
const KERNEL_SUFFIX: &str = "-cloud-amd64-unsigned";

/// Which Debian kernel series the guests boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelSeries {
    /// 6.12 LTS (`linux-image-6.12.N+debX-cloud-amd64-unsigned`: Debian 12's backports, Debian 13's own): the
    /// rig's kernel unless a test asks for another.
    #[default]
    Lts612,
    /// 6.1 LTS, Debian 12's own kernel (`linux-image-6.1.0-N-cloud-amd64-unsigned`).
    Debian12,
}

impl KernelSeries {
    /// The series a version names as `numapilot-rig --kernel` takes it: `6.12` or `6.1`.
    pub fn from_version(v: &str) -> Option<Self> {
        [KernelSeries::Lts612, KernelSeries::Debian12].into_iter().find(|k| k.version() == v)
    }

    /// The series' version: `6.12`, `6.1`.
    pub fn version(self) -> &'static str {
        match self {
            KernelSeries::Lts612 => "6.12",
            KernelSeries::Debian12 => "6.1",
        }
    }

    /// Every package of the series starts with this (`apt-cache pkgnames` takes it as is).
    pub fn prefix(self) -> &'static str {
        match self {
            KernelSeries::Lts612 => "linux-image-6.12.",
            KernelSeries::Debian12 => "linux-image-6.1.0-",
        }
    }

    /// The release the guest reports (`/proc/sys/kernel/osrelease`) starts with this.
    pub fn release_prefix(self) -> &'static str {
        match self {
            KernelSeries::Lts612 => "6.12.",
            KernelSeries::Debian12 => "6.1.0-",
        }
    }

    /// The number that orders the series' packages (newest highest), or `None` for names outside the series or
    /// of another flavour: the patch level N of `6.12.N+debX`, the ABI number N of `6.1.0-N` (Debian raises it
    /// with each stable update that changes the ABI, so it orders them too).
    pub fn package_key(self, name: &str) -> Option<u32> {
        match self {
            KernelSeries::Lts612 => kernel_package_patch(name),
            KernelSeries::Debian12 => {
                let abi = name.strip_prefix(self.prefix())?.strip_suffix(KERNEL_SUFFIX)?;
                if abi.is_empty() || !abi.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                abi.parse().ok()
            }
        }
    }
}

/// Runs a command, returning its stdout; a failure carries the command line and the tail of stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String> {
    let line = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RigError::Command { command: line.clone(), detail: e.to_string() })?;
    if !out.status.success() {
        return Err(RigError::Command {
            command: line,
            detail: format!("{}; stderr: {}", out.status, tail(&String::from_utf8_lossy(&out.stderr), 20)),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Finds `program` in PATH (plus the sbin directories, which a non-login root shell may lack).
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Installs the missing [`PACKAGES`] (as root, with apt-get); errors name what is still missing.
pub fn ensure_packages() -> Result<()> {
    let missing: Vec<&str> = PACKAGES.iter().filter(|(_, prog)| which(prog).is_none()).map(|(p, _)| *p).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(RigError::MissingProgram {
            program: missing.join(", "),
            hint: format!("run as root, or: apt-get install --no-install-recommends {}", missing.join(" ")),
        });
    }
    let install = |pkgs: &[&str]| {
        run(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(pkgs))
    };
    if install(&missing).is_err() {
        // Stale or absent package lists are the usual cause; refresh once and retry.
        run(Command::new("apt-get").args(["update", "-q"]))?;
        install(&missing)?;
    }
    for (pkg, prog) in PACKAGES {
        if which(prog).is_none() {
            return Err(RigError::MissingProgram {
                program: prog.to_string(),
                hint: format!("apt-get installed {pkg} but {prog} is still not in PATH"),
            });
        }
    }
    Ok(())
}

/// A guest kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The bzImage.
    pub vmlinuz: PathBuf,
    /// `lib/modules/<release>` of the same package (for the virtio-net driver), if present.
    pub modules: Option<PathBuf>,
    /// Where it came from (package name or the override path), for reports.
    pub origin: String,
}

/// The version number N of `linux-image-6.12.N+debX-cloud-amd64-unsigned`, or `None` for other names.
pub fn kernel_package_patch(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(KernelSeries::Lts612.prefix())?.strip_suffix(KERNEL_SUFFIX)?;
    let (patch, abi) = rest.split_once('+')?;
    if abi.is_empty() || abi.contains('-') {
        return None;
    }
    patch.parse().ok()
}

/// Whether `apt-cache policy PKG` output shows an installable candidate.
fn has_candidate(policy: &str) -> bool {
    policy.lines().any(|l| {
        let l = l.trim();
        l.strip_prefix("Candidate:").is_some_and(|v| v.trim() != "(none)" && !v.trim().is_empty())
    })
}

/// The newest installable kernel package of `series` per apt's lists.
pub fn resolve_kernel_package(series: KernelSeries) -> Result<String> {
    let list = || -> Result<Vec<String>> {
        let names = run(Command::new("apt-cache").args(["pkgnames", series.prefix()]))?;
        let mut v: Vec<String> = names.lines().filter(|n| series.package_key(n).is_some()).map(String::from).collect();
        v.sort_by_key(|n| std::cmp::Reverse(series.package_key(n)));
        Ok(v)
    };
    let mut names = list()?;
    if names.is_empty() && is_root() {
        run(Command::new("apt-get").args(["update", "-q"]))?;
        names = list()?;
    }
    for n in &names {
        let policy = run(Command::new("apt-cache").args(["policy", n]))?;
        if has_candidate(&policy) {
            return Ok(n.clone());
        }
    }
    Err(RigError::NoKernel(format!(
        "apt knows {} {} named {}*{KERNEL_SUFFIX} but none is installable; run apt-get update",
        names.len(),
        if names.len() == 1 { "package" } else { "packages" },
        series.prefix()
    )))
}

fn find_in(dir: &Path, prefix: &str) -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with(prefix)))
        .collect();
    v.sort();
    v.pop()
}

fn kernel_in(root: &Path, origin: String) -> Option<Kernel> {
    let vmlinuz = find_in(&root.join("boot"), "vmlinuz-")?;
    let modules = find_in(&root.join("lib/modules"), "");
    Some(Kernel { vmlinuz, modules, origin })
}

/// The guest kernel of `series`: the override (for the default series only), or the newest package unpacked in
/// `cache/kernel/` (downloading it if needed).
pub fn ensure_kernel(cache: &Path, series: KernelSeries) -> Result<Kernel> {
    if let Some(p) = std::env::var_os("NUMAPILOT_RIG_KERNEL").filter(|_| series == KernelSeries::default()) {
        let vmlinuz = PathBuf::from(p);
        if !vmlinuz.is_file() {
            return Err(RigError::NoKernel(format!("NUMAPILOT_RIG_KERNEL={} is not a file", vmlinuz.display())));
        }
        let modules = vmlinuz.parent().and_then(|b| b.parent()).and_then(|r| find_in(&r.join("lib/modules"), ""));
        return Ok(Kernel { origin: vmlinuz.display().to_string(), vmlinuz, modules });
    }
    let kdir = cache.join("kernel");
    let pkg = match resolve_kernel_package(series) {
        Ok(p) => p,
        Err(e) => {
            // Offline or no apt: fall back to the newest kernel of the series already unpacked (by its number:
            // by name, 6.12.99 sorted after 6.12.117).
            let cached = std::fs::read_dir(&kdir).ok().and_then(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter_map(|p| Some((series.package_key(p.file_name()?.to_str()?)?, p)))
                    .max_by_key(|(key, _)| *key)
                    .map(|(_, p)| p)
            });
            return cached
                .and_then(|d| {
                    let origin = d.file_name()?.to_string_lossy().into_owned();
                    kernel_in(&d, origin + " (cached; apt: unavailable)")
                })
                .ok_or(e);
        }
    };
    let dest = kdir.join(&pkg);
    if let Some(k) = kernel_in(&dest, pkg.clone()) {
        return Ok(k);
    }
    let dl = cache.join("download");
    std::fs::create_dir_all(&dl).map_err(|e| RigError::io(&dl, e))?;
    run(Command::new("apt-get").arg("download").arg(&pkg).current_dir(&dl))?;
    let deb = find_in(&dl, &format!("{pkg}_")).ok_or_else(|| {
        RigError::NoKernel(format!("apt-get download {pkg} succeeded but no {pkg}_*.deb is in {}", dl.display()))
    })?;
    // Unpack into a temporary directory and rename, so an interrupted unpack is never taken for a kernel.
    let tmp = kdir.join(format!(".{pkg}.partial"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| RigError::io(&tmp, e))?;
    run(Command::new("dpkg").arg("-x").arg(&deb).arg(&tmp))?;
    std::fs::rename(&tmp, &dest).map_err(|e| RigError::io(&dest, e))?;
    let _ = std::fs::remove_file(&deb);
    kernel_in(&dest, pkg.clone())
        .ok_or_else(|| RigError::NoKernel(format!("{pkg} unpacked into {} has no boot/vmlinuz-*", dest.display())))
}

/// The project's binaries that go into the guest.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The `numapilot` CLI.
    pub numapilot: PathBuf,
    /// The `rig-toucher` workload.
    pub toucher: PathBuf,
    /// The race scenario's `rig-sampler`.
    pub sampler: PathBuf,
    /// The pairs scenario's `rig-pair` (processes that talk or share memory).
    pub pair: PathBuf,
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| {
        // Only reachable if the source tree moved after the build; the relative path still names it.
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    })
}

/// Extra cargo features for the guests' `numapilot` and `rig-toucher` builds, comma- or space-separated, e.g.
/// `numapilot/ebpf` (default: none, the plain build).
pub const FEATURES_ENV: &str = "NUMAPILOT_RIG_FEATURES";

/// Runs `cargo build --message-format=json-render-diagnostics ARGS` in the workspace and returns the executables
/// cargo reports, by target name.
fn cargo_build(args: &[&str], features: &[String], release: bool) -> Result<(Vec<(String, PathBuf)>, String)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args(["build", "--message-format=json-render-diagnostics"]).args(args);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    if release {
        cmd.arg("--release");
    }
    let out = run(&mut cmd)?;
    let mut exes = Vec::new();
    for line in out.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else { continue };
        if let Some(name) = v["target"]["name"].as_str() {
            exes.push((name.to_string(), PathBuf::from(exe)));
        }
    }
    Ok((exes, format!("{cmd:?}")))
}

/// The features named in [`FEATURES_ENV`].
pub fn features_from_env() -> Vec<String> {
    parse_features(&std::env::var(FEATURES_ENV).unwrap_or_default())
}

/// Splits a feature list on commas and spaces (cargo's own `--features` syntax).
pub fn parse_features(list: &str) -> Vec<String> {
    list.split([',', ' ']).filter(|f| !f.is_empty()).map(String::from).collect()
}

/// Builds `numapilot`, `rig-toucher`, `rig-sampler` and `rig-pair` with cargo (a no-op when up to date, so a stale binary is never tested)
/// and returns the paths cargo reports. `release` selects the release profile, else the dev profile; the cargo
/// features in `$NUMAPILOT_RIG_FEATURES` (see [`FEATURES_ENV`]) are added when set.
pub fn build_binaries(release: bool) -> Result<Binaries> {
    let args = [
        "-p",
        "numapilot",
        "--bin",
        "numapilot",
        "-p",
        "numapilot-rig",
        "--bin",
        "rig-toucher",
        "--bin",
        "rig-sampler",
        "--bin",
        "rig-pair",
    ];
    let (exes, command) = cargo_build(&args, &features_from_env(), release)?;
    let find = |what: &str| {
        exes.iter().find(|(n, _)| n == what).map(|(_, p)| p.clone()).ok_or_else(|| RigError::Command {
            command: command.clone(),
            detail: format!("cargo reported no executable for {what}"),
        })
    };
    Ok(Binaries {
        numapilot: find("numapilot")?,
        toucher: find("rig-toucher")?,
        sampler: find("rig-sampler")?,
        pair: find("rig-pair")?,
    })
}

/// Builds one more binary of the workspace (`cargo build -p PACKAGE --bin BIN --features FEATURES`), for a
/// scenario that needs it in the guest (put it there with [`crate::image::binary_files`] and `Rig::boot`'s files).
/// Features are cargo's syntax (`numapilot-ebpf/ebpf`).
pub fn build_binary(package: &str, bin: &str, features: &[String], release: bool) -> Result<PathBuf> {
    let (exes, command) = cargo_build(&["-p", package, "--bin", bin], features, release)?;
    exes.into_iter()
        .find(|(n, _)| n == bin)
        .map(|(_, p)| p)
        .ok_or_else(|| RigError::Command { command, detail: format!("cargo reported no executable for {bin}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names() {
        assert_eq!(kernel_package_patch("linux-image-6.12.107+deb12-cloud-amd64-unsigned"), Some(107));
        assert_eq!(kernel_package_patch("linux-image-6.12.9+deb13-cloud-amd64-unsigned"), Some(9));
        assert_eq!(kernel_package_patch("linux-image-6.12.107+deb12-cloud-amd64"), None);
        assert_eq!(kernel_package_patch("linux-image-6.12.107+deb12-amd64-unsigned"), None);
        assert_eq!(kernel_package_patch("linux-image-6.12.107+deb12-rt-cloud-amd64-unsigned"), None);
        assert_eq!(kernel_package_patch("linux-image-6.1.0-9-cloud-amd64-unsigned"), None);
        let d12 = KernelSeries::Debian12;
        assert_eq!(d12.package_key("linux-image-6.1.0-54-cloud-amd64-unsigned"), Some(54));
        assert_eq!(d12.package_key("linux-image-6.1.0-9-cloud-amd64-unsigned"), Some(9));
        assert_eq!(d12.package_key("linux-image-6.1.0-54-cloud-amd64-dbg"), None);
        assert_eq!(d12.package_key("linux-image-6.1.0-54-cloud-amd64"), None);
        assert_eq!(d12.package_key("linux-image-6.1.0-54-rt-cloud-amd64-unsigned"), None);
        assert_eq!(d12.package_key("linux-image-6.12.107+deb12-cloud-amd64-unsigned"), None);
        assert_eq!(KernelSeries::Lts612.package_key("linux-image-6.1.0-54-cloud-amd64-unsigned"), None);
        assert_eq!(KernelSeries::from_version("6.1"), Some(d12));
        assert_eq!(KernelSeries::from_version("6.12"), Some(KernelSeries::Lts612));
        assert_eq!(KernelSeries::from_version("6"), None);
        for k in [KernelSeries::Lts612, d12] {
            assert!(k.release_prefix().starts_with(&format!("{}.", k.version())), "{k:?}");
        }
    }

    #[test]
    fn candidates() {
        let none = "linux-image-6.12.111+deb12-cloud-amd64-unsigned:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n";
        let some =
            "linux-image-6.12.107+deb12-cloud-amd64-unsigned:\n  Installed: (none)\n  Candidate: 6.12.107-1~deb12u1\n";
        assert!(!has_candidate(none));
        assert!(has_candidate(some));
        assert!(!has_candidate(""));
    }

    #[test]
    fn features_are_split_on_commas_and_spaces() {
        assert_eq!(parse_features("numapilot/ebpf, numapilot-rig/x  y"), ["numapilot/ebpf", "numapilot-rig/x", "y"]);
        assert!(parse_features("").is_empty());
        assert!(parse_features(" , ").is_empty());
    }

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
