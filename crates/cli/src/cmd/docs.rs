//! `numapilot completions SHELL` and `numapilot man`: the shell completion scripts and the manual
//! pages, generated from the same argument definitions the commands parse with, so they cannot
//! drift from what the binary accepts; numapilot.toml(5) is rendered from the example
//! configuration (packaging/numapilot.toml), which a daemon test keeps naming every key. What
//! follows `numapilot run` (numactl's options, then a command) is not clap's: its bash, zsh and
//! fish parts are written by `run::completion` from the launcher parser's table and spliced in.
//!
//! `numactl` and `numastat`, the names numapilot answers to through a symlink, parse their own
//! options (getopt, as Debian's tools do): their manual pages are Debian's own (numactl(8),
//! numastat(8)). numapilot-run(1) lists the same options, written from the launcher parser's own
//! table (`run::documented`), since clap does not parse them.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Command;

use super::run;

/// `numapilot completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// `numapilot man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write every page under this directory as a manual tree does (e.g. /usr/local/share/man):
    /// man1/numapilot.1, one page per subcommand (man1/numapilot-daemon.1, ...) and
    /// man5/numapilot.toml.5 (the daemon's configuration file); made if missing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Prints the completion script for `a.shell` to stdout.
pub fn completions(a: CompletionsArgs, mut cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "numapilot", &mut buf);
    let script = String::from_utf8(buf).context("the completion script is not UTF-8")?;
    let either = names_or_files(&cmd);
    let script = match a.shell {
        clap_complete::Shell::Bash => bash_run(&script)?,
        clap_complete::Shell::Zsh => zsh_run(&zsh_names_or_files(&script, &either)?)?,
        clap_complete::Shell::Fish => fish_names_or_files(&script, &either) + &run::completion::fish_lines(),
        // elvish's and powershell's scripts stay as clap writes them: nothing after `run`.
        _ => script,
    };
    std::io::stdout().write_all(script.as_bytes()).context("writing the completion script")?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The options that take a known name or a file path (`--machine`, `--workload`), as (long name,
/// value name): a `Known` value parser with `ValueHint::AnyPath` beside it. Every generator offers
/// the names alone when there are any (the hint is passed over): bash falls back to file names
/// when none fits, but zsh and fish offered no file at all, so a machine or workload file could not
/// be completed there. (Not `FilePath`: with it clap_complete's bash script reads the names with
/// IFS set to a newline, as one word.)
fn names_or_files(cmd: &Command) -> Vec<(String, String)> {
    fn walk(cmd: &Command, out: &mut Vec<(String, String)>) {
        for a in cmd.get_arguments() {
            let path = a.get_value_hint() == clap::ValueHint::AnyPath;
            if let (true, false, Some(long)) = (path, a.get_possible_values().is_empty(), a.get_long()) {
                let value = a.get_value_names().and_then(|v| v.first()).map_or_else(String::new, |v| v.to_string());
                if !out.contains(&(long.to_string(), value.clone())) {
                    out.push((long.to_string(), value));
                }
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(cmd, &mut out);
    out
}

/// bash's script with `run`'s case handed to `_numapilot__run` (`run::completion`): clap's offered
/// nothing there, so bash fell back to file names for the command too.
fn bash_run(script: &str) -> anyhow::Result<String> {
    let mut out: Vec<String> = Vec::new();
    let mut lines = script.lines();
    let mut found = false;
    while let Some(line) = lines.next() {
        if line.trim_start() == "numapilot__subcmd__run)" && !found {
            found = true;
            // Its body runs to the `;;` under it (the `;;` of the case on `prev` inside it are
            // further in).
            let indent = &line[..line.len() - line.trim_start().len()];
            let end = format!("{indent}    ;;");
            loop {
                let next = lines.next().context("bash completion: the case of run does not end")?;
                if next == end {
                    break;
                }
            }
            out.extend([
                line.to_string(),
                format!("{indent}    _numapilot__run \"${{cur}}\""),
                format!("{indent}    return 0"),
                format!("{indent}    ;;"),
            ]);
            continue;
        }
        if line.starts_with("if [[ \"${BASH_VERSINFO[0]}\" -eq 4") {
            out.extend(run::completion::bash_function().lines().map(String::from));
            out.push(String::new());
        }
        out.push(line.to_string());
    }
    anyhow::ensure!(found, "bash completion: the case of run not found in the generated script");
    let joined = out.join("\n") + "\n";
    anyhow::ensure!(joined.contains("\n_numapilot__run() {"), "bash completion: the line that registers it not found");
    Ok(joined)
}

/// zsh's script with the `_arguments` call of its `run` block replaced by `run::completion`'s:
/// numactl's options, then a command and its own completion.
fn zsh_run(script: &str) -> anyhow::Result<String> {
    let mut out: Vec<String> = Vec::new();
    let mut lines = script.lines();
    let mut found = false;
    while let Some(line) = lines.next() {
        out.push(line.to_string());
        if line != "(run)" || found {
            continue;
        }
        found = true;
        // The call runs to its `&& ret=0`.
        loop {
            let next = lines.next().context("zsh completion: the arguments of run do not end")?;
            if next == "&& ret=0" {
                break;
            }
        }
        out.push(run::completion::zsh_arguments());
    }
    anyhow::ensure!(found, "zsh completion: the block of run not found in the generated script");
    Ok(out.join("\n") + "\n")
}

/// zsh's script with each of `either`'s options completing its names and file names: its action,
/// the names (`((name\:"what" ...))`), goes into a function of the script that offers both
/// (`_alternative`).
fn zsh_names_or_files(script: &str, either: &[(String, String)]) -> anyhow::Result<String> {
    let mut out: Vec<String> = Vec::new();
    let mut helpers: Vec<String> = Vec::new();
    let mut found = vec![false; either.len()];
    let mut lines = script.lines();
    while let Some(line) = lines.next() {
        let spec = either.iter().enumerate().find_map(|(i, (long, value))| {
            let head = line.trim_start_matches('*');
            let at = line.find(&format!("]:{value}:(("))?;
            head.starts_with(&format!("'--{long}=[")).then(|| (i, at + value.len() + 5))
        });
        let Some((i, names_at)) = spec else {
            out.push(line.to_string());
            continue;
        };
        found[i] = true;
        // The names run to the end of the option's spec, `))' \`, maybe lines below.
        let mut names = line[names_at..].to_string();
        while !names.ends_with("' \\") {
            let next = lines.next().context("zsh completion: an option's spec does not end")?;
            names.push('\n');
            names.push_str(next);
        }
        let names = names.strip_suffix("))' \\").context("zsh completion: an option's names do not end in ))")?;
        let name = format!("_numapilot__name_or_file_{}", helpers.len() + 1);
        helpers.push(format!(
            "(( $+functions[{name}] )) ||\n{name}() {{\n    _alternative 'names:name:(({names}))' 'files:file:_files'\n}}"
        ));
        out.push(format!("{}{name}' \\", &line[..names_at - 2]));
    }
    // A generator that writes them otherwise is no reason to offer the names alone, unsaid.
    if let Some(i) = found.iter().position(|f| !f) {
        anyhow::bail!("zsh completion: the names of --{} not found in the generated script", either[i].0);
    }
    // Defined before the script's last lines call `_numapilot`.
    let last = out
        .iter()
        .position(|l| l.starts_with("if [ \"$funcstack[1]\" = \"_numapilot\" ]"))
        .context("zsh completion: the script's call of _numapilot not found")?;
    out.splice(last..last, helpers);
    Ok(out.join("\n") + "\n")
}

/// fish's script with each of `either`'s options completing file names besides its names (`-F`
/// where the generator gave `-f`, no files).
fn fish_names_or_files(script: &str, either: &[(String, String)]) -> String {
    let longs: Vec<String> = either.iter().map(|(long, _)| format!(" -l {long} ")).collect();
    let lines: Vec<String> = script
        .lines()
        .map(|l| {
            if longs.iter().any(|long| l.contains(long.as_str())) {
                l.replacen(" -r -f -a ", " -r -F -a ", 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

/// Prints numapilot(1), or with `--out` writes every page into the directory. Every page is
/// rendered before the first file is written, so a failure leaves no partial set behind it.
pub fn man(a: ManArgs, cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    let date = page_date(std::env::var_os("SOURCE_DATE_EPOCH"))?;
    let pages = pages(cmd, &date)?;
    match a.out {
        None => {
            let (_, top) = pages.last().context("no manual page rendered")?;
            std::io::stdout().write_all(top).context("writing the manual page")?;
        }
        Some(dir) => {
            let staged = super::Staged::new(&dir, &[])?;
            for (name, text) in &pages {
                let section = name.rsplit('.').next().unwrap_or("1");
                let rel = Path::new(&format!("man{section}")).join(name);
                let _ = std::fs::create_dir(staged.path(format!("man{section}")));
                std::fs::write(staged.path(&rel), text)
                    .with_context(|| format!("writing {}", dir.join(&rel).display()))?;
            }
            staged.commit()?;
            super::run::print_out(&format!("{} manual pages in {}\n", pages.len(), dir.display()))?;
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The date every page carries, YYYY-MM-DD (UTC): of SOURCE_DATE_EPOCH when set (`source_date_epoch`,
/// as reproducible builds set it), else the one the build gave (build.rs: its SOURCE_DATE_EPOCH or
/// the commit's date), else none. Never the clock: two runs of one build write the same pages.
fn page_date(source_date_epoch: Option<std::ffi::OsString>) -> anyhow::Result<String> {
    let epoch = match source_date_epoch.filter(|v| !v.is_empty()) {
        Some(v) => v.to_str().and_then(|s| s.parse::<u64>().ok()).with_context(|| {
            format!("SOURCE_DATE_EPOCH={:?}: not a whole number of seconds since 1970-01-01", v.to_string_lossy())
        })?,
        None => match option_env!("NUMAPILOT_DATE_EPOCH") {
            Some(e) => e.parse().context("the build's NUMAPILOT_DATE_EPOCH")?,
            None => return Ok(String::new()),
        },
    };
    Ok(iso_date(epoch))
}

/// The UTC date of `epoch` (seconds since 1970-01-01) as YYYY-MM-DD.
fn iso_date(epoch: u64) -> String {
    // Days to a civil date (proleptic Gregorian), counted in 400-year eras from 0000-03-01.
    let z = (epoch / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The `.TH` line: title, section, date, source, manual, in that order, each quoted when it is
/// empty or has a space (roff would drop an empty field unquoted and shift the others left). The
/// title in capitals, as man-pages(7) has it (mandoc -Tlint: "lower case character in document
/// title").
fn title_line(title: &str, section: &str, date: &str, version: &str) -> String {
    let title = title.to_uppercase();
    let fields = [title.as_str(), section, date, &format!("numapilot {version}"), "numapilot"];
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| if f.is_empty() || f.contains(' ') { format!("\"{f}\"") } else { f.to_string() })
        .collect();
    format!(".TH {}", quoted.join(" "))
}

/// `page` (clap_mangen's roff) with a line break, a blank line and a line break (before an
/// argument's "Possible values:") as one vertical space: the blank line is a space already, and
/// the breaks beside it are ignored (mandoc -Tlint: "skipping paragraph macro: br before sp").
fn without_breaks_beside_space(page: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page);
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines() {
        out.push(line);
        if out.ends_with(&[".br", "", ".br"]) {
            out.truncate(out.len() - 3);
            out.push(".sp");
        }
    }
    (out.join("\n") + "\n").into_bytes()
}

/// `page` (clap_mangen's roff) with its `.TH` line replaced by [`title_line`]'s.
fn with_title(page: Vec<u8>, title: &str, date: &str, version: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page);
    let lines: Vec<String> = text
        .lines()
        .map(|l| if l.starts_with(".TH ") { title_line(title, "1", date, version) } else { l.to_string() })
        .collect();
    (lines.join("\n") + "\n").into_bytes()
}

/// The daemon's example configuration, every key at its default with what it does: the source of
/// numapilot.toml(5).
const EXAMPLE_CONFIG: &str = include_str!("../../../../packaging/numapilot.toml");

/// `key = value` on one line of the example configuration (a key in its table), as (key, value).
fn key_line(line: &str) -> Option<(&str, &str)> {
    let (k, v) = line.split_once(" = ")?;
    (!k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')).then_some((k, v))
}

/// numapilot.toml(5), rendered from the example configuration: its opening comment is the
/// description, each `[table]` a section, each `# --- name` line a subsection, and each key (set,
/// or commented out at its default) an entry with the comment above it.
fn config_page(date: &str, version: &str) -> Vec<u8> {
    fn esc(line: &str) -> String {
        let l = line.replace('\\', "\\e").replace('-', "\\-");
        if l.starts_with('.') || l.starts_with('\'') {
            format!("\\&{l}")
        } else {
            l
        }
    }
    let mut out = vec![
        title_line("NUMAPILOT.TOML", "5", date, version),
        ".SH NAME".into(),
        "numapilot.toml \\- configuration of the numapilot daemon".into(),
        ".SH DESCRIPTION".into(),
    ];
    let mut pending: Vec<String> = Vec::new();
    let flush = |pending: &mut Vec<String>, out: &mut Vec<String>, key: Option<(&str, &str, bool)>| {
        match key {
            Some((k, v, set)) => {
                out.push(".TP".into());
                let default = if set { "" } else { " (commented out: the default applies)" };
                out.push(format!("\\fB{}\\fR = {}{default}", esc(k), esc(v)));
            }
            None if pending.iter().all(String::is_empty) => {
                pending.clear();
                return;
            }
            // A section's or subsection's heading starts a paragraph already (mandoc -Tlint:
            // "skipping paragraph macro: PP after SH").
            None if out.last().is_some_and(|l| l.starts_with(".SH ") || l.starts_with(".SS ")) => {}
            None => out.push(".PP".into()),
        }
        // An empty comment line parts paragraphs: a new one (within the key's entry for a key),
        // never a blank line, which roff takes as a vertical space where a paragraph was meant
        // (man-pages(7)). Empty lines at either end part nothing.
        while pending.last().is_some_and(String::is_empty) {
            pending.pop();
        }
        let lead = pending.iter().take_while(|l| l.is_empty()).count();
        pending.drain(..lead);
        let part = if key.is_some() { ".IP" } else { ".PP" };
        // A word the file breaks at its hyphen ("co-" / "access") is one word again: roff would
        // put a space at the line break ("co- access"; review helper-65).
        let mut lines: Vec<String> = Vec::new();
        for l in pending.drain(..) {
            match lines.last_mut() {
                Some(prev)
                    if prev.ends_with('-') && !prev.ends_with(" -") && l.starts_with(|c: char| c.is_alphanumeric()) =>
                {
                    prev.push_str(&l)
                }
                _ => lines.push(l),
            }
        }
        let mut parted = false;
        for l in &lines {
            if l.is_empty() {
                parted = true;
            } else {
                if std::mem::take(&mut parted) {
                    out.push(part.into());
                }
                out.push(esc(l));
            }
        }
    };
    // A last empty line ends the last comment block as a blank line in the file does.
    for line in EXAMPLE_CONFIG.lines().chain(std::iter::once("")) {
        let line = line.trim_end();
        if let Some(table) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            flush(&mut pending, &mut out, None);
            out.push(format!(".SH [{}]", esc(table)));
        } else if let Some(sub) = line.strip_prefix("# --- ") {
            flush(&mut pending, &mut out, None);
            out.push(format!(".SS {}", esc(sub)));
        } else if let Some((k, v)) = key_line(line) {
            flush(&mut pending, &mut out, Some((k, v, true)));
        } else if let Some(text) = line.strip_prefix('#') {
            pending.push(text.strip_prefix(' ').unwrap_or(text).to_string());
        } else if line.is_empty() {
            // A comment block ending in a commented-out key documents that key.
            match pending.last().and_then(|l| key_line(l)).map(|(k, v)| (k.to_string(), v.to_string())) {
                Some((k, v)) => {
                    pending.pop();
                    flush(&mut pending, &mut out, Some((&k, &v, false)));
                }
                None => flush(&mut pending, &mut out, None),
            }
        }
    }
    out.push(".SH SEE ALSO".into());
    out.push("numapilot(1), numapilot\\-daemon(1)".into());
    let mut text = out.join("\n");
    text.push('\n');
    text.into_bytes()
}

/// The daemon page's sections beyond its options, as an operator looks for them (review helpers
/// 41 and 43: they were in README.md and the unit file only).
const DAEMON_SECTIONS: &str = r#".SH SIGNALS
.TP
\fBSIGTERM\fR, \fBSIGINT\fR, \fBSIGQUIT\fR
Put every process the daemon touched back as it was (its CPU affinity and cpuset; pages stay where
they are), then exit 0. A page move in flight is asked to stop first and waited for at most 10 s.
.TP
\fBSIGHUP\fR
Read the configuration file again. A bad file is rejected (logged) and the running configuration
kept; exclusions and tunables hold from the next action.
.TP
\fBSIGUSR1\fR, \fBSIGUSR2\fR, \fBSIGALRM\fR
Ignored (logged).
.SH METRICS
On \fB[daemon] metrics\fR (default 127.0.0.1:9469; \fB\-\-metrics off\fR for none), over HTTP:
.TP
\fBGET /metrics\fR
Prometheus text: steps (\fBnumapilot_step_duration_seconds\fR histogram,
\fBnumapilot_last_step_timestamp_seconds\fR), actions and failures by kind, pages moved and failed by
cause, each node's load, interference and bottleneck flags, the local-access estimate, the access
sampler's event and what became of its samples (\fBnumapilot_access_samples_total\fR,
\fBnumapilot_access_samples_discarded_total\fR by reason, lost and throttled), the daemon's
own CPU, memory and descriptors (\fBprocess_cpu_seconds_total\fR and the rest).
.TP
\fBGET /healthz\fR
The verdict of \fBnumapilot status \-\-check\fR: 200 for OK and WARNING, 503 for CRITICAL (3 steps
failed in a row, no step for 30 s past its due time, the state file cannot be saved).
.PP
\fBHEAD\fR answers as \fBGET\fR without the body; other methods get 405 with \fBAllow: GET, HEAD\fR.
.SH EXIT STATUS
.TP
\fB0\fR
Stopped by a signal, or \fB\-\-check\fR found the configuration good.
.TP
\fB1\fR
A bad configuration (file or flags: FILE:LINE and the reason on stderr), or one that cannot work on
this machine (it reserves every online CPU). The systemd unit does not restart on it.
.TP
\fB2\fR
A bad command line.
.TP
\fB75\fR
Could not start for the machine's state (EX_TEMPFAIL): another daemon on the socket or state file,
/run full, /proc unreadable. The systemd unit tries again. (A metrics port someone else holds does
not stop the start: the daemon runs, \fBstatus \-\-check\fR warns, and the port is tried again every
10 s.)
.SH ENVIRONMENT
.TP
\fBRUST_LOG\fR
Log filter, as \fB\-\-log\fR, which it overrides (checked the same way).
.TP
\fBNOTIFY_SOCKET\fR
Set by systemd for \fBType=notify\fR: the daemon says READY=1 once its socket, metrics port and
journal are open, RELOADING=1 and READY=1 around a reload, STOPPING=1 before the restore.
.TP
\fBJOURNAL_STREAM\fR
Set by systemd: when it names the daemon's stderr, log lines carry their syslog priority (\fB<3>\fR
error to \fB<7>\fR debug) and no time, for the journal.
.SH FILES
.TP
\fI/etc/numapilot.toml\fR
The configuration (numapilot.toml(5)).
.TP
\fI/run/numapilot/numapilot.sock\fR
The control socket (root only): \fBnumapilot status\fR, \fBexplain\fR, \fBadvise\fR.
.TP
\fI/run/numapilot/state.json\fR
Every touched process's original affinity and cpuset, restored at exit and, after a crash, at the
next start.
.TP
\fI/var/log/numapilot/journal.jsonl\fR
The journal of decisions, one JSON object a line, rotated to \fIjournal.jsonl.1\fR.
.SH SEE ALSO
numapilot.toml(5), numapilot(1), numactl(8), numastat(8), numad(8)
"#;

/// The exit statuses of the daemon's clients (only the daemon's page said its own; review
/// helper-65).
const STATUS_EXIT: &str = r".SH EXIT STATUS
.TP
\fB0\fR
The daemon answered.
.TP
\fB1\fR
An error: the configuration cannot be read (or, run as root, another user may write it), the socket
refused this user, the answer was malformed.
.TP
\fB2\fR
A bad command line.
.TP
\fB3\fR
No daemon is listening on the socket (LSB's \(lqprogram is not running\(rq).
.PP
With \fB\-\-check\fR, the monitoring plugin's statuses instead: 0 OK, 1 WARNING, 2 CRITICAL (no daemon
answering included), 3 UNKNOWN (the check itself could not run: a bad command line or configuration).
.SH SEE ALSO
numapilot(1), numapilot\-daemon(1), numapilot.toml(5)
";

const EXPLAIN_EXIT: &str = r".SH EXIT STATUS
.TP
\fB0\fR
The process was explained.
.TP
\fB1\fR
It is not in the view (gone, never managed, or new since the last step: the reason is printed), or
an error.
.TP
\fB2\fR
A bad command line.
.TP
\fB3\fR
No daemon is listening, and \fB\-\-local\fR was not given.
.SH SEE ALSO
numapilot(1), numapilot\-daemon(1)
";

const ADVISE_EXIT: &str = r".SH EXIT STATUS
.TP
\fB0\fR
A node list was printed (also when nothing fits and every node is advised, without \fB\-\-strict\fR).
.TP
\fB1\fR
Nothing fits with \fB\-\-strict\fR, the daemon refused the request, or the request was bad (a size,
a window, a \fB\-\-pid\fR that names no process it would manage).
.TP
\fB2\fR
A bad command line.
.SH SEE ALSO
numapilot(1), numapilot\-daemon(1), numactl(8), numad(8)
";

/// `text` for a roff text line: a backslash and a minus sign escaped (an unescaped `-` is a hyphen).
fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-").replace('\'', "\\(aq")
}

/// One argument in a synopsis: `[\fB\-\-mem\fR \fISIZE\fR]`, as man-pages(7) writes it (optional in
/// brackets, values in italics, `...` when it repeats). clap_mangen's synopsis had the option names
/// alone (`--cpus` without its `N`).
fn synopsis_arg(a: &clap::Arg) -> String {
    let range = a.get_num_args().unwrap_or_default();
    let values = || -> String {
        let names: Vec<String> = match a.get_value_names() {
            Some(names) => names.iter().map(|n| n.to_string()).collect(),
            None => vec![a.get_id().as_str().to_uppercase()],
        };
        let mut v = names.iter().map(|n| format!("\\fI{}\\fR", roff_text(n))).collect::<Vec<_>>().join(" ");
        // An option taking more values than it names (a positional's are counted as repeats).
        if range.max_values() > names.len() && !a.is_positional() {
            v.push_str("...");
        }
        v
    };
    let repeats = matches!(a.get_action(), clap::ArgAction::Append | clap::ArgAction::Count);
    let mut text = if a.is_positional() {
        values()
    } else {
        let mut names: Vec<String> =
            a.get_short().map(|c| format!("\\fB\\-{}\\fR", roff_text(&c.to_string()))).into_iter().collect();
        names.extend(a.get_long().map(|l| format!("\\fB\\-\\-{}\\fR", roff_text(l))));
        let mut t = names.join("|");
        if range.takes_values() {
            let sep = if a.is_require_equals_set() { "=" } else { " " };
            if range.min_values() == 0 {
                t.push_str(&format!("[{sep}{}]", values()).replace("[ ", " ["));
            } else {
                t.push_str(&format!("{sep}{}", values()));
            }
        }
        t
    };
    if !a.is_required_set() {
        text = format!("[{text}]");
    }
    if repeats || (a.is_positional() && range.max_values() > 1) {
        text.push_str("...");
    }
    text
}

/// The SYNOPSIS line of `cmd`: its name, its options (optional ones first, in the order of its
/// help), its operands, its subcommand.
fn synopsis(cmd: &Command) -> String {
    // As clap orders its help: display order, then short name (lower case first), then long name.
    let key = |a: &&clap::Arg| -> (usize, String) {
        let k = match (a.get_short(), a.get_long()) {
            (Some(c), _) => format!("{}{}", c.to_ascii_lowercase(), if c.is_ascii_lowercase() { '0' } else { '1' }),
            (None, Some(l)) => l.to_string(),
            (None, None) => format!("{{{}", a.get_id()),
        };
        (a.get_display_order(), k)
    };
    let mut options: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set() && !a.is_positional()).collect();
    options.sort_by_key(key);
    let (required, optional): (Vec<_>, Vec<_>) = options.into_iter().partition(|a| a.is_required_set());
    let mut words = vec![format!("\\fB{}\\fR", roff_text(cmd.get_bin_name().unwrap_or_else(|| cmd.get_name())))];
    words.extend(optional.into_iter().chain(required).map(synopsis_arg));
    words.extend(cmd.get_positionals().filter(|a| !a.is_hide_set()).map(synopsis_arg));
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        let name = format!("\\fI{}\\fR", roff_text(cmd.get_subcommand_value_name().unwrap_or("COMMAND")));
        words.push(if cmd.is_subcommand_required_set() { name } else { format!("[{name}]") });
    }
    words.join(" ")
}

/// `page` (clap_mangen's roff) with `synopsis` as its SYNOPSIS section's text.
fn with_synopsis(page: Vec<u8>, synopsis: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page);
    let mut out: Vec<&str> = Vec::new();
    let mut in_synopsis = false;
    for line in text.lines() {
        if line.starts_with(".SH ") {
            in_synopsis = line == ".SH SYNOPSIS";
            out.push(line);
            if in_synopsis {
                out.push(synopsis);
            }
        } else if !in_synopsis {
            out.push(line);
        }
    }
    (out.join("\n") + "\n").into_bytes()
}

/// `page` with Markdown's code spans (`text`, in doc comments and the example configuration) set
/// in bold, as man pages set literal text; roff printed the backticks (as quotes, in groff). In the
/// NAME section, which whatis and apropos read, the backticks are dropped instead. Spans are paired
/// within a run of text lines (a request ends it); a backtick left without a pair stays the
/// character (`\(ga`).
fn with_code_in_bold(page: Vec<u8>) -> Vec<u8> {
    fn spans(block: &mut Vec<String>, plain: bool, out: &mut Vec<String>) {
        let total: usize = block.iter().map(|l| l.matches('`').count()).sum();
        let paired = total - total % 2;
        let mut seen = 0;
        for line in block.drain(..) {
            let mut l = String::with_capacity(line.len());
            for c in line.chars() {
                if c != '`' {
                    l.push(c);
                    continue;
                }
                seen += 1;
                l.push_str(match (seen > paired, plain, seen % 2) {
                    (true, _, _) => "\\(ga",
                    (false, true, _) => "",
                    (false, false, 1) => "\\fB",
                    (false, false, _) => "\\fR",
                });
            }
            out.push(l);
        }
    }
    let text = String::from_utf8_lossy(&page);
    let mut out: Vec<String> = Vec::new();
    let mut block: Vec<String> = Vec::new();
    let mut in_name = false;
    for line in text.lines() {
        if line.starts_with('.') || line.starts_with('\'') {
            spans(&mut block, in_name, &mut out);
            if line.starts_with(".SH") {
                in_name = line == ".SH NAME";
            }
            out.push(line.to_string());
        } else {
            block.push(line.to_string());
        }
    }
    spans(&mut block, in_name, &mut out);
    (out.join("\n") + "\n").into_bytes()
}

/// numapilot-run(1)'s synopsis: numactl's forms (its arguments are numactl's, read by our own
/// numactl-compatible parser, not by clap).
const RUN_SYNOPSIS: &str = r"\fBnumapilot run\fR [\fIOPTIONS\fR] [\fB\-\-\fR] \fICOMMAND\fR [\fIARG\fR]...
.br
\fBnumapilot run\fR [\fIOPTIONS\fR] \fB\-\-show\fR
.br
\fBnumapilot run\fR \fB\-\-hardware\fR
.br
\fBnumapilot run\fR [\fISEGMENT OPTIONS\fR] \fB\-\-shm\fR \fIKEYFILE\fR|\fB\-\-file\fR \fIFILE\fR [\fB\-\-strict\fR] [\fIPOLICY\fR] [\fB\-\-touch\fR] [\fB\-\-dump\fR] [\fB\-\-dump\-nodes\fR] [\fB\-\-verify\fR]
.br
\fBnumapilot run\fR \fB\-\-version\fR|\fB\-\-help\fR";

/// numapilot-run(1)'s sections after its options.
const RUN_SECTIONS: &str = r".SH NODE AND CPU LISTS
\fINODES\fR is a comma-separated list of node numbers or \fIA\fR\-\fIB\fR ranges, or \fBall\fR.
Instead of a number a node can be \fBnetdev:\fR\fIDEV\fR (the node of network device \fIDEV\fR),
\fBblock:\fR\fIDEV\fR (of block device \fIDEV\fR), \fBfile:\fR\fIPATH\fR (of the block device holding
\fIPATH\fR) or \fBpci:\fR[\fIseg\fR:]\fIbus\fR:\fIdev\fR[.\fIfunc\fR] (of a PCI device). \fBsame\fR is the previous
\fINODES\fR given on the command line. \fICPUS\fR is a comma-separated list of CPU numbers or ranges,
or \fBall\fR.
.PP
Lists are read within the nodes and CPUs this process may use (its cpuset, and its CPU affinity for
CPUs); \fB\-\-all\fR reads them against every online node and CPU: that lifts a CPU affinity set by
\fBtaskset\fR, while the kernel still keeps the command to its cpuset. A list is inverted with \fB!\fR
and made relative to the cpuset with \fB+\fR (\fB!+0\-1\fR).
\fISIZE\fR may end in \fBk\fR, \fBm\fR or \fBg\fR.
.PP
Every list is checked against this machine, and the policy tried on a scratch thread, before
anything changes: a bad one is named, the exit status is 1 and nothing runs. Otherwise the command
is executed in place of numapilot, with the policy and CPUs set.
.SH SEE ALSO
numactl(8), numapilot(1), numapilot\-advise(1)
";

/// numapilot-run(1)'s OPTIONS section, written from the launcher parser's table (`run::OPTIONS`)
/// with what each option does (`run::documented`).
fn run_options() -> String {
    use super::run::Group;
    let docs = super::run::documented();
    let mut out = vec![".SH OPTIONS".to_string()];
    for (group, heading) in [
        (Group::Policy, "Memory policy (one of them)"),
        (Group::Cpu, "CPUs"),
        (Group::Other, "Other options"),
        (Group::Shm, "Shared memory (a policy that outlives the command)"),
    ] {
        out.push(format!(".SS {heading}"));
        for d in docs.iter().filter(|d| d.group == group) {
            let mut names: Vec<String> = d.short.map(|c| format!("\\fB\\-{c}\\fR")).into_iter().collect();
            names.push(format!("\\fB\\-\\-{}\\fR", roff_text(d.long)));
            let mut head = names.join(", ");
            if let Some(v) = d.value {
                head.push_str(&format!(" \\fI<{}>\\fR", roff_text(v)));
            }
            out.push(".TP".into());
            out.push(head);
            out.push(roff_text(d.help));
        }
    }
    out.join("\n")
}

/// `page` (clap_mangen's roff) with its `name` section (`.SH name` up to the next `.SH`) replaced
/// by `section`, which starts with its own `.SH` line.
fn with_section_replaced(page: Vec<u8>, name: &str, section: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page);
    let mut out: Vec<&str> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with(".SH ") {
            inside = line == format!(".SH {name}");
            if inside {
                out.push(section);
            }
        }
        if !inside {
            out.push(line);
        }
    }
    (out.join("\n") + "\n").into_bytes()
}

/// `page` (clap_mangen's roff) with `sections` before its VERSION section (at its end without one).
fn with_sections(page: Vec<u8>, sections: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page).into_owned();
    let at = text.find("\n.SH VERSION").map_or(text.len(), |i| i + 1);
    let mut out = text[..at].to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(sections);
    out.push_str(&text[at..]);
    out.into_bytes()
}

/// Every page, as (file name, roff text): numapilot.toml.5, then the subcommands' (depth first),
/// numapilot.1 last.
fn pages(cmd: Command, date: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: Command, date: &str, version: &str, out: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            walk(sub, date, version, out)?;
        }
        let title = cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string();
        let mut built = cmd.clone();
        built.build();
        let man = clap_mangen::Man::new(cmd);
        let mut text = Vec::new();
        man.render(&mut text).with_context(|| format!("rendering {}", man.get_filename()))?;
        text = with_title(text, &title, date, version);
        if man.get_filename() == "numapilot-run.1" {
            text = with_synopsis(text, RUN_SYNOPSIS);
            text = with_section_replaced(text, "OPTIONS", &run_options());
        } else {
            text = with_synopsis(text, &synopsis(&built));
        }
        let extra = match man.get_filename().as_str() {
            "numapilot-daemon.1" => Some(DAEMON_SECTIONS),
            "numapilot-status.1" => Some(STATUS_EXIT),
            "numapilot-explain.1" => Some(EXPLAIN_EXIT),
            "numapilot-advise.1" => Some(ADVISE_EXIT),
            "numapilot-run.1" => Some(RUN_SECTIONS),
            _ => None,
        };
        if let Some(sections) = extra {
            text = with_sections(text, sections);
        }
        text = with_code_in_bold(without_breaks_beside_space(text));
        out.push((man.get_filename(), text));
        Ok(())
    }
    // Built, the subcommands carry their display names (numapilot-sim-evidence), which name
    // their pages; the `help` subcommand clap adds has no page of its own.
    let version = cmd.get_version().unwrap_or("").to_string();
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = vec![("numapilot.toml.5".to_string(), with_code_in_bold(config_page(date, &version)))];
    walk(cmd, date, &version, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        Command::new("numapilot")
            .about("Adaptive NUMA placement for Linux.")
            .subcommand(Command::new("sim").about("Simulate").subcommand(Command::new("evidence").about("Evidence")))
            .subcommand(Command::new("daemon").about("Daemon").arg(clap::Arg::new("dry-run").long("dry-run")))
    }

    /// The options completed with names and files are found in zsh's script, and share their long
    /// name and value name with no option that takes a name only (its spec would get files too).
    #[test]
    fn names_or_files_are_the_machine_and_workload_options() {
        use clap::CommandFactory as _;
        let mut cmd = crate::Cli::command();
        cmd.build();
        let either = names_or_files(&cmd);
        let longs: std::collections::BTreeSet<&str> = either.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(longs.into_iter().collect::<Vec<_>>(), ["machine", "workload"], "{either:?}");
        fn walk(cmd: &Command, either: &[(String, String)]) {
            for a in cmd.get_arguments().filter(|a| !a.get_possible_values().is_empty()) {
                let value = a.get_value_names().and_then(|v| v.first()).map_or_else(String::new, |v| v.to_string());
                let key = (a.get_long().unwrap_or("").to_string(), value);
                let hint = a.get_value_hint();
                assert!(
                    hint == clap::ValueHint::AnyPath || !either.contains(&key),
                    "{key:?}: names only, yet with files"
                );
                // clap_complete's bash script reads such an argument's names as one word.
                assert!(hint != clap::ValueHint::FilePath, "{key:?}: names with FilePath (AnyPath, for files too)");
            }
            for sub in cmd.get_subcommands() {
                walk(sub, either);
            }
        }
        walk(&cmd, &either);
        let mut buf = Vec::new();
        clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "numapilot", &mut buf);
        let zsh = zsh_names_or_files(&String::from_utf8(buf).unwrap(), &either).expect("every one found");
        assert_eq!(zsh.matches("'files:file:_files'").count(), 4, "{zsh}");
        let missing = [("nosuch".to_string(), "X".to_string())];
        assert!(zsh_names_or_files(&zsh, &missing).is_err());
    }

    /// Every option of every page's command that takes a value has the value's name after it in
    /// the synopsis, as its help has it.
    #[test]
    fn every_option_in_a_synopsis_has_its_value_name() {
        use clap::CommandFactory as _;
        fn walk(cmd: &Command, checked: &mut usize) {
            let line = synopsis(cmd);
            for a in cmd.get_arguments().filter(|a| !a.is_positional()) {
                let name = match a.get_long() {
                    Some(l) => format!("\\fB\\-\\-{}\\fR", roff_text(l)),
                    None => format!("\\fB\\-{}\\fR", a.get_short().unwrap()),
                };
                let at = line.find(&name).unwrap_or_else(|| panic!("{name} not in {line}"));
                if let Some(v) = a.get_value_names().filter(|_| a.get_num_args().unwrap().takes_values()) {
                    let after = &line[at + name.len()..];
                    let value = format!("\\fI{}\\fR", roff_text(&v[0]));
                    let ok = ["", "=", "[", "[="].iter().any(|p| after.starts_with(&format!("{p}{value}")))
                        || after.starts_with(&format!(" {value}"))
                        || after.starts_with(&format!(" [{value}"));
                    assert!(ok, "{name} without {value}: {line}");
                    *checked += 1;
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, checked);
            }
        }
        let mut cmd = crate::Cli::command().disable_help_subcommand(true);
        cmd.build();
        let mut checked = 0;
        walk(&cmd, &mut checked);
        assert!(checked > 40, "{checked} options with values");
    }

    /// Code spans pair within a run of text lines, across its lines, never across a request.
    #[test]
    fn code_spans_pair_within_a_block_of_text() {
        let page = ".SH NAME\nx \\- a `b` c\n.SH DESCRIPTION\nsee `numapilot\nsim` and `d`\n.TP\nan odd ` one\n";
        let out = String::from_utf8(with_code_in_bold(page.as_bytes().to_vec())).unwrap();
        assert_eq!(
            out,
            ".SH NAME\nx \\- a b c\n.SH DESCRIPTION\nsee \\fBnumapilot\nsim\\fR and \\fBd\\fR\n.TP\nan odd \\(ga one\n"
        );
    }

    /// numapilot-run(1) lists every option the launcher's parser accepts (its table,
    /// `run::OPTIONS`), with a value where it takes one, and no other: its arguments are not clap's,
    /// and the page listed none of them.
    #[test]
    fn the_run_page_lists_every_option_the_launcher_parser_accepts() {
        use crate::cmd::run::getopt::HasArg;
        use clap::CommandFactory as _;
        use std::collections::BTreeSet;
        let p = pages(crate::Cli::command(), "").expect("pages");
        let page =
            String::from_utf8(p.iter().find(|(n, _)| n == "numapilot-run.1").expect("run's page").1.clone()).unwrap();
        let options: Vec<&str> =
            page.lines().skip_while(|l| *l != ".SH OPTIONS").skip(1).take_while(|l| !l.starts_with(".SH ")).collect();
        // The entries: the line after each .TP, its names bold, its value italic.
        let mut listed = BTreeSet::new();
        for head in options.windows(2).filter(|w| w[0] == ".TP").map(|w| w[1]) {
            let names: Vec<String> =
                head.split("\\fB").skip(1).map(|n| n.split("\\fR").next().unwrap().replace("\\-", "-")).collect();
            let takes_value = head.contains("\\fI<");
            for n in names {
                assert!(listed.insert((n.clone(), takes_value)), "{n} listed twice");
            }
        }
        let mut accepted = BTreeSet::new();
        for o in crate::cmd::run::OPTIONS {
            let value = o.arg == HasArg::Required;
            accepted.insert((format!("--{}", o.long), value));
            if let Some(c) = o.short {
                accepted.insert((format!("-{c}"), value));
            }
        }
        assert_eq!(listed, accepted);
        for readme in ["--membind", "-m", "--preferred-many", "-P", "--weighted-interleave", "--shm", "--dump-nodes"] {
            assert!(listed.iter().any(|(n, _)| n == readme), "{readme}");
        }
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(iso_date(0), "1970-01-01");
        assert_eq!(iso_date(86_399), "1970-01-01");
        assert_eq!(iso_date(951_782_400), "2000-02-29");
        assert_eq!(iso_date(1_709_251_199), "2024-02-29");
        assert_eq!(iso_date(1_735_689_600), "2025-01-01");
        assert_eq!(iso_date(4_107_542_400), "2100-03-01");
        assert_eq!(page_date(Some("1700000000".into())).unwrap(), "2023-11-14");
        let e = page_date(Some("-1".into())).unwrap_err().to_string();
        assert!(e.contains("SOURCE_DATE_EPOCH=\"-1\""), "{e}");
    }

    #[test]
    fn the_config_page_has_an_entry_for_every_key_of_the_example() {
        let keys: Vec<&str> = EXAMPLE_CONFIG
            .lines()
            .filter_map(|l| key_line(l.strip_prefix("# ").unwrap_or(l)))
            .map(|(k, _)| k)
            .collect();
        assert!(keys.len() > 100, "{keys:?}");
        let page = String::from_utf8(config_page("2024-05-06", "0.1.0")).expect("utf-8");
        assert_eq!(page.matches("\n.TP\n").count(), keys.len(), "{page}");
        for table in ["[daemon]", "[exclude]", "[actuation]", "[signals]", "[tunables]"] {
            assert!(page.contains(&format!(".SH {table}")), "{table}: {page}");
        }
        // Set keys show their value, commented-out ones say the default applies.
        assert!(page.contains("\\fBdry_run\\fR = false\n"), "{page}");
        assert!(page.contains("\\fBinterval_ms\\fR = 1000 (commented out: the default applies)"), "{page}");
        // roff: no text line starts a request by accident, minus signs are escaped.
        for l in page.lines().filter(|l| !l.starts_with('.')) {
            assert!(!l.starts_with('\''), "{l}");
        }
        assert!(page.contains("nice\\fR = \\-10"), "{page}");
        // A word broken at its hyphen in the file is joined: no text line ends in a hyphen that the
        // next line's word continues ("co\\-" then "access" rendered "co- access").
        let lines: Vec<&str> = page.lines().collect();
        for w in lines.windows(2) {
            let broken =
                w[0].ends_with("\\-") && !w[0].ends_with(" \\-") && w[1].starts_with(|c: char| c.is_alphanumeric());
            assert!(!broken, "{:?} / {:?}", w[0], w[1]);
        }
        assert!(page.contains("co\\-access"), "{page}");
        assert!(page.starts_with(".TH NUMAPILOT.TOML 5 2024-05-06 \"numapilot 0.1.0\" numapilot\n"), "{page}");
    }

    /// The daemon's clients say their exit statuses too (scripts branch on them: 3, no daemon;
    /// only the daemon's page had them; review helper-65).
    #[test]
    fn the_clients_pages_say_their_exit_statuses() {
        let clients = ["status", "explain", "advise"].map(|c| Command::new(c).about(c));
        let p = pages(cli().subcommands(clients), "").expect("pages");
        for (name, code) in [
            ("numapilot-status.1", "\\fB3\\fR"),
            ("numapilot-explain.1", "\\fB3\\fR"),
            ("numapilot-advise.1", "\\fB1\\fR"),
        ] {
            let names: Vec<&String> = p.iter().map(|(n, _)| n).collect();
            let text = String::from_utf8(
                p.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} not in {names:?}")).1.clone(),
            )
            .unwrap();
            let status = text.find(".SH EXIT STATUS").unwrap_or_else(|| panic!("{name}: no EXIT STATUS"));
            assert!(text.find(".SH VERSION").is_none_or(|v| status < v), "{name}");
            assert!(text.contains(code) && !text.contains('\u{c}'), "{name}: {text}");
        }
    }

    /// The daemon's page has what an operator looks for beyond the options, before VERSION.
    #[test]
    fn the_daemon_page_has_signals_exit_status_environment_and_files() {
        let p = pages(cli(), "").expect("pages");
        let (_, page) = p.iter().find(|(n, _)| n == "numapilot-daemon.1").expect("the daemon's page");
        let page = String::from_utf8_lossy(page);
        let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} missing: {page}"));
        let order = [".SH SIGNALS", ".SH METRICS", ".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH FILES"].map(at);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{page}");
        assert!(page.contains("\\fB75\\fR") && page.contains("/run/numapilot/state.json"), "{page}");
        if let Some(v) = page.find(".SH VERSION") {
            assert!(order[4] < v, "before VERSION: {page}");
        }
        let other = &p.iter().find(|(n, _)| n == "numapilot-sim.1").expect("sim's page").1;
        assert!(!String::from_utf8_lossy(other).contains(".SH SIGNALS"), "the daemon's alone");
    }

    #[test]
    fn a_page_per_command_named_by_its_path_the_top_one_last() {
        let p = pages(cli(), "").expect("pages");
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["numapilot.toml.5", "numapilot-sim-evidence.1", "numapilot-sim.1", "numapilot-daemon.1", "numapilot.1"]
        );
        let daemon = String::from_utf8(p[3].1.clone()).expect("utf-8");
        assert!(daemon.starts_with(".ie"), "roff: {daemon}");
        assert!(daemon.contains("dry\\-run"), "the option is on its page: {daemon}");
    }
}
