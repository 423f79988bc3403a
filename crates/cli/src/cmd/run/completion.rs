//! What a shell completes after `numapilot run`: the launcher's own options, then a command and
//! its arguments, as a shell completes them after `sudo`, `nice` or `taskset`.
//!
//! # Problem
//!
//! clap sees `run`'s command line as one pass-through argument (`run.rs`: numactl's options are
//! read by our getopt clone, not by clap), so the scripts clap_complete writes offered nothing
//! there: bash fell back to the directory's file names, for the program's name too, and no shell
//! offered `--membind` and the others. A completion has to know where the options end and the
//! command begins, which takes getopt's rules: a value in the option's word (`-m0`,
//! `--membind=0`) or the next one (`-m 0`, `--mem 0`), letters clustered (`-lN 0`), unique
//! prefixes of long names, the first word that is no option or `--` ending the options.
//!
//! # Approach
//!
//! The words that take the next word as their value are computed here from the parser's own
//! table (`numactl::OPTIONS`) by the parser itself ([`Getopt`] asked about `--PREFIX X` for every
//! prefix of every long name), so the scripts cannot drift from what `numapilot run` accepts. Each
//! shell gets a small walker over the words after `run` built from them:
//!
//! ```text
//!   bash  _numapilot__run: replaces the `run` case of clap's script; the command and its
//!         arguments through bash-completion's _command_offset (what sudo's completion uses: the
//!         command's own completion), without bash-completion command names then file names
//!   zsh   the `run` block: _arguments with the options, then `_command_names -e` and `_normal`
//!         (as zsh's own _sudo and _nice)
//!   fish  the options while no command is on the line, then __fish_complete_subcommand
//! ```
//!
//! # Limits
//!
//! Option values are not completed beyond file names for `--shm` and `--file` (node and CPU lists,
//! sizes, modes and ids offer nothing). elvish's and powershell's scripts are clap's as generated:
//! no options and no command after `run`.

use std::ffi::OsString;

use super::getopt::{Getopt, HasArg};
use super::numactl::{documented, OptId, OPTIONS};

/// One option as the scripts offer it.
struct Offered {
    long: &'static str,
    short: Option<char>,
    /// Its value's name (`NODES`), `None` for a flag.
    value: Option<&'static str>,
    /// Whether its value is a file name (`--shm KEYFILE`, `--file FILE`).
    file: bool,
    help: &'static str,
}

fn offered() -> Vec<Offered> {
    OPTIONS
        .iter()
        .zip(documented())
        .map(|(o, d)| Offered {
            long: o.long,
            short: o.short,
            value: (o.arg == HasArg::Required).then_some(d.value.unwrap_or("VALUE")),
            file: matches!(o.id, OptId::Shm | OptId::File),
            help: d.help,
        })
        .collect()
}

/// Every long form, prefixes included, that getopt reads as an option taking the next word as its
/// value (`--mem` is `--membind`), with whether that value is a file name; in the table's order.
fn long_words_with_value() -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for o in OPTIONS.iter().filter(|o| !o.long.is_empty()) {
        for end in 1..=o.long.len() {
            let word = format!("--{}", &o.long[..end]);
            let args = [OsString::from(&word), OsString::from("X")];
            let Some(Ok(found)) = Getopt::new(OPTIONS, &args).next() else { continue };
            if found.value.as_deref() == Some("X".as_ref()) && !out.iter().any(|(w, _)| *w == word) {
                out.push((word, matches!(found.id, OptId::Shm | OptId::File)));
            }
        }
    }
    out
}

/// The letters of the options that take a value, and of those whose value is a file name.
fn short_letters_with_value() -> (String, String) {
    let offered = offered();
    let with = |file: bool| {
        offered.iter().filter(|o| o.value.is_some() && (o.file || !file)).filter_map(|o| o.short).collect()
    };
    (with(false), with(true))
}

/// Every option as written in full: `--long` and `-s`.
fn option_words() -> Vec<String> {
    let mut out = Vec::new();
    for o in offered() {
        out.push(format!("--{}", o.long));
        out.extend(o.short.map(|c| format!("-{c}")));
    }
    out
}

/// bash: the function `_numapilot__run`, called with the word being completed from the `run`
/// case of clap's script (`docs::completions` splices it in).
pub(crate) fn bash_function() -> String {
    let longs = long_words_with_value();
    let pattern = |file: bool| -> String {
        longs.iter().filter(|(_, f)| *f || !file).map(|(w, _)| w.as_str()).collect::<Vec<_>>().join("|")
    };
    let (letters, file_letters) = short_letters_with_value();
    let file_shorts: Vec<String> = file_letters.chars().map(|c| format!("-{c}")).collect();
    let file_words = format!("{}|{}", pattern(true), file_shorts.join("|"));
    format!(
        r#"# `numapilot run`: numactl's options, read as getopt_long reads them (a value in the option's word
# or the next one, clustered letters, unique prefixes of long names) up to the first word that is
# none or `--`; from there the command: its name, then its own completion (bash-completion's
# _command_offset, as sudo's completion does; without bash-completion, file names). Generated from
# the launcher's option table (crates/cli/src/cmd/run/completion.rs).
_numapilot__run() {{
    local cur="$1" i=1 word rest need="" at=0
    [[ $cur == = ]] && cur=""
    while [[ $i -lt $COMP_CWORD && ${{COMP_WORDS[i]}} != run ]]; do ((i++)); done
    ((i++))
    while [[ $i -lt $COMP_CWORD ]]; do
        word=${{COMP_WORDS[i]}}
        ((i++))
        if [[ -n $need ]]; then
            # The option's value (bash parts --name=value at the =).
            if [[ $word == = ]]; then
                [[ $i -lt $COMP_CWORD ]] || break
                ((i++))
            fi
            need=""
            continue
        fi
        case "$word" in
            --)
                at=$i
                break
                ;;
            --*=*) ;;
            {longs})
                need=$word
                ;;
            --*)
                [[ ${{COMP_WORDS[i]}} == = ]] && ((i += 2))
                ;;
            -?*)
                rest=${{word:1}}
                while [[ -n $rest ]]; do
                    if [[ "{letters}" == *"${{rest:0:1}}"* ]]; then
                        [[ ${{#rest}} -eq 1 ]] && need=-${{rest:0:1}}
                        break
                    fi
                    rest=${{rest:1}}
                done
                ;;
            *)
                at=$((i - 1))
                break
                ;;
        esac
    done
    if [[ $at -eq 0 ]]; then
        if [[ -n $need ]]; then
            case "$need" in
                {file_words})
                    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
                    compopt -o filenames 2>/dev/null
                    ;;
                *)
                    # A node or CPU list, a size, a mode or an id: nothing to offer.
                    COMPREPLY=("$cur")
                    compopt -o nospace 2>/dev/null
                    ;;
            esac
            return 0
        fi
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "{options}" -- "$cur")
            return 0
        fi
        at=$COMP_CWORD
    fi
    compopt +o nosort 2>/dev/null
    if declare -F _command_offset >/dev/null; then
        _command_offset "$at"
    elif [[ $at -eq $COMP_CWORD ]]; then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        compopt -o filenames 2>/dev/null
    fi
    return 0
}}
"#,
        longs = pattern(false),
        options = option_words().join(" "),
    )
}

/// zsh: the `_arguments` call of the `run` block (in place of clap's, `docs::completions`).
pub(crate) fn zsh_arguments() -> String {
    /// Text inside `'...'` and `[...]` of an `_arguments` spec.
    fn esc(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '\'' => out.push_str("'\\''"),
                '\\' | '[' | ']' | ':' | '$' | '`' => {
                    out.push('\\');
                    out.push(c);
                }
                '\n' => out.push(' '),
                _ => out.push(c),
            }
        }
        out
    }
    let mut lines = vec!["_arguments -s -S -A '-*' : \\".to_string()];
    for o in offered() {
        let mut forms: Vec<String> = o.short.map(|c| format!("-{c}")).into_iter().collect();
        forms.push(format!("--{}", o.long));
        let group = format!("({})", forms.join(" "));
        for form in &forms {
            let (join, value) = match o.value {
                None => ("", String::new()),
                Some(v) => {
                    let action = if o.file { "_files" } else { " " };
                    (if form.starts_with("--") { "=" } else { "+" }, format!(":{}:{action}", esc(v)))
                }
            };
            lines.push(format!("'{group}{form}{join}[{}]{value}' \\", esc(o.help)));
        }
    }
    lines.push("'(-)1:command:_command_names -e' \\".into());
    lines.push("'*::arguments:_normal' \\".into());
    lines.push("&& ret=0".into());
    lines.join("\n")
}

/// fish: the `run` lines (after clap's script, `docs::completions`).
pub(crate) fn fish_lines() -> String {
    fn esc(s: &str) -> String {
        s.replace('\\', "\\\\").replace('\'', "\\'")
    }
    let longs: Vec<String> = long_words_with_value().into_iter().map(|(w, _)| w).collect();
    let (letters, _) = short_letters_with_value();
    let letters: Vec<String> = letters.chars().map(String::from).collect();
    let mut out = format!(
        r#"
# `numapilot run`: numactl's options while no command is on the line (getopt_long's reading: a
# value in the option's word or the next one, clustered letters, unique prefixes of long names,
# `--` or the first word that is no option ending them), then the command and its own completion.
# Generated from the launcher's option table (crates/cli/src/cmd/run/completion.rs).
function __fish_numapilot_run_rest
    # Prints the command and its arguments before the cursor and succeeds once the command has
    # begun (at the cursor too); fails while options or an option's value are being written.
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    while set -q words[1]; and test "$words[1]" != run
        set -e words[1]
    end
    set -e words[1]
    set -l need
    while set -q words[1]
        set -l word $words[1]
        set -e words[1]
        if test -n "$need"
            set need
            continue
        end
        switch $word
            case --
                printf '%s\n' $words
                return 0
            case '--*=*'
            case {longs}
                set need $word
            case '--*'
            case '-?*'
                set -l letters (string sub -s 2 -- $word | string split '')
                for j in (seq (count $letters))
                    if contains -- $letters[$j] {letters}
                        test $j -eq (count $letters); and set need -$letters[$j]
                        break
                    end
                end
            case '*'
                printf '%s\n' $word $words
                return 0
        end
    end
    test -z "$need"; and not string match -q -- '-*' $cur
end

function __fish_numapilot_run_command
    set -l rest (__fish_numapilot_run_rest); or return
    __fish_complete_subcommand --commandline $rest (commandline -ct)
end

complete -c numapilot -n "__fish_numapilot_using_subcommand run" -x -a "(__fish_numapilot_run_command)"
"#,
        longs = longs.join(" "),
        letters = letters.join(" "),
    );
    for o in offered() {
        let short = o.short.map(|c| format!(" -s {c}")).unwrap_or_default();
        let value = match (o.value, o.file) {
            (None, _) => "",
            (Some(_), true) => " -r -F",
            (Some(_), false) => " -x",
        };
        out.push_str(&format!(
            "complete -c numapilot -n \"__fish_numapilot_using_subcommand run; and not __fish_numapilot_run_rest >/dev/null\"{short} -l {} -d '{}'{value}\n",
            o.long,
            esc(o.help)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are the parser's: a prefix getopt reads as an option with a value is there, an
    /// ambiguous one or a flag's is not.
    #[test]
    fn the_words_that_take_a_value_are_getopts() {
        let longs: Vec<String> = long_words_with_value().into_iter().map(|(w, _)| w).collect();
        for w in ["--membind", "--mem", "--m", "--cpunodebind", "--cpun", "--physcpubind", "--file", "--shmid"] {
            assert!(longs.contains(&w.to_string()), "{w}: {longs:?}");
        }
        // --cpu is --cpubind or --cpunodebind, --p four options, --s --show or --shm..., --show a flag.
        for w in ["--cpu", "--p", "--s", "--show", "--all", "--sh"] {
            assert!(!longs.contains(&w.to_string()), "{w}: {longs:?}");
        }
        let (letters, files) = short_letters_with_value();
        assert_eq!(files, "Sf");
        assert!(letters.contains('N') && letters.contains('m') && !letters.contains('l'), "{letters}");
    }
}
