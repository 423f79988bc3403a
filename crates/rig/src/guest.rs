//! Booting a guest, running its scenario and reading the results back.
//!
//! Problem: a test on the host needs the outputs of commands run inside an emulated machine, reliably, with a clear
//! error when the guest never comes up. The Debian cloud kernel has no 9P or virtio-fs, so there is no shared
//! directory. Approach: two serial ports. `ttyS0` carries the kernel console and whatever the scenario prints (kept
//! for error reports); `ttyS1` carries only the results protocol of `rig/guest/lib.sh` (sections of base64 text with
//! the command's exit code). QEMU writes both to files; the host waits for QEMU to exit (the guest powers off when
//! its scenario ends), kills it at the timeout, then parses the results file.
//!
//! ```text
//!  host                                      guest (TCG)
//!  Rig::boot(spec, scenario)
//!    initrd = base image ++ scenario cpio
//!    qemu ... -serial file:console.log  --->  ttyS0: kernel log, scenario chatter
//!             -serial file:results.log  <---  ttyS1: NPRIG BOOTED 2.31
//!                                              NPRIG BEGIN topo / base64 / NPRIG STDERR / base64 / NPRIG END topo 0
//!                                              NPRIG DONE 0      (then 8 KiB of empty lines that push it
//!                                                                 out of the port; poweroff -f, QEMU exits)
//!    parse results.log -> GuestRun { sections, boot_s, scenario_rc }
//! ```
//!
//! Units: wall times in milliseconds measured on the host; `boot_s` is the guest's own uptime (seconds) when init
//! started the scenario. Limits: results travel after the guest powers off, so a scenario cannot be steered
//! interactively; a guest that never powers off costs its whole timeout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Result, RigError};
use crate::image::{build_base, build_scenario, ImageInputs};
use crate::provision::{self, tail, which, Binaries, Kernel};
use crate::spec::GuestSpec;

/// Lines of the console shown in errors.
const CONSOLE_TAIL_LINES: usize = 40;

/// Lines that start a kernel crash report; the report's head names the cause, and its register dump and stack
/// trace can push it out of a plain tail.
const CRASH_MARKERS: &[&str] = &["Kernel panic", "Oops", "BUG:", "WARNING:", "general protection fault"];

/// What of a console to show in an error: the last lines, preceded (when the kernel crashed earlier than they
/// reach) by the crash report's start: a few lines before the first crash marker and the marker's own lines.
pub fn console_excerpt(console: &str) -> String {
    let lines: Vec<&str> = console.lines().collect();
    let tail_from = lines.len().saturating_sub(CONSOLE_TAIL_LINES);
    let first_crash = lines.iter().position(|l| CRASH_MARKERS.iter().any(|m| l.contains(m)));
    match first_crash {
        Some(i) if i < tail_from => {
            let head_from = i.saturating_sub(5);
            let head_to = (i + 10).min(tail_from);
            let mut s = lines[head_from..head_to].join("\n");
            if head_to < tail_from {
                s += &format!("\n[... {} lines ...]", tail_from - head_to);
            }
            s + "\n" + &lines[tail_from..].join("\n")
        }
        _ => lines[tail_from..].join("\n"),
    }
}

/// Poll interval while waiting for QEMU, milliseconds. Default 50: short next to a multi-second boot, long enough
/// not to busy a host core the emulated CPUs need.
const POLL_MS: u64 = 50;

/// One command's results, as sent by `rig_run`/`rig_file` in the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Section {
    /// Exit code of the command.
    pub rc: i32,
    /// Its standard output (raw bytes; use [`Section::stdout`] for text).
    #[serde(serialize_with = "lossy")]
    pub out: Vec<u8>,
    /// Its standard error.
    #[serde(serialize_with = "lossy")]
    pub err: Vec<u8>,
}

fn lossy<S: serde::Serializer>(b: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(b))
}

impl Section {
    /// Standard output as text (invalid UTF-8 replaced).
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
    /// Standard error as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.err).into_owned()
    }
}

/// The outcome of one guest run.
#[derive(Debug, Clone, Serialize)]
pub struct GuestRun {
    /// The guest spec's name.
    pub guest: String,
    /// Sections by name, in name order.
    pub sections: BTreeMap<String, Section>,
    /// Exit code of the scenario script.
    pub scenario_rc: i32,
    /// Guest uptime when the scenario started, seconds (the kernel's boot time under emulation).
    pub boot_s: Option<f64>,
    /// Host wall time from QEMU start to exit, milliseconds.
    pub wall_ms: u64,
    /// The whole serial console (kernel log and scenario output).
    #[serde(skip)]
    pub console: String,
    /// Directory holding console.log, results.log, the initrd and result.json.
    pub dir: PathBuf,
}

impl GuestRun {
    /// A section by name, or an error message listing the ones that exist (for test assertions).
    pub fn section(&self, name: &str) -> std::result::Result<&Section, String> {
        self.sections.get(name).ok_or_else(|| {
            format!(
                "guest {}: no section {name:?} (have: {}); console tail:\n{}",
                self.guest,
                self.sections.keys().cloned().collect::<Vec<_>>().join(", "),
                console_excerpt(&self.console)
            )
        })
    }

    /// The last lines of the console (with the start of a kernel crash report, if any, before them).
    pub fn console_tail(&self) -> String {
        console_excerpt(&self.console)
    }
}

/// Decodes standard base64 (RFC 4648, with padding), ignoring ASCII whitespace; `None` on any other character.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let chars: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if chars.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(chars.len() / 4 * 3);
    for (k, q) in chars.chunks(4).enumerate() {
        let last = k == chars.len() / 4 - 1;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

/// What the results channel said.
#[derive(Debug, Default, PartialEq)]
pub struct Results {
    /// Sections by name.
    pub sections: BTreeMap<String, Section>,
    /// Guest uptime when init started the scenario.
    pub boot_s: Option<f64>,
    /// Scenario exit code, if the guest got that far.
    pub done_rc: Option<i32>,
}

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Parses the results channel. A record cut short (the guest died mid-section) is an error naming the line.
pub fn parse_results(guest: &str, text: &str) -> Result<Results> {
    enum St {
        Out,
        In { name: String, out: String, err: String, in_err: bool },
    }
    let mut r = Results::default();
    let mut st = St::Out;
    let perr = |no: usize, line: &str, reason: &str| RigError::Protocol {
        guest: guest.to_string(),
        line_no: no,
        line: line.chars().take(200).collect(),
        reason: reason.to_string(),
    };
    let mut last_no = 0;
    for (i, raw) in text.split('\n').enumerate() {
        let no = i + 1;
        last_no = no;
        let line = raw.trim_end_matches('\r');
        match &mut st {
            St::Out => {
                let words: Vec<&str> = line.split(' ').collect();
                match words.as_slice() {
                    [""] => {}
                    ["NPRIG", "BOOTED", up] => r.boot_s = up.parse().ok(),
                    ["NPRIG", "DONE", rc] => {
                        r.done_rc = Some(rc.parse().map_err(|_| perr(no, line, "exit code is not a number"))?)
                    }
                    ["NPRIG", "BEGIN", name] if valid_name(name) => {
                        if r.sections.contains_key(*name) {
                            return Err(perr(no, line, "section name used twice"));
                        }
                        st = St::In { name: name.to_string(), out: String::new(), err: String::new(), in_err: false }
                    }
                    _ => return Err(perr(no, line, "expected NPRIG BOOTED/BEGIN/DONE")),
                }
            }
            St::In { name, out, err, in_err } => {
                if line == "NPRIG STDERR" && !*in_err {
                    *in_err = true;
                } else if let Some(rest) = line.strip_prefix("NPRIG END ") {
                    let (n, rc) = rest.split_once(' ').ok_or_else(|| perr(no, line, "END needs a name and a code"))?;
                    if n != name.as_str() {
                        return Err(perr(no, line, &format!("END of {n:?} inside section {name:?}")));
                    }
                    let rc: i32 = rc.parse().map_err(|_| perr(no, line, "exit code is not a number"))?;
                    let out = base64_decode(out).ok_or_else(|| perr(no, line, "stdout is not valid base64"))?;
                    let err = base64_decode(err).ok_or_else(|| perr(no, line, "stderr is not valid base64"))?;
                    r.sections.insert(name.clone(), Section { rc, out, err });
                    st = St::Out;
                } else if line.starts_with("NPRIG ") {
                    return Err(perr(no, line, &format!("marker inside section {name:?}")));
                } else if *in_err {
                    err.push_str(line);
                } else {
                    out.push_str(line);
                }
            }
        }
    }
    if let St::In { name, .. } = st {
        return Err(perr(last_no, "", &format!("results end inside section {name:?} (guest died mid-record?)")));
    }
    Ok(r)
}

/// A prepared rig: kernel, QEMU and the common initramfs, ready to boot any number of guests.
#[derive(Debug)]
pub struct Rig {
    qemu: PathBuf,
    kernel: Kernel,
    base: Vec<u8>,
    out_dir: PathBuf,
}

/// How to prepare a rig.
#[derive(Debug, Clone)]
pub struct RigOptions {
    /// Install missing Debian packages (as root).
    pub install: bool,
    /// Cache for the kernel download (default `rig/cache`, or `$NUMAPILOT_RIG_CACHE`).
    pub cache_dir: PathBuf,
    /// Where each guest's run directory goes (default `rig/out`, or `$NUMAPILOT_RIG_OUT`).
    pub out_dir: PathBuf,
    /// Build our binaries with the release profile (default: dev profile, `$NUMAPILOT_RIG_RELEASE=1` for release).
    pub release: bool,
    /// Use these binaries instead of building them.
    pub binaries: Option<Binaries>,
    /// The kernel series the guests boot (default: 6.12 LTS; `NUMAPILOT_RIG_KERNEL` replaces that one only).
    pub kernel: provision::KernelSeries,
}

impl Default for RigOptions {
    fn default() -> Self {
        let root = provision::workspace_root();
        let env_dir = |var: &str, default: PathBuf| std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
        RigOptions {
            install: std::env::var_os("NUMAPILOT_RIG_NO_INSTALL").is_none(),
            cache_dir: env_dir("NUMAPILOT_RIG_CACHE", root.join("rig/cache")),
            out_dir: env_dir("NUMAPILOT_RIG_OUT", root.join("rig/out")),
            release: std::env::var("NUMAPILOT_RIG_RELEASE").is_ok_and(|v| v == "1"),
            binaries: None,
            kernel: provision::KernelSeries::default(),
        }
    }
}

/// Timings of [`Rig::prepare`], milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PrepareTimes {
    /// Package check/installation.
    pub packages_ms: u64,
    /// Kernel resolution, download and unpack.
    pub kernel_ms: u64,
    /// cargo build of our binaries.
    pub build_ms: u64,
    /// Assembling the common initramfs.
    pub image_ms: u64,
}

impl Rig {
    /// Installs what is missing, fetches the kernel, builds our binaries and the common initramfs.
    pub fn prepare(opts: &RigOptions) -> Result<(Rig, PrepareTimes)> {
        let mut times = PrepareTimes::default();
        let t = Instant::now();
        if opts.install {
            provision::ensure_packages()?;
        }
        let qemu = which("qemu-system-x86_64").ok_or_else(|| RigError::MissingProgram {
            program: "qemu-system-x86_64".into(),
            hint: "apt-get install --no-install-recommends qemu-system-x86 (or unset NUMAPILOT_RIG_NO_INSTALL)".into(),
        })?;
        times.packages_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        std::fs::create_dir_all(&opts.cache_dir).map_err(|e| RigError::io(&opts.cache_dir, e))?;
        let kernel = provision::ensure_kernel(&opts.cache_dir, opts.kernel)?;
        times.kernel_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        let binaries = match &opts.binaries {
            Some(b) => b.clone(),
            None => provision::build_binaries(opts.release)?,
        };
        times.build_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        std::fs::create_dir_all(&opts.out_dir).map_err(|e| RigError::io(&opts.out_dir, e))?;
        let base = build_base(&ImageInputs { binaries, kernel: kernel.clone(), scratch: opts.out_dir.clone() })?;
        times.image_ms = t.elapsed().as_millis() as u64;
        Ok((Rig { qemu, kernel, base, out_dir: opts.out_dir.clone() }, times))
    }

    /// The kernel in use.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Size of the common initramfs, bytes.
    pub fn base_image_len(&self) -> usize {
        self.base.len()
    }

    /// Boots `spec`, runs `scenario` (a busybox sh script using rig/guest/lib.sh) with extra `files`
    /// (guest path, content) and returns its results. The run directory is `out_dir/<spec.name>[-tag]`.
    pub fn boot(&self, spec: &GuestSpec, tag: &str, scenario: &str, files: &[(String, Vec<u8>)]) -> Result<GuestRun> {
        spec.validate()?;
        let dir_name = if tag.is_empty() { spec.name.clone() } else { format!("{}-{tag}", spec.name) };
        let dir = self.out_dir.join(dir_name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| RigError::io(&dir, e))?;

        let initrd = dir.join("initrd.cpio");
        let mut img = self.base.clone();
        img.extend_from_slice(&build_scenario(scenario, files));
        std::fs::write(&initrd, &img).map_err(|e| RigError::io(&initrd, e))?;
        for (path, mb) in spec.nvme_images(&dir) {
            let f = std::fs::File::create(&path).map_err(|e| RigError::io(&path, e))?;
            f.set_len(mb * 1024 * 1024).map_err(|e| RigError::io(&path, e))?;
        }
        let console = dir.join("console.log");
        let results = dir.join("results.log");
        let qemu_err = dir.join("qemu-stderr.log");
        let args = spec.qemu_args(&self.kernel.vmlinuz, &initrd, &console, &results, &dir)?;
        std::fs::write(
            dir.join("qemu-cmd.txt"),
            format!(
                "{} {}\n",
                self.qemu.display(),
                args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
            ),
        )
        .map_err(|e| RigError::io(dir.join("qemu-cmd.txt"), e))?;
        let err_file = std::fs::File::create(&qemu_err).map_err(|e| RigError::io(&qemu_err, e))?;

        let start = Instant::now();
        let mut child = Command::new(&self.qemu)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err_file)
            .spawn()
            .map_err(|e| RigError::Command { command: self.qemu.display().to_string(), detail: e.to_string() })?;
        let read_text = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(e) => return Err(RigError::io(&self.qemu, e)),
            }
            if start.elapsed() > spec.timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RigError::Timeout {
                    guest: spec.name.clone(),
                    timeout_s: spec.timeout.as_secs(),
                    console_tail: console_excerpt(&read_text(&console)),
                });
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        };
        let wall_ms = start.elapsed().as_millis() as u64;
        let console_text = read_text(&console);
        let failed = |reason: String| RigError::GuestFailed {
            guest: spec.name.clone(),
            reason,
            qemu_stderr: tail(&read_text(&qemu_err), 20),
            console_tail: console_excerpt(&console_text),
        };
        if !status.success() {
            return Err(failed(format!("QEMU exited with {status}")));
        }
        // A results channel that breaks the protocol fails the run with the console's tail beside it
        // (what the scenario printed around the record that broke).
        let parsed = parse_results(&spec.name, &read_text(&results)).map_err(|e| failed(e.to_string()))?;
        let Some(scenario_rc) = parsed.done_rc else {
            let why =
                if parsed.boot_s.is_none() { "the guest never reached init" } else { "the scenario never finished" };
            return Err(failed(format!("no NPRIG DONE on the results channel: {why}")));
        };
        // The initrd is large and rebuilt every run; the logs stay for inspection.
        let _ = std::fs::remove_file(&initrd);
        let run = GuestRun {
            guest: spec.name.clone(),
            sections: parsed.sections,
            scenario_rc,
            boot_s: parsed.boot_s,
            wall_ms,
            console: console_text,
            dir: dir.clone(),
        };
        let json = serde_json::to_string_pretty(&run).map_err(|e| RigError::io(dir.join("result.json"), e.into()))?;
        std::fs::write(dir.join("result.json"), json).map_err(|e| RigError::io(dir.join("result.json"), e))?;
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_excerpt_keeps_the_crash_head() {
        let mut c: Vec<String> = (0..20).map(|i| format!("boot {i}")).collect();
        c.push("sysrq: Trigger a crash".into());
        c.push("Kernel panic - not syncing: sysrq triggered crash".into());
        c.extend((0..100).map(|i| format!("trace {i}")));
        let e = console_excerpt(&c.join("\n"));
        assert!(e.contains("sysrq: Trigger a crash") && e.contains("Kernel panic"), "{e}");
        assert!(e.contains("[... "), "{e}");
        assert!(e.ends_with("trace 99"));
        assert!(!e.contains("boot 0\n"));
        let quiet: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        let e = console_excerpt(&quiet.join("\n"));
        assert_eq!(e.lines().count(), CONSOLE_TAIL_LINES);
        assert!(e.starts_with("line 60"));
    }

    #[test]
    fn base64_round_trips_busybox_output() {
        // `printf 'node 0 cpus: 0 1\n' | base64` and friends, from busybox 1.35.
        assert_eq!(base64_decode("bm9kZSAwIGNwdXM6IDAgMQo=").unwrap(), b"node 0 cpus: 0 1\n");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert_eq!(base64_decode("YWI=").unwrap(), b"ab");
        assert_eq!(base64_decode("YWJj\nZGVm\n").unwrap(), b"abcdef");
        assert_eq!(base64_decode("").unwrap(), b"");
        assert!(base64_decode("YQ=").is_none());
        assert!(base64_decode("YQ==YQ==").is_none());
        assert!(base64_decode("Y!==").is_none());
    }

    #[test]
    fn results_protocol() {
        let text = "NPRIG BOOTED 2.31\r\nNPRIG BEGIN topo\nYQ==\nNPRIG STDERR\nNPRIG END topo 0\n\
                    NPRIG BEGIN bad.spec-1\nNPRIG STDERR\nZXJy\nNPRIG END bad.spec-1 1\nNPRIG DONE 0\n\n\n\n";
        let r = parse_results("g", text).unwrap();
        assert_eq!(r.boot_s, Some(2.31));
        assert_eq!(r.done_rc, Some(0));
        assert_eq!(r.sections["topo"], Section { rc: 0, out: b"a".to_vec(), err: vec![] });
        assert_eq!(r.sections["bad.spec-1"], Section { rc: 1, out: vec![], err: b"err".to_vec() });
    }

    #[test]
    fn truncated_and_garbled_results_are_errors() {
        let e = parse_results("g", "NPRIG BOOTED 1\nNPRIG BEGIN topo\nYQ==\n").unwrap_err().to_string();
        assert!(e.contains("inside section \"topo\""), "{e}");
        let e = parse_results("g", "hello\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("hello"), "{e}");
        let e = parse_results("g", "NPRIG BEGIN a\nNPRIG STDERR\nNPRIG END b 0\n").unwrap_err().to_string();
        assert!(e.contains("END of \"b\" inside section \"a\""), "{e}");
        let e = parse_results("g", "NPRIG BEGIN a\n!!!!\nNPRIG STDERR\nNPRIG END a 0\n").unwrap_err().to_string();
        assert!(e.contains("base64"), "{e}");
        let e =
            parse_results("g", "NPRIG BEGIN a\nNPRIG END a 0\nNPRIG BEGIN a\nNPRIG END a 0\n").unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
    }
}
