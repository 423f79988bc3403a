//! The guest's initramfs: busybox, the reference tools with their libraries, our binaries, the init script.
//!
//! Problem: the guest has no disk and no package manager; everything a scenario runs must be in one cpio archive,
//! including every shared library the dynamic binaries load, at the path the dynamic loader looks for it.
//! Approach: for each dynamic binary ask `ldd` (the host's loader, the same glibc the guest will use since the files
//! are copied from the host) which files it loads and copy each to the same absolute path.
//!
//! ```text
//!   /init                         rig/guest/init (PID 1)           /rig/lib.sh      rig/guest/lib.sh
//!   /bin/busybox + applet links   busybox-static                   /rig/scenario.sh appended per guest
//!   /usr/bin/numactl, numastat    Debian numactl (the reference)   /usr/bin/numad   Debian numad
//!   /usr/local/bin/numapilot      ours (debug info stripped)       /usr/local/bin/rig-toucher
//!   /usr/local/bin/rig-sampler    the race's judge's reads         /usr/local/bin/rig-pair (pairs.sh)
//!   /usr/local/bin/capture-fixtures.sh                             /lib/modules/rig/*.ko + pci-modules (vmxnet3)
//!                                                                  + boot-modules (inet_diag, tcp_diag, unix_diag)
//!   /opt/numapilot/compat/numactl -> /usr/local/bin/numapilot      (numactl-compatible symlink mode; NOT in PATH,
//!   /opt/numapilot/compat/numastat -> /usr/local/bin/numapilot      so `numactl` in PATH is always Debian's)
//!   /lib/x86_64-linux-gnu/*.so*, /lib64/ld-linux-x86-64.so.2       per ldd
//! ```
//!
//! The archive is kept uncompressed: it is loaded from host memory, and decompressing under emulation would cost
//! more boot time than the larger size costs. Limits: x86-64 only; the host's glibc must be new enough for our
//! binaries (it built them, so it is).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cpio::Archive;
use crate::error::{Result, RigError};
use crate::provision::{run, which, Binaries, Kernel};

/// The init script (PID 1 in the guest).
pub const GUEST_INIT: &str = include_str!("../../../rig/guest/init");
/// Shell helpers sourced before every scenario (the results protocol).
pub const GUEST_LIB: &str = include_str!("../../../rig/guest/lib.sh");
/// The fixture capture script (the same file the host runs).
pub const CAPTURE_SCRIPT: &str = include_str!("../../../scripts/capture-fixtures.sh");

/// Where our binaries live in the guest.
pub const GUEST_NUMAPILOT: &str = "/usr/local/bin/numapilot";
/// Directory of the numactl/numastat-named symlinks to numapilot in the guest (not in PATH).
pub const GUEST_COMPAT_DIR: &str = "/opt/numapilot/compat";

/// Driver modules the guest's init loads when a matching PCI device exists: (vendor, device, module path under
/// `kernel/`). Facts: vmxnet3 is PCI 15ad:07b0 (the driver's id table); the module has no dependencies
/// (`depends=` is empty in its modinfo).
const PCI_MODULES: &[(&str, &str, &str)] = &[("0x15ad", "0x07b0", "drivers/net/vmxnet3/vmxnet3.ko")];

/// Modules every guest loads at boot, in this order (a module after the ones it depends on), paths under `kernel/`.
/// The socket-diagnostics families: a Debian system loads them the first time a NETLINK_SOCK_DIAG request names
/// their family (the kernel's `sock_load_diag_module` asks modprobe for `net-pf-16-proto-4-type-N`, the aliases
/// these modules carry: 1 unix, 2 and 10 inet, 2-6 TCP), as `ss` and the daemon's socket source do. The guest has no
/// modprobe tree, so without them the daemon saw no unix peers and read /proc/net/tcp instead of the TCP dump, unlike
/// on a real machine. Facts: Debian's 6.12 cloud kernel builds them as modules (`CONFIG_INET_DIAG=m`,
/// `CONFIG_INET_TCP_DIAG=m`, `CONFIG_UNIX_DIAG=m`); `depends=` in their modinfo is empty but for tcp_diag's
/// `inet_diag`.
const BOOT_MODULES: &[&str] = &["net/ipv4/inet_diag.ko", "net/ipv4/tcp_diag.ko", "net/unix/unix_diag.ko"];

/// The reference tools copied from the host, by program name.
const REFERENCE_TOOLS: &[&str] = &["numactl", "numastat", "numad"];

/// One file the dynamic loader maps for a binary, per `ldd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LddEntry {
    /// The path the loader will open (where the file must be in the guest).
    pub path: PathBuf,
}

/// Parses `ldd` output into the files to copy. The vDSO has no file and is skipped; "not found" is an error.
pub fn parse_ldd(binary: &Path, text: &str) -> Result<Vec<LddEntry>> {
    let bad = |line: &str, reason: &str| RigError::Ldd {
        binary: binary.to_path_buf(),
        line: line.to_string(),
        reason: reason.to_string(),
    };
    let mut v = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not a dynamic executable") || line == "statically linked" {
            continue;
        }
        // "name => /path (0xaddr)", "/path (0xaddr)", "linux-vdso.so.1 (0xaddr)", "name => not found"
        let target = match line.split_once("=>") {
            Some((_, rhs)) => rhs.trim(),
            None => line,
        };
        if target.starts_with("not found") {
            return Err(bad(line, "library not found on the host"));
        }
        let path = target.split_whitespace().next().ok_or_else(|| bad(line, "empty"))?;
        if !path.starts_with('/') {
            if path.starts_with("linux-vdso") || path.starts_with("linux-gate") {
                continue;
            }
            return Err(bad(line, "no absolute path"));
        }
        v.push(LddEntry { path: PathBuf::from(path) });
    }
    Ok(v)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| RigError::io(path, e))
}

fn guest_path(p: &Path) -> Result<&str> {
    p.to_str().ok_or_else(|| RigError::io(p, std::io::Error::other("path is not UTF-8")))
}

/// Reads our binary without its debug info (`objcopy --strip-debug` into a temporary file); the unstripped file
/// when objcopy is missing.
fn read_stripped(path: &Path, scratch: &Path) -> Result<Vec<u8>> {
    if which("objcopy").is_none() {
        return read(path);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "bin".into());
    // The pid keeps two rigs preparing at once (a test run and a fixture capture) off each other's file, the
    // counter two threads of one process (tests booting guests in parallel: one removed the file the other was
    // about to read, CI of fafbab0).
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = scratch.join(format!("{name}.{}.{seq}.stripped", std::process::id()));
    run(Command::new("objcopy").arg("--strip-debug").arg(path).arg(&out))?;
    let data = read(&out)?;
    let _ = std::fs::remove_file(&out);
    Ok(data)
}

/// Adds a dynamic binary at `guest` and every library it loads at the loader's path.
fn add_dynamic(a: &mut Archive, host: &Path, guest: &str, data: Vec<u8>) -> Result<()> {
    a.file(guest, 0o755, &data);
    add_libs_only(a, host)
}

/// Inputs of the common image.
#[derive(Debug, Clone)]
pub struct ImageInputs {
    /// Our binaries.
    pub binaries: Binaries,
    /// The kernel (for its driver modules).
    pub kernel: Kernel,
    /// A writable directory for temporary files.
    pub scratch: PathBuf,
}

/// Builds the common part of every guest's initramfs (everything but the scenario).
pub fn build_base(inputs: &ImageInputs) -> Result<Vec<u8>> {
    let mut a = Archive::new();
    for d in ["proc", "sys", "dev", "tmp", "run", "root", "etc", "var/log", "var/run"] {
        a.dir(d, 0o755);
    }
    a.char_dev("dev/console", 0o600, 5, 1);
    a.file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n");
    a.file("etc/group", 0o644, b"root:x:0:\n");

    let busybox = which("busybox").ok_or_else(|| RigError::MissingProgram {
        program: "busybox".into(),
        hint: "apt-get install busybox-static".into(),
    })?;
    let bb = read(&busybox)?;
    a.file("bin/busybox", 0o755, &bb);
    add_libs_only(&mut a, &busybox)?;
    let list = run(Command::new(&busybox).arg("--list"))?;
    for applet in list.lines().map(str::trim).filter(|l| !l.is_empty() && *l != "busybox") {
        let p = format!("bin/{applet}");
        if !a.contains(&p) {
            a.symlink(&p, "busybox");
        }
    }

    for tool in REFERENCE_TOOLS {
        let host = which(tool).ok_or_else(|| RigError::MissingProgram {
            program: tool.to_string(),
            hint: "apt-get install numactl numad".into(),
        })?;
        let real = host.canonicalize().map_err(|e| RigError::io(&host, e))?;
        let guest = format!("usr/bin/{tool}");
        add_dynamic(&mut a, &real, &guest, read(&real)?)?;
    }

    let b = &inputs.binaries;
    add_dynamic(&mut a, &b.numapilot, GUEST_NUMAPILOT, read_stripped(&b.numapilot, &inputs.scratch)?)?;
    add_dynamic(&mut a, &b.toucher, "usr/local/bin/rig-toucher", read_stripped(&b.toucher, &inputs.scratch)?)?;
    add_dynamic(&mut a, &b.sampler, "usr/local/bin/rig-sampler", read_stripped(&b.sampler, &inputs.scratch)?)?;
    add_dynamic(&mut a, &b.pair, "usr/local/bin/rig-pair", read_stripped(&b.pair, &inputs.scratch)?)?;
    a.file("usr/local/bin/capture-fixtures.sh", 0o755, CAPTURE_SCRIPT.as_bytes());
    for name in ["numactl", "numastat"] {
        a.symlink(&format!("{GUEST_COMPAT_DIR}/{name}"), GUEST_NUMAPILOT);
    }

    if let Some(m) = &inputs.kernel.modules {
        let mut table = String::new();
        for (vendor, device, rel) in PCI_MODULES {
            // A kernel without this module (e.g. an override kernel with the driver built in): nothing to load.
            let Some(data) = module_bytes(m, rel)? else { continue };
            let name = rel.rsplit('/').next().unwrap_or(rel);
            a.file(&format!("lib/modules/rig/{name}"), 0o644, &data);
            table.push_str(&format!("{vendor} {device} {name}\n"));
        }
        if !table.is_empty() {
            a.file("lib/modules/rig/pci-modules", 0o644, table.as_bytes());
        }
        let mut boot = String::new();
        for rel in BOOT_MODULES {
            // Built in, or missing from an override kernel: nothing to load.
            let Some(data) = module_bytes(m, rel)? else { continue };
            let name = rel.rsplit('/').next().unwrap_or(rel);
            a.file(&format!("lib/modules/rig/{name}"), 0o644, &data);
            boot.push_str(&format!("{name}\n"));
        }
        if !boot.is_empty() {
            a.file("lib/modules/rig/boot-modules", 0o644, boot.as_bytes());
        }
    }

    a.file("init", 0o755, GUEST_INIT.as_bytes());
    a.file("rig/lib.sh", 0o644, GUEST_LIB.as_bytes());
    Ok(a.finish())
}

/// The module at `rel` under `modules/kernel/`, plain or xz-compressed (decompressed here: the guest's busybox insmod
/// takes plain files); `None` when the kernel has no such file.
fn module_bytes(modules: &Path, rel: &str) -> Result<Option<Vec<u8>>> {
    let xz = modules.join("kernel").join(format!("{rel}.xz"));
    let plain = modules.join("kernel").join(rel);
    if plain.is_file() {
        return read(&plain).map(Some);
    }
    if !xz.is_file() {
        return Ok(None);
    }
    let out = Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .output()
        .map_err(|e| RigError::Command { command: format!("xz -dc {}", xz.display()), detail: e.to_string() })?;
    if !out.status.success() {
        return Err(RigError::Command {
            command: format!("xz -dc {}", xz.display()),
            detail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(Some(out.stdout))
}

/// Files that put one more dynamic binary of ours into a guest, for `Rig::boot`'s `files`: the binary without its
/// debug info at `guest` (e.g. `usr/local/bin/numapilot-wakeups`) and every library `ldd` says it loads, at the
/// loader's path (libraries the base image already has are repeated; the kernel's unpacker overwrites a file
/// with its later, identical copy).
pub fn binary_files(host: &Path, guest: &str, scratch: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = vec![(guest.to_string(), read_stripped(host, scratch)?)];
    for e in ldd(host)? {
        files.push((guest_path(&e.path)?.to_string(), read(&e.path)?));
    }
    Ok(files)
}

/// The libraries `ldd` says `host` loads.
fn ldd(host: &Path) -> Result<Vec<LddEntry>> {
    let out = Command::new("ldd")
        .arg(host)
        .output()
        .map_err(|e| RigError::Command { command: format!("ldd {}", host.display()), detail: e.to_string() })?;
    // ldd exits 1 for static binaries with "not a dynamic executable", which parse_ldd accepts.
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    parse_ldd(host, &text)
}

/// Adds the libraries `ldd` says `host` loads, each at the loader's path, unless already in the archive (busybox is
/// static; this is a no-op then).
fn add_libs_only(a: &mut Archive, host: &Path) -> Result<()> {
    for e in ldd(host)? {
        let p = guest_path(&e.path)?;
        if !a.contains(p) {
            a.file(p, 0o755, &read(&e.path)?);
        }
    }
    Ok(())
}

/// The per-guest archive: the scenario script and any extra files (appended after the common image).
pub fn build_scenario(script: &str, files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut a = Archive::new();
    a.file("rig/scenario.sh", 0o755, script.as_bytes());
    for (path, data) in files {
        a.file(path, 0o755, data);
    }
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibnuma.so.1 => /lib/x86_64-linux-gnu/libnuma.so.1 (0x7f87)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f87)\n\t/lib64/ld-linux-x86-64.so.2 (0x7f87)\n";
        let v = parse_ldd(Path::new("/usr/bin/numactl"), text).unwrap();
        let paths: Vec<&str> = v.iter().map(|e| e.path.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            ["/lib/x86_64-linux-gnu/libnuma.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
        );
        assert!(parse_ldd(Path::new("/bin/busybox"), "\tnot a dynamic executable\n").unwrap().is_empty());
    }

    #[test]
    fn ldd_not_found_names_the_library() {
        let e = parse_ldd(Path::new("/x"), "\tlibgone.so.3 => not found\n").unwrap_err().to_string();
        assert!(e.contains("libgone.so.3") && e.contains("not found"), "{e}");
    }

    #[test]
    fn guest_scripts_are_embedded() {
        assert!(GUEST_INIT.starts_with("#!/bin/sh"));
        assert!(GUEST_INIT.contains("/rig/scenario.sh"));
        assert!(GUEST_LIB.contains("NPRIG BEGIN"));
        assert!(CAPTURE_SCRIPT.contains("numastat -p"));
    }
}
