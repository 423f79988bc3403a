//! A `getopt_long`-compatible option reader, so numactl command lines mean the same here.
//!
//! # Problem
//!
//! numactl reads its options with glibc `getopt_long(argc, argv, "+...", opts)`. Scripts rely on
//! the details: `--membind=1`, `--membind 1`, `-m1`, `-m 1`, clustered flags (`-lC0`), unambiguous
//! abbreviations (`--mem=0`), stopping at the first non-option (the `+` in the option string, so the
//! command's own options are left alone) and `--` ending the options. clap cannot express "stop at
//! the first operand, then hand over argv untouched" together with getopt's abbreviation rules, so
//! this is a small hand-written reader.
//!
//! # Rules (glibc getopt_long, with a leading `+`)
//!
//! ```text
//!   --          end of options; everything after is the command
//!   --name      long option; --name=value or --name value when it takes a value;
//!               a unique prefix of a name is that name; an exact match wins over prefixes;
//!               a prefix of several names is ambiguous
//!   -abc        short options a, b, c; if b takes a value, "c" is it (-m1); if the value is
//!               missing from the cluster, the next argument is it, whatever it looks like (-m -1)
//!   -           an operand (a lone dash)
//!   first operand stops option reading
//! ```
//!
//! Without the `+` (numastat's `"cmnp:s::vVz?"`), glibc *permutes*: operands may come anywhere
//! and are collected, options are read to the end or to `--` ([`Getopt::permuting`]). An option
//! with an optional value (`s::`, [`HasArg::Optional`]) takes it only from its own word (`-s2`,
//! `--sort=2`), never from the next one: `-s 2` is `-s` and the operand `2`.
//!
//! Values are bytes, as in C: `--file=PATH` takes a path that is not UTF-8 (Linux paths are bytes;
//! it was refused here until review helper-48); whoever takes a value as text checks it.
//!
//! Error messages follow glibc's wording (`unrecognized option '--foo'`, `invalid option -- 'Z'`,
//! `option requires an argument -- 'm'`, `option '--show' doesn't allow an argument`,
//! `option '--p' is ambiguous; possibilities: ...`).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HasArg {
    /// A flag.
    No,
    /// A required value: the rest of the word, or the next argument.
    Required,
    /// An optional value: the rest of the word (`-s2`, `--sort=2`) or none.
    Optional,
}

/// One option of the table.
#[derive(Debug, Clone, Copy)]
pub struct OptSpec<Id> {
    /// Long name, without `--`; empty for a short-only option.
    pub long: &'static str,
    /// Short letter, if any.
    pub short: Option<char>,
    /// Whether it takes a value.
    pub arg: HasArg,
    /// What the caller calls it.
    pub id: Id,
    /// An option of ours that the program we follow does not have (numactl's `--version`): an
    /// abbreviation that also fits one of the program's own options means that one, as it does
    /// there (`--ver` is numactl's `--verify`, not ambiguous with `--version`).
    pub extra: bool,
}

/// An option as found on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<Id> {
    /// Which option.
    pub id: Id,
    /// How it was written, for messages: `--membind`, `--mem` or `-m`.
    pub written: String,
    /// Its value, when it takes one: bytes, as the command line gave them.
    pub value: Option<OsString>,
}

/// A command line getopt would reject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetoptError {
    /// `--foo`.
    UnrecognizedLong(String),
    /// `-Z`.
    InvalidShort(char),
    /// `--membind` at the end.
    MissingLong(String),
    /// `-m` at the end.
    MissingShort(char),
    /// `--show=1`.
    UnexpectedValue(String),
    /// `--p`.
    Ambiguous(String, Vec<&'static str>),
    /// An option name that is not UTF-8 (a value may be any bytes).
    NotUtf8(String),
}

impl fmt::Display for GetoptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GetoptError::UnrecognizedLong(a) => write!(f, "unrecognized option '{a}'"),
            GetoptError::InvalidShort(c) => write!(f, "invalid option -- '{c}'"),
            GetoptError::MissingLong(n) => write!(f, "option '--{n}' requires an argument"),
            GetoptError::MissingShort(c) => write!(f, "option requires an argument -- '{c}'"),
            GetoptError::UnexpectedValue(n) => write!(f, "option '--{n}' doesn't allow an argument"),
            GetoptError::Ambiguous(a, c) => {
                write!(f, "option '{a}' is ambiguous; possibilities:")?;
                for n in c {
                    write!(f, " '--{n}'")?;
                }
                Ok(())
            }
            GetoptError::NotUtf8(a) => write!(f, "argument {a:?} is not valid UTF-8"),
        }
    }
}

impl std::error::Error for GetoptError {}

/// Reads options one at a time; [`Getopt::operands`] gives what is left.
#[derive(Debug)]
pub struct Getopt<'a, Id: Copy> {
    specs: &'a [OptSpec<Id>],
    args: &'a [OsString],
    /// Index of the argument being read.
    next: usize,
    /// Position inside a short-option cluster (`-lC0`), 0 when not in one.
    cluster: usize,
    done: bool,
    /// Collect operands and read on (glibc's default) instead of stopping at the first one.
    permute: bool,
    /// Operands passed over while permuting, in order.
    skipped: Vec<&'a OsString>,
}

impl<'a, Id: Copy> Getopt<'a, Id> {
    /// Reads `args` (without the program name) against `specs`, stopping at the first operand
    /// (`getopt_long` with a leading `+`, as numactl uses it: the command's options are its own).
    pub fn new(specs: &'a [OptSpec<Id>], args: &'a [OsString]) -> Self {
        Getopt { specs, args, next: 0, cluster: 0, done: false, permute: false, skipped: Vec::new() }
    }

    /// Reads `args` against `specs` with operands allowed anywhere (`getopt_long` without the `+`,
    /// as numastat uses it): they are collected, and options are read until `--` or the end.
    pub fn permuting(specs: &'a [OptSpec<Id>], args: &'a [OsString]) -> Self {
        Getopt { permute: true, ..Getopt::new(specs, args) }
    }

    /// The operands: those passed over while permuting, then everything after the options (for
    /// numactl, the command and its arguments).
    pub fn operands(&self) -> Vec<OsString> {
        let rest = &self.args[self.next.min(self.args.len())..];
        self.skipped.iter().copied().chain(rest).cloned().collect()
    }

    fn bytes(&self, i: usize) -> &'a [u8] {
        self.args[i].as_encoded_bytes()
    }

    fn next_long(&mut self, arg_index: usize) -> Result<Found<Id>, GetoptError> {
        let raw = self.bytes(arg_index);
        let whole = self.args[arg_index].to_string_lossy().into_owned();
        let body = &raw[2..];
        let (name, inline) = match body.iter().position(|&b| b == b'=') {
            Some(at) => (&body[..at], Some(&body[at + 1..])),
            None => (body, None),
        };
        let name = std::str::from_utf8(name).map_err(|_| GetoptError::NotUtf8(whole.clone()))?;
        let specs: &'a [OptSpec<Id>] = self.specs;
        let longs = || specs.iter().filter(|s| !s.long.is_empty());
        let spec: &'a OptSpec<Id> = match longs().find(|s| s.long == name) {
            Some(s) => s,
            None => {
                let fits = || longs().filter(|s| s.long.starts_with(name));
                let own = || fits().filter(|s| !s.extra);
                // Ambiguity names the candidates weighed: the program's own when any fits (numactl
                // lists `--hardware` and `--huge` for `--h`, not our `--help`).
                let candidates: Vec<&OptSpec<Id>> =
                    if own().next().is_some() { own().collect() } else { fits().collect() };
                match candidates[..] {
                    [] => return Err(GetoptError::UnrecognizedLong(whole)),
                    [one] => one,
                    _ => return Err(GetoptError::Ambiguous(whole, candidates.iter().map(|s| s.long).collect())),
                }
            }
        };
        let written = format!("--{}", spec.long);
        let value = match (spec.arg, inline) {
            (HasArg::No, None) => None,
            (HasArg::No, Some(_)) => return Err(GetoptError::UnexpectedValue(spec.long.to_string())),
            (HasArg::Required | HasArg::Optional, Some(v)) => Some(OsStr::from_bytes(v).to_os_string()),
            (HasArg::Optional, None) => None,
            (HasArg::Required, None) => {
                if self.next >= self.args.len() {
                    return Err(GetoptError::MissingLong(spec.long.to_string()));
                }
                self.next += 1;
                Some(self.args[self.next - 1].clone())
            }
        };
        Ok(Found { id: spec.id, written, value })
    }

    fn next_short(&mut self, arg_index: usize) -> Result<Found<Id>, GetoptError> {
        let arg = self.bytes(arg_index);
        // The letter: a character, or a byte that starts none (no option's letter).
        let (c, len) = match arg[self.cluster..].utf8_chunks().next() {
            Some(chunk) if !chunk.valid().is_empty() => {
                let c = chunk.valid().chars().next().unwrap_or('-');
                (c, c.len_utf8())
            }
            _ => (char::REPLACEMENT_CHARACTER, 1),
        };
        self.cluster += len;
        let rest = OsStr::from_bytes(&arg[self.cluster..]);
        let spec = self.specs.iter().find(|s| s.short == Some(c));
        let Some(spec) = spec else {
            self.finish_cluster_if(rest.is_empty(), arg_index);
            return Err(GetoptError::InvalidShort(c));
        };
        let written = format!("-{c}");
        match spec.arg {
            HasArg::No => {
                self.finish_cluster_if(rest.is_empty(), arg_index);
                Ok(Found { id: spec.id, written, value: None })
            }
            HasArg::Optional => {
                self.finish_cluster_if(true, arg_index);
                Ok(Found { id: spec.id, written, value: (!rest.is_empty()).then(|| rest.to_os_string()) })
            }
            HasArg::Required => {
                self.cluster = 0;
                self.next = arg_index + 1;
                if !rest.is_empty() {
                    return Ok(Found { id: spec.id, written, value: Some(rest.to_os_string()) });
                }
                if self.next >= self.args.len() {
                    return Err(GetoptError::MissingShort(c));
                }
                self.next += 1;
                Ok(Found { id: spec.id, written, value: Some(self.args[self.next - 1].clone()) })
            }
        }
    }

    fn finish_cluster_if(&mut self, end: bool, arg_index: usize) {
        if end {
            self.cluster = 0;
            self.next = arg_index + 1;
        }
    }
}

impl<Id: Copy> Iterator for Getopt<'_, Id> {
    type Item = Result<Found<Id>, GetoptError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.cluster > 0 {
            return Some(self.next_short(self.next));
        }
        let bytes = loop {
            let Some(raw) = self.args.get(self.next) else {
                self.done = true;
                return None;
            };
            let bytes = raw.as_encoded_bytes();
            if bytes == b"--" {
                self.next += 1;
                self.done = true;
                return None;
            }
            if bytes.len() >= 2 && bytes[0] == b'-' {
                break bytes;
            }
            // An operand (including a lone "-"): options end here, or it is set aside.
            if !self.permute {
                self.done = true;
                return None;
            }
            self.skipped.push(raw);
            self.next += 1;
        };
        let i = self.next;
        if bytes.starts_with(b"--") {
            self.next += 1;
            return Some(self.next_long(i));
        }
        self.cluster = 1;
        Some(self.next_short(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum O {
        Membind,
        Preferred,
        PreferredMany,
        Physcpubind,
        Local,
        Show,
    }

    const SPECS: &[OptSpec<O>] = &[
        OptSpec { long: "membind", short: Some('m'), arg: HasArg::Required, id: O::Membind, extra: false },
        OptSpec { long: "preferred", short: Some('p'), arg: HasArg::Required, id: O::Preferred, extra: false },
        OptSpec { long: "preferred-many", short: Some('P'), arg: HasArg::Required, id: O::PreferredMany, extra: false },
        OptSpec { long: "physcpubind", short: Some('C'), arg: HasArg::Required, id: O::Physcpubind, extra: false },
        OptSpec { long: "localalloc", short: Some('l'), arg: HasArg::No, id: O::Local, extra: false },
        OptSpec { long: "show", short: Some('s'), arg: HasArg::No, id: O::Show, extra: false },
    ];

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    /// Options as (id, value), and the operands.
    type Parsed<Id> = (Vec<(Id, Option<String>)>, Vec<String>);

    /// Every option `g` finds, then its operands.
    fn parse<Id: Copy>(mut g: Getopt<'_, Id>) -> Result<Parsed<Id>, GetoptError> {
        let mut out = Vec::new();
        for f in g.by_ref() {
            let f = f?;
            out.push((f.id, f.value.map(|v| v.to_string_lossy().into_owned())));
        }
        Ok((out, g.operands().iter().map(|s| s.to_string_lossy().into_owned()).collect()))
    }

    fn run(v: &[&str]) -> Result<Parsed<O>, GetoptError> {
        parse(Getopt::new(SPECS, &args(v)))
    }

    fn m(v: &str) -> (O, Option<String>) {
        (O::Membind, Some(v.to_string()))
    }

    #[test]
    fn every_value_form() {
        for form in [&["--membind=1", "cmd"][..], &["--membind", "1", "cmd"], &["-m1", "cmd"], &["-m", "1", "cmd"]] {
            assert_eq!(run(form).unwrap(), (vec![m("1")], vec!["cmd".to_string()]), "{form:?}");
        }
        // A value that looks like an option is still the value.
        assert_eq!(run(&["-m", "-1", "x"]).unwrap().0, vec![m("-1")]);
        assert_eq!(run(&["--membind", "--show", "x"]).unwrap().0, vec![m("--show")]);
        assert_eq!(run(&["--membind=", "x"]).unwrap().0, vec![m("")]);
    }

    #[test]
    fn clusters() {
        assert_eq!(run(&["-lm0", "x"]).unwrap().0, vec![(O::Local, None), m("0")]);
        assert_eq!(run(&["-ls", "x"]).unwrap().0, vec![(O::Local, None), (O::Show, None)]);
        assert_eq!(run(&["-lC", "1", "x"]).unwrap().0, vec![(O::Local, None), (O::Physcpubind, Some("1".into()))]);
    }

    #[test]
    fn stops_at_first_operand_and_double_dash() {
        let (o, rest) = run(&["-m0", "cat", "-l", "--show"]).unwrap();
        assert_eq!(o, vec![m("0")]);
        assert_eq!(rest, vec!["cat", "-l", "--show"]);
        let (o, rest) = run(&["-m0", "--", "-l", "x"]).unwrap();
        assert_eq!(o, vec![m("0")]);
        assert_eq!(rest, vec!["-l", "x"]);
        let (o, rest) = run(&["--", "--", "x"]).unwrap();
        assert!(o.is_empty());
        assert_eq!(rest, vec!["--", "x"]);
        assert_eq!(run(&["-", "x"]).unwrap().1, vec!["-", "x"]);
        assert_eq!(run(&[]).unwrap(), (vec![], vec![]));
    }

    #[test]
    fn abbreviations() {
        assert_eq!(run(&["--mem=0", "x"]).unwrap().0, vec![m("0")]);
        assert_eq!(run(&["--loc", "x"]).unwrap().0, vec![(O::Local, None)]);
        // Exact match wins over being a prefix of preferred-many.
        assert_eq!(run(&["--preferred=1", "x"]).unwrap().0, vec![(O::Preferred, Some("1".into()))]);
        assert_eq!(run(&["--preferred-m=1", "x"]).unwrap().0, vec![(O::PreferredMany, Some("1".into()))]);
        let e = run(&["--p=1", "x"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "option '--p=1' is ambiguous; possibilities: '--preferred' '--preferred-many' '--physcpubind'"
        );
        assert!(matches!(run(&["--pre=1"]), Err(GetoptError::Ambiguous(..))));
        // An option of ours gives way to the program's own in an abbreviation (numactl's --ver is
        // --verify); alone, or named in full enough, it is found; among ours, ambiguity stands.
        const EXTRA: &[OptSpec<O>] = &[
            OptSpec { long: "verify", short: None, arg: HasArg::No, id: O::Show, extra: false },
            OptSpec { long: "version", short: None, arg: HasArg::No, id: O::Local, extra: true },
            OptSpec { long: "verbose", short: None, arg: HasArg::No, id: O::Membind, extra: true },
        ];
        let first = |v: &str| {
            let a = args(&[v]);
            Getopt::new(EXTRA, &a).next().unwrap().map(|f| f.id)
        };
        assert_eq!(first("--ver"), Ok(O::Show));
        assert_eq!(first("--vers"), Ok(O::Local));
        assert!(matches!(first("--verb"), Ok(O::Membind)));
        const OURS: &[OptSpec<O>] = &[
            OptSpec { long: "version", short: None, arg: HasArg::No, id: O::Local, extra: true },
            OptSpec { long: "verbose", short: None, arg: HasArg::No, id: O::Membind, extra: true },
        ];
        let a = args(&["--ver"]);
        assert!(matches!(Getopt::new(OURS, &a).next(), Some(Err(GetoptError::Ambiguous(..)))));
        // Among the program's own, ours are not listed.
        const H: &[OptSpec<O>] = &[
            OptSpec { long: "hardware", short: None, arg: HasArg::No, id: O::Show, extra: false },
            OptSpec { long: "huge", short: None, arg: HasArg::No, id: O::Local, extra: false },
            OptSpec { long: "help", short: None, arg: HasArg::No, id: O::Membind, extra: true },
        ];
        let a = args(&["--h"]);
        assert_eq!(
            Getopt::new(H, &a).next().unwrap().unwrap_err().to_string(),
            "option '--h' is ambiguous; possibilities: '--hardware' '--huge'"
        );
    }

    #[test]
    fn errors_in_glibc_words() {
        assert_eq!(run(&["--foo", "x"]).unwrap_err().to_string(), "unrecognized option '--foo'");
        assert_eq!(run(&["--foo=1"]).unwrap_err().to_string(), "unrecognized option '--foo=1'");
        assert_eq!(run(&["-Z"]).unwrap_err().to_string(), "invalid option -- 'Z'");
        assert_eq!(run(&["-m"]).unwrap_err().to_string(), "option requires an argument -- 'm'");
        assert_eq!(run(&["--membind"]).unwrap_err().to_string(), "option '--membind' requires an argument");
        assert_eq!(run(&["--show=1"]).unwrap_err().to_string(), "option '--show' doesn't allow an argument");
        assert_eq!(run(&["-lZ"]).unwrap_err(), GetoptError::InvalidShort('Z'));
    }

    /// numastat's table (`"cmnp:s::vVz?"` and `--help`), read the way numastat reads it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum N {
        C,
        M,
        P,
        S,
        Help,
    }

    const NUMASTAT: &[OptSpec<N>] = &[
        OptSpec { long: "", short: Some('c'), arg: HasArg::No, id: N::C, extra: false },
        OptSpec { long: "", short: Some('m'), arg: HasArg::No, id: N::M, extra: false },
        OptSpec { long: "", short: Some('p'), arg: HasArg::Required, id: N::P, extra: false },
        OptSpec { long: "", short: Some('s'), arg: HasArg::Optional, id: N::S, extra: false },
        OptSpec { long: "help", short: Some('?'), arg: HasArg::No, id: N::Help, extra: false },
    ];

    fn permuted(v: &[&str]) -> Result<Parsed<N>, GetoptError> {
        parse(Getopt::permuting(NUMASTAT, &args(v)))
    }

    #[test]
    fn permuting_collects_operands_anywhere() {
        let (o, rest) = permuted(&["-cm", "-p1234", "99", "-p", "bash", "-c", "sleep"]).unwrap();
        let p = |v: &str| (N::P, Some(v.to_string()));
        assert_eq!(o, vec![(N::C, None), (N::M, None), p("1234"), p("bash"), (N::C, None)]);
        assert_eq!(rest, vec!["99", "sleep"]);
        let (o, rest) = permuted(&["x", "--", "-c", "y"]).unwrap();
        assert!(o.is_empty());
        assert_eq!(rest, vec!["x", "-c", "y"]);
        assert_eq!(permuted(&["-", "-m"]).unwrap(), (vec![(N::M, None)], vec!["-".to_string()]));
        assert_eq!(permuted(&["-mp"]).unwrap_err().to_string(), "option requires an argument -- 'p'");
        assert_eq!(permuted(&["1", "--he"]).unwrap().0, vec![(N::Help, None)]);
        assert_eq!(permuted(&["-?"]).unwrap().0, vec![(N::Help, None)]);
        assert_eq!(permuted(&["--bogus"]).unwrap_err().to_string(), "unrecognized option '--bogus'");
        assert_eq!(permuted(&["-x"]).unwrap_err().to_string(), "invalid option -- 'x'");
        // Short-only options have no long name to match, not even an empty one (an empty name is
        // a prefix of every long name, here only --help's).
        assert_eq!(permuted(&["--=1"]).unwrap_err(), GetoptError::UnexpectedValue("help".into()));
    }

    #[test]
    fn optional_values_only_from_their_own_word() {
        assert_eq!(permuted(&["-s"]).unwrap(), (vec![(N::S, None)], vec![]));
        assert_eq!(permuted(&["-s1"]).unwrap().0, vec![(N::S, Some("1".into()))]);
        assert_eq!(permuted(&["-cs1", "-m"]).unwrap().0, vec![(N::C, None), (N::S, Some("1".into())), (N::M, None)]);
        assert_eq!(permuted(&["-s", "1"]).unwrap(), (vec![(N::S, None)], vec!["1".to_string()]));
        const LONG: &[OptSpec<N>] =
            &[OptSpec { long: "sort", short: None, arg: HasArg::Optional, id: N::S, extra: false }];
        let a = args(&["--sort", "--sort=2", "x"]);
        let found: Vec<_> = Getopt::new(LONG, &a).map(|f| f.unwrap().value).collect();
        assert_eq!(found, vec![None, Some(OsString::from("2"))]);
    }

    #[test]
    fn non_utf8() {
        use std::os::unix::ffi::OsStringExt;
        // Values are bytes, in every form (a path need not be UTF-8).
        let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
        let value = |a: Vec<OsString>| Getopt::new(SPECS, &a).next().unwrap().unwrap().value.unwrap();
        assert_eq!(value(vec!["-m".into(), bytes(b"/x\xff")]), bytes(b"/x\xff"));
        assert_eq!(value(vec![bytes(b"-m/x\xff")]), bytes(b"/x\xff"));
        let a = vec![bytes(b"-lm\xff")];
        let found: Vec<_> = Getopt::new(SPECS, &a).map(|f| f.unwrap().value).collect();
        assert_eq!(found, vec![None, Some(bytes(b"\xff"))]);
        assert_eq!(value(vec![bytes(b"--membind=\xff")]), bytes(b"\xff"));
        assert_eq!(value(vec!["--membind".into(), bytes(b"\xff")]), bytes(b"\xff"));
        // A name that is not UTF-8 is no option's; a letter that is not is an invalid option.
        let a = vec![bytes(b"--mem\xff=1")];
        assert!(matches!(Getopt::new(SPECS, &a).next(), Some(Err(GetoptError::NotUtf8(_)))));
        let a = vec![bytes(b"-\xff")];
        assert_eq!(Getopt::new(SPECS, &a).next(), Some(Err(GetoptError::InvalidShort(char::REPLACEMENT_CHARACTER))));
        // Operands may be anything: they are passed to exec untouched.
        let a = vec![OsString::from("-l"), OsString::from_vec(vec![0xff])];
        let mut g = Getopt::new(SPECS, &a);
        assert!(matches!(g.next(), Some(Ok(_))));
        assert!(g.next().is_none());
        assert_eq!(g.operands().len(), 1);
    }
}
