//! `numapilot daemon | status | explain | advise`: the daemon and the commands that talk to it.
//! The work is in the daemon crate (`numapilot_daemon::{run, control, advise}`); this module parses
//! flags, sets up logging and prints.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueHint;
use numapilot_daemon::config::{Overrides, Source, DEFAULT_SOCKET_PATH};
use numapilot_daemon::control::{self, ControlError, Request};
use numapilot_daemon::live::LiveError;
use numapilot_daemon::{advise, run};
use numapilot_topology::Topology;

use super::run::print_out;

/// `numapilot daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// Configuration file (default /etc/numapilot.toml; a missing default file means defaults, a
    /// missing file given here is an error).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check the configuration (file and flags) and exit: 0 when valid (what it contradicts, such as
    /// an --include an exclusion cancels, is warned about on stderr), 1 when not.
    #[arg(long)]
    pub check: bool,
    /// Plan and journal every action, apply none.
    #[arg(long)]
    pub dry_run: bool,
    /// Step interval, ms [default: `[daemon] interval_ms` (or `[tunables] interval_ms`) of the
    /// configuration, else 1000].
    #[arg(long, value_name = "MS", value_hint = ValueHint::Other)]
    pub interval_ms: Option<u64>,
    /// Journal file (JSON lines); "" for none [default: `[daemon] journal` of the configuration,
    /// else /var/log/numapilot/journal.jsonl].
    // clap's PathBuf parser refuses an empty value; "" is this flag's documented "none".
    #[arg(long, value_name = "FILE", value_parser = empty_or_path)]
    pub journal: Option<PathBuf>,
    /// State file (originals of touched processes, for restore) [default: `[daemon] state` of the
    /// configuration, else /run/numapilot/state.json].
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Control socket path [default: `[daemon] socket` of the configuration, else
    /// /run/numapilot/numapilot.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Prometheus metrics address IP:PORT, or "off" [default: `[daemon] metrics` of the
    /// configuration, else 127.0.0.1:9469].
    #[arg(long, value_name = "ADDR|off", value_hint = ValueHint::Other)]
    pub metrics: Option<String>,
    /// Never touch processes with this name (comm); repeatable, added to the file's list.
    #[arg(long, value_name = "COMM", value_hint = ValueHint::Other)]
    pub exclude: Vec<String>,
    /// Never touch this pid; repeatable.
    #[arg(long, value_name = "PID", value_hint = ValueHint::Other)]
    pub exclude_pid: Vec<u32>,
    /// Also manage processes that placed themselves (narrowed affinity, explicit memory policy).
    #[arg(long)]
    pub include_pinned: bool,
    /// Manage only processes with this name (comm), with those of --include-pid and [include];
    /// repeatable, added to the file's list. Exclusions still win.
    #[arg(long, value_name = "COMM", value_hint = ValueHint::Other)]
    pub include: Vec<String>,
    /// Manage only this pid, with the other inclusions (numad -S 0 -p PID); repeatable.
    #[arg(long, value_name = "PID", value_hint = ValueHint::Other)]
    pub include_pid: Vec<u32>,
    /// Log level (error, warn, info, debug, trace, off) or target=level directives, comma separated;
    /// RUST_LOG, when set, wins.
    #[arg(long, value_name = "LEVEL", default_value = "info", value_parser = super::Known(log_levels), hide_possible_values = true)]
    pub log: String,
}

/// `numapilot status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The daemon's control socket [default: `[daemon] socket` of /etc/numapilot.toml, else
    /// /run/numapilot/numapilot.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The daemon's configuration file, for its socket [default: /etc/numapilot.toml].
    #[arg(long, value_name = "FILE", conflicts_with = "socket")]
    pub config: Option<PathBuf>,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
    /// Health check for monitoring: one line per finding (OK, WARNING, CRITICAL) and the exit
    /// status of a monitoring plugin: 0 OK, 1 WARNING (a failed step, stalled reads, a page move
    /// stuck in the kernel, the journal not written, changing nothing though not a dry run), 2
    /// CRITICAL (3 steps failed in a row, no step for 30 s past its due time, the state file
    /// unsaved, no daemon, or no answer within --timeout), 3 UNKNOWN (the daemon could not be
    /// asked: the configuration, permission).
    #[arg(long)]
    pub check: bool,
    /// With --check: seconds the daemon has to answer before the check says CRITICAL (a hung
    /// daemon; a monitoring agent's own limit is often 10 s).
    #[arg(long, value_name = "SECS", default_value_t = 5.0, requires = "check", value_hint = ValueHint::Other)]
    pub timeout: f64,
}

/// `numapilot explain PID`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The process.
    #[arg(value_hint = ValueHint::Other, value_parser = process_id, allow_negative_numbers = true)]
    pub pid: u32,
    /// The daemon's control socket [default: `[daemon] socket` of /etc/numapilot.toml, else
    /// /run/numapilot/numapilot.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print the explanation as JSON.
    #[arg(long)]
    pub json: bool,
    /// When no daemon runs, observe this machine twice (1 s apart) and explain from that instead.
    #[arg(long)]
    pub local: bool,
    /// The daemon's configuration file: its socket, and with --local what to explain as (its
    /// tunables, reserved and isolated CPUs); default /etc/numapilot.toml when it exists, else the
    /// defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `explain`'s PID operand: a positive integer. A negative one is taken as a value, not as an
/// option (`allow_negative_numbers` on this operand alone), and refused here: clap said
/// "unexpected argument '-1' found" for `explain -1`, naming no PID. `stat -1` stays an unknown
/// option, as in numastat. clap puts the value in front ("invalid value '-1' for '<PID>': ..."),
/// so the reason does not repeat it.
fn process_id(arg: &str) -> Result<u32, String> {
    match arg.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        Err(_) if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) => {
            Err("not a process id: beyond any process id".to_string())
        }
        _ => Err("not a process id: expected a positive integer".to_string()),
    }
}

/// `numapilot advise`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").args(["root", "machine"])))]
pub struct AdviseArgs {
    /// CPUs the job needs, 0 to 65536 (a fraction too, as numad -w takes 1.5).
    #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
    pub cpus: f64,
    /// Memory the job needs, with a binary unit (512M, 8G) [default: none, CPUs only, as numad -w
    /// NCPUS without :MB].
    #[arg(long, value_name = "SIZE", value_hint = ValueHint::Other)]
    pub mem: Option<String>,
    /// Read /proc and /sys under this directory (a captured fixture): idle time since boot.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A machine preset or machine file: every CPU idle, each node's memory free as the file's
    /// `free` says (all of it without one).
    #[arg(long, value_name = "PRESET|FILE", value_parser = super::Known(super::preset_values), hide_possible_values = true, value_hint = ValueHint::AnyPath)]
    pub machine: Option<String>,
    /// Window over which idle CPU time is measured on this machine, ms (100..=60000).
    #[arg(long, value_name = "MS", default_value_t = 1000, value_hint = ValueHint::Other)]
    pub window_ms: u64,
    /// Print JSON, one shape for every answer: `advice` (nodes, their free CPUs and memory, largest
    /// distance, and the daemon's `reason` when it answered), `nodes` (each node's free capacity the
    /// advice was made from: as measured here, or the daemon's figures when one answered, nothing
    /// fitting or not: that measurement within its usable CPUs, less its promises), `source`,
    /// `fits` (false when nothing fits and every node is advised) and `why` (then, the reason;
    /// otherwise null).
    #[arg(long)]
    pub json: bool,
    /// The pid the job will run as (a launcher that execs keeps its pid, e.g. a script's `$$` before
    /// `exec numactl ...`): the running daemon adopts that process as placed on its advice and
    /// leaves it there until its threads have waited for CPUs at 3 decisions in a row. Needs a running daemon.
    #[arg(long, value_name = "PID", value_hint = ValueHint::Other)]
    pub pid: Option<u32>,
    /// The daemon's control socket: a running daemon answers from its model and keeps its promise
    /// (the next request does not get the same free room); without one, this machine is measured
    /// [default: `[daemon] socket` of /etc/numapilot.toml, else /run/numapilot/numapilot.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The daemon's configuration file, for its socket [default: /etc/numapilot.toml when it
    /// exists]; a file named here that is missing or does not load is an error.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["socket", "no_daemon", "root", "machine"])]
    pub config: Option<PathBuf>,
    /// Measure this machine even when a daemon runs.
    #[arg(long)]
    pub no_daemon: bool,
    /// When no node set has the room, fail (exit 1) instead of advising every node the job can
    /// use, which is what numad -w answers then (the job starts unconfined).
    #[arg(long)]
    pub strict: bool,
}

/// `--journal`'s parser: any path, the empty one included (clap's own refuses "").
fn empty_or_path(s: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(s))
}

/// The log levels `--log` takes (a directive may name one too).
const LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// The levels, for [`super::Known`] (completions).
fn log_levels() -> Vec<(&'static str, String)> {
    LEVELS.iter().map(|&l| (l, String::new())).collect()
}

/// `--log` (or `RUST_LOG`, named by `what`): a level, or directives (`target=level` or a level)
/// joined by commas (tracing's filter syntax). A bare word that is not a level is a target for
/// the filter, which then lets nothing else through: the daemon ran silent on `--log loud`, and
/// on `RUST_LOG=loud` until that was checked the same way (review helper-43).
fn log_filter(what: &str, level: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    let is_level = |d: &str| LEVELS.contains(&d.to_ascii_lowercase().as_str());
    if level.is_empty() || !level.split(',').all(|d| is_level(d) || d.contains('=')) {
        anyhow::bail!("{what} {level:?}: a level ({}) or target=level directives", LEVELS.join(", "));
    }
    tracing_subscriber::EnvFilter::try_new(level).map_err(|e| anyhow::anyhow!("{what} {level:?}: {e}"))
}

/// Where the daemon's log lines go, and so how they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogSink {
    /// A terminal: time, coloured level, message.
    Terminal,
    /// A file or pipe that is not the journal: the same without colour codes (before, the codes
    /// went into files and pipes too, and journald stored such lines as binary blobs).
    Plain,
    /// systemd's journal (stderr is the stream `JOURNAL_STREAM` names, sd_journal_stream_fd(3)):
    /// each line starts with its priority, `<3>` error to `<7>` debug (sd-daemon(3)), so
    /// `journalctl -p err` finds the errors, and carries no time of its own (the journal dates
    /// every line).
    Journal,
}

impl LogSink {
    /// What this process's stderr is, looked at once ([`LogSink::of_stderr`] with the
    /// environment's `JOURNAL_STREAM`): the log lines and [`daemon_line`] agree.
    fn stderr() -> LogSink {
        static SINK: std::sync::OnceLock<LogSink> = std::sync::OnceLock::new();
        *SINK.get_or_init(|| LogSink::of_stderr(std::env::var("JOURNAL_STREAM").ok().as_deref()))
    }

    /// What stderr is: the journal when `JOURNAL_STREAM` ("DEV:INODE") names stderr's own file
    /// (the variable is inherited by children whose stderr went elsewhere, so it is compared, as
    /// systemd asks), else a terminal or not.
    fn of_stderr(journal_stream: Option<&str>) -> LogSink {
        use std::io::IsTerminal as _;
        use std::os::unix::fs::MetadataExt as _;
        let stderr = std::io::stderr();
        if let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) {
            let fd = std::os::fd::AsFd::as_fd(&stderr).try_clone_to_owned().ok();
            let meta = fd.and_then(|fd| std::fs::File::from(fd).metadata().ok());
            if meta.is_some_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino())) {
                return LogSink::Journal;
            }
        }
        if stderr.is_terminal() {
            LogSink::Terminal
        } else {
            LogSink::Plain
        }
    }
}

/// A line of the daemon's own on stderr at syslog priority `priority` (3 error, 5 notice): on the
/// journal with sd-daemon(3)'s prefix, as the log lines have it, elsewhere as it is. The start's
/// announcements and its failures (exit 1 or 75) were plain lines, priority info to the journal,
/// so `journalctl -p err` did not show why a start failed (review helper-43).
pub fn daemon_line(priority: u8, line: &str) {
    eprintln!("{}", sink_line(LogSink::stderr(), priority, line));
}

/// [`daemon_line`]'s text for `sink`: one line whatever `line` holds ([`one_line`]), with the
/// journal's priority prefix there.
fn sink_line(sink: LogSink, priority: u8, line: &str) -> String {
    let line = one_line(line);
    if sink == LogSink::Journal {
        format!("<{priority}>{line}")
    } else {
        line.into_owned()
    }
}

/// `text` with its control characters escaped (a newline as `\n`, ESC as `\u{1b}`), as the model
/// keeps process names (`numapilot_model::tasks::printable`): a log line of the daemon's stays one
/// line whatever the text it names. Its lines name what other users choose (process names, file
/// and cgroup paths, what a file of theirs held); a newline in one began a line of its own, and on
/// the journal a line beginning `<2>` is taken at priority critical (sd-daemon(3)). Tracing's
/// formatter escapes terminal escapes, not newlines. Rule one-event-one-line.
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(char::is_control) {
        std::borrow::Cow::Owned(numapilot_model::tasks::printable(text))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// The fields of a log event (its message first) as tracing writes them by default, then
/// [`one_line`]: every sink's field format.
struct OneLineFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for OneLineFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        let mut text = String::new();
        tracing_subscriber::fmt::format::DefaultFields::new()
            .format_fields(tracing_subscriber::fmt::format::Writer::new(&mut text), fields)?;
        writer.write_str(&one_line(&text))
    }
}

/// sd-daemon(3)'s priority prefix and the message: the journal's line format.
struct JournalFormat;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JournalFormat
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        // LOG_ERR 3, LOG_WARNING 4, LOG_INFO 6, LOG_DEBUG 7 (syslog.h).
        let priority = match *event.metadata().level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            _ => 7,
        };
        write!(writer, "<{priority}>")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

fn init_logging(level: &str) -> anyhow::Result<()> {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let flag = log_filter("--log", level)?;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => log_filter("RUST_LOG", &v)?,
        _ => flag,
    };
    let _ = log_subscriber(LogSink::stderr(), filter, std::io::stderr).try_init();
    Ok(())
}

/// The daemon's logging for `sink`, its lines written to `writer`: every event one line
/// ([`OneLineFields`]).
fn log_subscriber<W>(
    sink: LogSink,
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(false)
        .fmt_fields(OneLineFields);
    match sink {
        LogSink::Journal => Box::new(fmt.event_format(JournalFormat).finish()),
        LogSink::Terminal => Box::new(fmt.with_ansi(true).finish()),
        LogSink::Plain => Box::new(fmt.with_ansi(false).finish()),
    }
}

/// The daemon's exit status when it cannot start for a reason outside its configuration
/// (sysexits.h's EX_TEMPFAIL): systemd's `Restart=on-failure` tries again; a bad configuration
/// exits 1, which the unit's `RestartPreventExitStatus` keeps from looping.
pub const EXIT_TEMPFAIL: u8 = 75;

/// `numapilot daemon`.
pub fn run_daemon(a: DaemonArgs) -> anyhow::Result<ExitCode> {
    init_logging(&a.log)?;
    let source = match a.config {
        Some(p) => Source::Explicit(p),
        None => Source::Default,
    };
    let overrides = Overrides {
        dry_run: a.dry_run,
        interval_ms: a.interval_ms,
        journal: a.journal,
        state: a.state,
        socket: a.socket,
        metrics: a.metrics,
        exclude_comm: a.exclude,
        exclude_pids: a.exclude_pid,
        include_pinned: a.include_pinned,
        include_comm: a.include,
        include_pids: a.include_pid,
    };
    if a.check {
        let loaded = numapilot_daemon::config::load(&source, &overrides)?;
        for w in &loaded.warnings {
            eprintln!("numapilot: warning: {w}");
        }
        // As the start says it: metrics other hosts can reach.
        if let Some(w) = loaded.config.metrics().and_then(numapilot_daemon::metrics::exposure_warning) {
            eprintln!("numapilot: warning: {w}");
        }
        // What the file reserves on this machine: one that leaves nothing to place on would fail
        // the start (exit 1) after `--check` passed, the unit's ExecStartPre with it.
        match numapilot_daemon::live::reservation_check(&loaded.config.live_options(true)) {
            Ok(Some(note)) => eprintln!("numapilot: on this machine: {note}"),
            Ok(None) => {}
            Err(m) => anyhow::bail!("{m}"),
        }
        let from = loaded.file.map_or_else(|| "defaults (no file)".to_string(), |p| p.display().to_string());
        let flags = if overrides == Overrides::default() { "" } else { " with the command line's flags" };
        return print_out(&format!("configuration OK: {from}{flags}\n"));
    }
    let exit = match run::run(source, overrides, &mut |line| daemon_line(5, line)) {
        Ok(exit) => exit,
        // SAFETY: geteuid has no preconditions.
        Err(e)
            if unsafe { libc::geteuid() } != 0
                && matches!(e, run::RunError::Journal(_) | run::RunError::Control(_) | run::RunError::Live(_)) =>
        {
            anyhow::bail!(
                "{e}\n(not root: the default journal, state file and socket are root's; give writable paths with \
                 --journal, --state and --socket, in a directory of your own that no one else may write, or run \
                 as root)"
            )
        }
        // Anything but the configuration: the machine or its state (a full /run, an
        // unreadable /proc, another daemon on the socket). Exit EX_TEMPFAIL, which the systemd unit
        // restarts on (it restarts on no 1 or 2: a bad configuration does not loop). Exit 1 for
        // every start failure kept a daemon OOM-killed and restarted into a full /run down for
        // good (review helper-34).
        Err(e) if !matches!(e, run::RunError::Config(_) | run::RunError::Live(LiveError::Config(_))) => {
            daemon_line(3, &format!("numapilot: {e} (exit {EXIT_TEMPFAIL}: try again later)"));
            return Ok(ExitCode::from(EXIT_TEMPFAIL));
        }
        Err(e) => {
            daemon_line(3, &format!("numapilot: {e}"));
            return Ok(ExitCode::from(1));
        }
    };
    let mean_ms = |total_s: f64| if exit.steps > 0 { total_s * 1e3 / exit.steps as f64 } else { 0.0 };
    daemon_line(
        5,
        &format!(
            "numapilot: stopped ({}) after {} (mean {:.1} ms: observe {:.1} [system files {:.1}, stat pass {:.1}, \
         details {:.1}, assembly {:.1}, signal scans {:.1}], decide {:.1}, act {:.1}; longest {:.1} ms); restored {} \
         (and {} that inherited their placement), {} gone, {} failed{}",
            exit.why,
            super::plural(exit.steps, "step"),
            mean_ms(exit.cycle_s_total),
            mean_ms(exit.phases_s_total[0]),
            mean_ms(exit.observe_parts_s_total[0]),
            mean_ms(exit.observe_parts_s_total[1]),
            mean_ms(exit.observe_parts_s_total[2]),
            mean_ms(exit.observe_parts_s_total[3]),
            mean_ms(exit.observe_parts_s_total[4]),
            mean_ms(exit.phases_s_total[1]),
            mean_ms(exit.phases_s_total[2]),
            exit.cycle_s_max * 1e3,
            super::plural(exit.restore.restored, "process"),
            super::plural(exit.restore.inherited, "child process"),
            exit.restore.gone,
            exit.restore.failed.len(),
            if exit.restore.failed.is_empty() {
                String::new()
            } else {
                format!(": {}", exit.restore.failed.join("; "))
            }
        ),
    );
    Ok(ExitCode::SUCCESS)
}

fn not_running(e: &ControlError) -> bool {
    matches!(e, ControlError::NotRunning { .. })
}

/// Exit status of `status` and `explain` when no daemon listens: LSB's "program is not running"
/// (init-functions' `status_of_proc`), so a script tells it from a failure (1).
pub const EXIT_NOT_RUNNING: u8 = 3;

/// The control socket a client asks: `--socket`, else the one the daemon's configuration file
/// (`--config FILE`, default `/etc/numapilot.toml`) names, else the default. A fleet that moves the
/// socket in the file had to give `--socket` to every `status` (review helper-43). The default
/// file is read for its socket alone: one that does not load leaves the default socket, said on
/// stderr (the running daemon may well be on an older, good file: a reload keeps it); a file named
/// with `--config` that does not load is an error. Run as root, a file another user may write (or
/// replace through its directory) does not load (`load_for_client`): its socket could be theirs.
pub fn client_socket(flag: Option<PathBuf>, config: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p);
    }
    let explicit = config.is_some();
    socket_of(&client_config(config), explicit)
}

/// The configuration a client command reads: `--config FILE`'s (a missing file is an error), else
/// the default file's (defaults when there is none). Read once per command, also by
/// `explain --local`, which takes its socket and its tunables from it.
fn client_config(
    config: Option<PathBuf>,
) -> Result<numapilot_daemon::config::Config, numapilot_daemon::config::ConfigError> {
    let source = config.map_or(Source::Default, Source::Explicit);
    numapilot_daemon::config::load_for_client(&source).map(|l| l.config)
}

/// The socket `loaded` names. A file given with `--config` that cannot be used is an error; a bad
/// default file is said on stderr and the default socket asked.
fn socket_of(
    loaded: &Result<numapilot_daemon::config::Config, numapilot_daemon::config::ConfigError>,
    explicit: bool,
) -> anyhow::Result<PathBuf> {
    let (socket, passed_over) = socket_and_note(loaded, explicit)?;
    if let Some(note) = passed_over {
        eprintln!("{note}");
    }
    Ok(socket)
}

/// [`socket_of`] without the saying: the socket, and the line that says a bad default file was
/// passed over for the default socket, if it was.
fn socket_and_note(
    loaded: &Result<numapilot_daemon::config::Config, numapilot_daemon::config::ConfigError>,
    explicit: bool,
) -> anyhow::Result<(PathBuf, Option<String>)> {
    match loaded {
        Ok(config) => Ok((config.daemon.socket.clone(), None)),
        Err(e) if explicit => Err(e.clone().into()),
        Err(e) => Ok((
            PathBuf::from(DEFAULT_SOCKET_PATH),
            Some(format!("numapilot: {e} (asking the default socket {DEFAULT_SOCKET_PATH})")),
        )),
    }
}

/// `numapilot status`.
pub fn run_status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    if a.check {
        // Whatever keeps the check from asking is UNKNOWN (3) with a line saying why, as a
        // monitoring plugin reports it, never a bare failure (1 reads as WARNING there).
        if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 3600.0) {
            return unknown(&format!("--timeout {}: seconds, more than 0 and at most 3600", a.timeout), a.json);
        }
        return match client_socket(a.socket, a.config) {
            Ok(socket) => run_check(&socket, a.json, std::time::Duration::from_secs_f64(a.timeout)),
            Err(e) => unknown(&format!("{e:#}"), a.json),
        };
    }
    let socket = client_socket(a.socket, a.config)?;
    match control::request(&socket, &Request::Status) {
        Ok(r) => {
            let s = r.status.context("the daemon's answer has no status")?;
            if a.json {
                print_out(&format!("{}\n", serde_json::to_string_pretty(&s)?))
            } else {
                print_out(&s.render())
            }
        }
        Err(e) if not_running(&e) => {
            eprintln!("numapilot: {e}: is the daemon running (systemctl status numapilot)?");
            Ok(ExitCode::from(EXIT_NOT_RUNNING))
        }
        Err(e) => Err(e.into()),
    }
}

/// Exit status of `status --check` when the daemon could not be asked (permission, a bad
/// answer): a monitoring plugin's UNKNOWN. A daemon not running is CRITICAL (2): what a check is for.
pub const EXIT_CHECK_UNKNOWN: u8 = 3;

/// `numapilot status --check`: the daemon's health (`Status::health`) as a monitoring plugin
/// reports it (Nagios/Icinga plugin guidelines: first line `LEVEL: text`, exit 0/1/2/3).
fn run_check(socket: &std::path::Path, json: bool, timeout: std::time::Duration) -> anyhow::Result<ExitCode> {
    use numapilot_daemon::control::{Health, HealthLevel};
    let critical = |why: String| {
        (Health { level: HealthLevel::Critical, reasons: vec![(HealthLevel::Critical, why)] }, String::new())
    };
    let (health, summary) = match control::request_within(socket, &Request::Status, timeout) {
        Ok(r) => match r.status {
            Some(s) => (s.health(), s.summary()),
            None => return unknown("the daemon's answer has no status", json),
        },
        Err(e) if not_running(&e) => critical(format!("not running: {e}")),
        // A daemon that takes the request and never answers is hung: what a check is for.
        Err(e @ ControlError::NoAnswer { .. }) => critical(format!("not answering: {e}")),
        Err(e) => return unknown(&e.to_string(), json),
    };
    let level = HealthLevel::name;
    if json {
        let v = serde_json::json!({ "level": level(health.level), "summary": summary, "reasons":
            health.reasons.iter().map(|(l, r)| serde_json::json!({ "level": level(*l), "reason": r })).collect::<Vec<_>>() });
        print_out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else if health.reasons.is_empty() {
        print_out(&format!("OK: {summary}\n"))?;
    } else {
        let lines: Vec<String> = health.reasons.iter().map(|(l, r)| format!("{}: {r}\n", level(*l))).collect();
        print_out(&lines.concat())?;
    }
    Ok(ExitCode::from(health.level.exit_code()))
}

fn unknown(why: &str, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let v = serde_json::json!({ "level": "UNKNOWN", "summary": "", "reasons": [{ "level": "UNKNOWN", "reason": why }] });
        print_out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        print_out(&format!("UNKNOWN: {why}\n"))?;
    }
    Ok(ExitCode::from(EXIT_CHECK_UNKNOWN))
}

/// `numapilot explain PID`.
pub fn run_explain(a: ExplainArgs) -> anyhow::Result<ExitCode> {
    // Read once: --local takes its tunables from the same reading as the socket.
    let explicit = a.config.is_some();
    let config = client_config(a.config.clone());
    let (socket, passed_over) = match &a.socket {
        Some(p) => (p.clone(), None),
        None => socket_and_note(&config, explicit)?,
    };
    // Said once the answer shows the default file was passed over: not when --local then refuses
    // it (it said it passed the file over, then refused it; review helper-79).
    let say_passed_over = || {
        if let Some(note) = &passed_over {
            eprintln!("{note}");
        }
    };
    match control::request(&socket, &Request::Explain { pid: a.pid }) {
        Ok(r) => {
            say_passed_over();
            let e = r.explain.context("the daemon's answer has no explanation")?;
            if a.json {
                print_out(&format!("{}\n", serde_json::to_string_pretty(&e)?))
            } else {
                print_out(&format!("from the running daemon:\n{e}"))
            }
        }
        Err(e) if not_running(&e) && a.local => match config {
            Ok(config) => explain_local(&a, config),
            // The default file, passed over for the socket: --local explains as a daemon with it
            // would, and the daemon refuses to start on a file it cannot use (exit 1), so this
            // refuses it too, with the daemon's own words for why.
            Err(client) if !explicit => {
                let why = numapilot_daemon::config::load(&Source::Default, &Overrides::default())
                    .err()
                    .map_or_else(|| client.to_string(), |e| e.to_string());
                anyhow::bail!(
                    "{why}: the daemon refuses to start on it, and --local explains as that daemon would (no \
                     daemon answers at {}); fix the file, or give --config FILE",
                    socket.display()
                )
            }
            Err(client) => Err(client.into()),
        },
        Err(e) if not_running(&e) => {
            say_passed_over();
            eprintln!(
                "numapilot: {e}: explain shows the daemon's view; start the daemon, or use --local for a \
                 one-off view from two observations of this machine"
            );
            Ok(ExitCode::from(EXIT_NOT_RUNNING))
        }
        Err(e) => {
            say_passed_over();
            Err(e.into())
        }
    }
}

/// Two observations 1 s apart, the model updated with both, the adaptive policy asked once.
fn explain_local(a: &ExplainArgs, config: numapilot_daemon::config::Config) -> anyhow::Result<ExitCode> {
    use numapilot_policy::Policy as _;
    // As the daemon with that configuration (`config`, read once by `run_explain`) sees the
    // machine: its tunables, and without its reserved CPUs and (unless `reserve_isolated` is off)
    // those the host keeps for pinned work (a process's default mask leaves them out, and is no pin
    // of its own). A bad file is an error, as for the daemon.
    // What the daemon never manages is said as it says it (init read "CPU below min_group_cpu"; a
    // thread id or a zombie were not named as such; review helper-55).
    if let Some(why) = numapilot_daemon::live::select::launch_refusal(a.pid).filter(|_| a.pid != std::process::id()) {
        eprintln!("numapilot: process {}: {why}", a.pid);
        return Ok(ExitCode::from(1));
    }
    let live = config.live_options(true);
    let mut topo = Topology::from_sysfs(std::path::Path::new("/")).context("reading the topology")?;
    numapilot_daemon::live::reserve(&mut topo, &live)?;
    let reader = numapilot_observe::Reader::new("/");
    let mut model = numapilot_model::Model::new(topo, config.tunables.clone());
    let mut policy = numapilot_policy::Adaptive::new();
    for i in 0..2 {
        if i > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        let sample = reader.sample().context("observing this machine")?;
        model.update(&sample);
    }
    let _ = policy.decide(&model);
    match policy.explain(&model, a.pid) {
        Some(e) => print_out(&local_text(&e, a.json)?),
        None => {
            eprintln!("numapilot: process {} is not in the local view (no such process, or a kernel thread)", a.pid);
            Ok(ExitCode::from(1))
        }
    }
}

/// What `explain --local` prints of `e`: its strings escaped as the control client escapes the
/// daemon's answer (`control::escaped`, reply-strings-escaped), so the local view prints as the
/// daemon's would. Its text names what processes choose (their names, in the reasons too); the
/// model escapes names where it reads them, and this keeps any other string a process sets from
/// starting a line of its own or reaching the terminal as an escape sequence.
fn local_text(e: &numapilot_policy::adaptive::Explanation, json: bool) -> anyhow::Result<String> {
    let e = control::escaped(e).context("escaping the explanation")?;
    Ok(if json {
        format!("{}\n", serde_json::to_string_pretty(&e)?)
    } else {
        format!("no daemon running: local view from two observations 1 s apart (no history, no past actions):\n{e}")
    })
}

/// `advise --window-ms` range, ms. Below 100 ms a CPU's idle time is a handful of 10 ms clock ticks
/// (USER_HZ 100), so every CPU reads all busy or all idle; above a minute the command is a wait.
const ADVISE_WINDOW_MS: std::ops::RangeInclusive<u64> = 100..=60_000;

/// Most CPUs `advise --cpus` takes: 65536, as many as a CPU list numapilot reads can hold
/// (`IdSet::MAX_ID` + 1; the kernel's NR_CPUS is at most 8192 on x86-64). Source: that limit.
/// What it prevents: a typo or `1e300` read as a real request that simply does not fit (every
/// node advised, exit 0). numad -w takes a count with hundredths (1.5) into a C int; fractions
/// stay allowed here, idle CPUs being measured in fractions.
const ADVISE_MAX_CPUS: f64 = (numapilot_topology::IdSet::MAX_ID as f64) + 1.0;

/// `numapilot advise`.
pub fn run_advise(a: AdviseArgs) -> anyhow::Result<ExitCode> {
    let mem_bytes = match &a.mem {
        Some(m) => numapilot_topology::machine::parse_size_kb(m)
            .map_err(|e| anyhow::anyhow!("--mem {e}"))?
            .checked_mul(1024)
            // 16 EiB and up: the multiplication overflowed (a panic, or a size of 0 in a release
            // build; review helper-55).
            .ok_or_else(|| anyhow::anyhow!("--mem {m}: is too large (at most 16 EiB)"))?,
        None => 0,
    };
    advise::check_request(a.cpus, mem_bytes)?;
    if a.cpus > ADVISE_MAX_CPUS {
        anyhow::bail!(
            "--cpus {}: more CPUs than a machine can have (at most {ADVISE_MAX_CPUS})",
            numapilot_policy::advise::shown(&a.cpus)
        );
    }
    if a.machine.is_none() && a.root.is_none() && !(ADVISE_WINDOW_MS.contains(&a.window_ms)) {
        anyhow::bail!(
            "--window-ms {}: must be in {}..={} (idle time is counted in 10 ms clock ticks per CPU)",
            a.window_ms,
            ADVISE_WINDOW_MS.start(),
            ADVISE_WINDOW_MS.end()
        );
    }
    let offline = a.machine.is_some() || a.root.is_some();
    if offline && a.pid.is_some() {
        anyhow::bail!("--pid: a promise to a process is the running daemon's; not with --machine or --root");
    }
    if a.pid == Some(0) {
        anyhow::bail!("--pid 0: not a process id");
    }
    // The configuration file is read for the socket only when a daemon may be asked.
    let socket =
        if offline || a.no_daemon { PathBuf::new() } else { client_socket(a.socket.clone(), a.config.clone())? };
    let ask_daemon = !offline && !a.no_daemon && std::fs::symlink_metadata(&socket).is_ok();
    if a.pid.is_some() && !offline && !ask_daemon {
        if a.no_daemon {
            anyhow::bail!("--pid needs the running daemon: not with --no-daemon");
        }
        anyhow::bail!("--pid needs the running daemon: no control socket at {}", socket.display());
    }
    if let Some(pid) = a.pid.filter(|p| !offline && !std::path::Path::new(&format!("/proc/{p}")).exists()) {
        // The launcher's own pid, which the job keeps across its exec: one that does not exist
        // is a mistake (it was accepted, and the promise kept for no one, review helper-41).
        anyhow::bail!("--pid {pid}: no such process (give the pid the job will run as, e.g. the launcher's $$)");
    }
    let (topo, free, how, reach) = if let Some(file) = &a.machine {
        let topo = super::machine_topology(file)?;
        let free = advise::from_topology(&topo);
        (topo, free, format!("machine {file} (no load)"), None)
    } else if let Some(root) = &a.root {
        let topo = super::topology_under(root)?;
        let free = advise::measure(root, &topo, None)?;
        (topo, free, format!("fixture {} (idle since boot)", root.display()), None)
    } else {
        let root = std::path::Path::new("/");
        let topo = Topology::from_sysfs(root).context("reading the topology")?;
        // The job this launcher starts inherits its CPUs and memory nodes: only nodes within them.
        let reach = advise::own_reach(&topo);
        let free = advise::measure_within(root, &topo, Some(Duration::from_millis(a.window_ms)), reach.as_ref())?;
        let within = reach
            .as_ref()
            .map(|r| {
                format!(", within this process's CPUs {} and memory nodes {}", r.cpus.to_list(), r.nodes.to_list())
            })
            .unwrap_or_default();
        if free.is_empty() {
            anyhow::bail!("nothing to advise: no node has a CPU or memory this process may use{within}");
        }
        (topo, free, format!("this machine (idle over {} ms){within}", a.window_ms), reach)
    };
    if ask_daemon {
        // The measurement goes to the daemon (numad refreshes its nodes before each -w answer),
        // which adds what it promised earlier launches.
        // With the CPUs it measured, so the daemon counts each node's CPUs within both those and
        // its own usable ones (a reserved CPU is the client's to measure, not the job's to use).
        let req = Request::Advise {
            cpus: a.cpus,
            mem_bytes,
            pid: a.pid,
            nodes_now: free.clone(),
            reach_cpus: reach.map(|r| r.cpus),
        };
        match control::request(&socket, &req) {
            Ok(resp) => {
                let adv = resp.advice.context("the daemon answered without advice")?;
                // The figures the advice was made from: the daemon's, this measurement within its
                // usable CPUs and this process's reach, less its promises to earlier launches. (This
                // client's own measurement was shown: a node counted otherwise, or promised to an
                // earlier launch, did not add up to the advice.) A daemon that does not send them
                // (one from before) leaves this client's measurement, said in the source.
                let (nodes, whose) =
                    if adv.free.is_empty() { (free.clone(), FIGURES_OURS) } else { (adv.free.clone(), FIGURES_THEIRS) };
                let source = format!("the running daemon ({}), {how}{whose}", socket.display());
                let theirs: Vec<advise::NodeFree> =
                    nodes.iter().filter(|f| adv.nodes.contains(f.node)).cloned().collect();
                let advice = AdviceOut {
                    figures: advise::Advice { nodes: adv.nodes.clone(), ..advise::every_node(&topo, &theirs) },
                    reason: Some(serde_json::to_value(&adv.reason)?),
                };
                return print_advice(&a, &AdviceAnswer { advice, nodes: &nodes, source, fits: true, why: None });
            }
            Err(ControlError::Request(msg)) if a.strict || !msg.starts_with("nothing fits") => {
                eprintln!("numapilot advise: {msg} [the running daemon, {}]", socket.display());
                return Ok(ExitCode::from(1));
            }
            Err(ControlError::NothingFits { why, .. }) if a.strict => {
                eprintln!("numapilot advise: {why} [the running daemon, {}]", socket.display());
                return Ok(ExitCode::from(1));
            }
            // Nothing fits: every node, with the figures the daemon refused by, as an answer's are
            // shown (this client's own measurement was, which its reason did not match); a daemon
            // that sends none leaves this client's, said in the source.
            Err(e @ (ControlError::NothingFits { .. } | ControlError::Request(_))) => {
                let (why, nodes, whose) = match e {
                    ControlError::NothingFits { why, free: theirs } => (why, theirs, FIGURES_THEIRS),
                    other => (other.to_string(), free.clone(), FIGURES_OURS),
                };
                let source = format!("the running daemon ({}), {how}{whose}", socket.display());
                return unconfined(
                    &a,
                    &topo,
                    &nodes,
                    source,
                    &format!("{why} [the running daemon, {}]", socket.display()),
                );
            }
            // A stale socket, or one this user may not use: this machine's measurement alone.
            Err(e @ (ControlError::NotRunning { .. } | ControlError::Denied { .. })) => {
                if a.pid.is_some() {
                    anyhow::bail!("--pid needs the running daemon: {e}");
                }
                // Said, not silent: the answer below leaves out the daemon's promises to
                // earlier launches (review helper-41).
                eprintln!("numapilot advise: {e}; measuring this machine alone (without the daemon's promises)");
            }
            Err(e) => return Err(e.into()),
        }
    }
    match advise::advise(&topo, &free, a.cpus, mem_bytes) {
        Ok(adv) => {
            let advice = AdviceOut { figures: adv, reason: None };
            print_advice(&a, &AdviceAnswer { advice, nodes: &free, source: how, fits: true, why: None })
        }
        Err(e @ advise::AdviseError::NothingFits { .. }) if !a.strict => {
            let why = format!("{e} [{how}]");
            unconfined(&a, &topo, &free, how, &why)
        }
        Err(e) => {
            eprintln!("numapilot advise: {e} [{how}]");
            Ok(ExitCode::from(1))
        }
    }
}

/// `advise`'s source when the daemon answered with its figures: this client's measurement within
/// the daemon's usable CPUs, less its promises to earlier launches.
const FIGURES_THEIRS: &str = "; figures the daemon's: within its usable CPUs, less its promises";
/// `advise`'s source when the daemon answered without figures (a daemon from before them, or the
/// numad policy): this client's measurement.
const FIGURES_OURS: &str = "; figures as measured here (the daemon sent none)";

/// What `advise --json` prints, one shape for every answer (it had three: the daemon's, this
/// machine's, and nothing fits; review helper-55): the advice, each node's free capacity it was
/// made from (as measured, or the daemon's figures), where the answer came from, whether the
/// request fits the advised nodes, and when it does not, why.
#[derive(serde::Serialize)]
struct AdviceAnswer<'a> {
    advice: AdviceOut,
    nodes: &'a [advise::NodeFree],
    source: String,
    fits: bool,
    why: Option<&'a str>,
}

/// The advised nodes with their free CPUs, free memory and largest distance, from the figures the
/// advice was made from (`AdviceAnswer::nodes`), and the daemon's reason (rule and figures) when
/// it answered (null otherwise).
#[derive(serde::Serialize)]
struct AdviceOut {
    #[serde(flatten)]
    figures: advise::Advice,
    reason: Option<serde_json::Value>,
}

fn print_advice(a: &AdviseArgs, answer: &AdviceAnswer<'_>) -> anyhow::Result<ExitCode> {
    if a.json {
        print_out(&format!("{}\n", serde_json::to_string_pretty(answer)?))
    } else {
        print_out(&format!("{}\n", answer.advice.figures.nodes))
    }
}

/// Nothing fits and `--strict` is not given: every node the job can use, as numad -w answers,
/// with the reason on stderr.
fn unconfined(
    a: &AdviseArgs,
    topo: &Topology,
    free: &[advise::NodeFree],
    source: String,
    why: &str,
) -> anyhow::Result<ExitCode> {
    let adv = advise::every_node(topo, free);
    eprintln!(
        "numapilot advise: {why}; advising every node the job can use, {} (as numad -w does: the job starts \
         unconfined; --strict to fail instead)",
        adv.nodes
    );
    let advice = AdviceOut { figures: adv, reason: None };
    print_advice(a, &AdviceAnswer { advice, nodes: free, source, fits: false, why: Some(why) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A log writer into memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Rule one-event-one-line: whatever a log event's message or fields hold (a process name
    /// set with prctl, a path a user chose), it is one line on every sink, and on the journal the
    /// line's priority is the event's: a name "np\n<2>forged" began a second line, which the
    /// journal takes at priority critical. The daemon's own lines ([`daemon_line`]) alike.
    #[test]
    fn a_log_event_is_one_line_whatever_it_names() {
        let forged = "np\n<2>forged\r\x1b[31m";
        for sink in [LogSink::Journal, LogSink::Plain, LogSink::Terminal] {
            let out = Captured::default();
            let writer = out.clone();
            let filter = tracing_subscriber::EnvFilter::new("info");
            let subscriber = log_subscriber(sink, filter, move || writer.clone());
            tracing::subscriber::with_default(subscriber, || {
                tracing::warn!("putting a released process back failed: 812 ({forged}): thread 812: EPERM");
                tracing::info!(path = forged, "a field");
            });
            let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2, "{sink:?}: {text:?}");
            assert!(lines[0].contains("812 (np\\n<2>forged\\r"), "{sink:?}: {text:?}");
            assert!(lines[1].contains("path=") && lines[1].contains("np\\n<2>forged"), "{sink:?}: {text:?}");
            // Terminal escapes are escaped too (tracing's own `\x1b`); the terminal sink's
            // colour codes are its own.
            assert!(!text.contains('\r') && !text.contains("\x1b[31m"), "{sink:?}: {text:?}");
            if sink == LogSink::Journal {
                assert!(lines[0].starts_with("<4>putting") && lines[1].starts_with("<6>a field"), "{text:?}");
            }
        }
        assert_eq!(sink_line(LogSink::Journal, 5, "numapilot: 7 (np\n<2>x)"), "<5>numapilot: 7 (np\\n<2>x)");
        assert_eq!(sink_line(LogSink::Plain, 5, "a\nb"), "a\\nb");
        assert_eq!(sink_line(LogSink::Plain, 5, "as it is"), "as it is");
    }

    /// `explain --local` prints its strings escaped as the control client escapes the daemon's
    /// answer (reply-strings-escaped): a newline or ESC in any of them (a name, a reason's detail)
    /// was printed raw, starting a forged line or reaching the terminal as an escape sequence.
    #[test]
    fn the_local_explanation_is_escaped_as_the_daemons_answer() {
        use numapilot_policy::adaptive::{Explanation, GroupExplanation};
        let forged = "np\n  preferred node 1: forged\x1b[31m";
        let e = Explanation {
            pid: 812,
            comm: forged.into(),
            class: numapilot_model::ProcessClass::Unclassified,
            pinned: false,
            confined: None,
            threads: 1,
            kernel_owned_threads: 0,
            cpu: 1.0,
            rss_bytes: 0,
            mem_by_node: vec![(0, 0)],
            groups: vec![GroupExplanation {
                group: None,
                tasks: 1,
                pids: vec![812],
                cpu: 1.0,
                mem_bytes: 0,
                preferred_node: Some(0),
                rule: "stay-current-node".into(),
                why: format!("process 812 ({forged})"),
            }],
            preferred_node: Some(0),
            why: format!("[stay-current-node] process 812 ({forged})"),
            moves_waiting: vec![],
            last_actions: vec![],
            standing: None,
            since_last_step: None,
            nothing_to_place: None,
        };
        let text = local_text(&e, false).unwrap();
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(!text.lines().any(|l| l.starts_with("  preferred node 1")), "{text}");
        assert!(text.contains("process 812 (np\\n  preferred node 1: forged\\u{1b}[31m)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&local_text(&e, true).unwrap()).unwrap();
        assert_eq!(json["comm"], "np\\n  preferred node 1: forged\\u{1b}[31m");
    }
}
