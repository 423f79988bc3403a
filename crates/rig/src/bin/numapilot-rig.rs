//! `numapilot-rig`: boot the multi-node guests by hand, and regenerate the guest fixtures.
//!
//! ```text
//! numapilot-rig presets                         the guest specs (JSON)
//! numapilot-rig boot PRESET [SCENARIO.sh]       boot one guest with a scenario (default: rig/scenarios/checks.sh),
//!                                               print a summary; everything lands in rig/out/PRESET/
//! numapilot-rig demo [PRESET]                  the main-job demonstration (rig/scenarios/demo.sh, default guest
//!                                               4node): topology, one workload placed three ways, judged from the
//!                                               kernel's numa_maps and task stat; exit 1 if a placement is wrong
//! numapilot-rig race [--short] [--reps N] [--guests 2node,4node] [--no-readme] [--strict] [--json FILE]
//!                    [--from RUNDIR]...        (judge saved runs, e.g. rig/out/2node-race, instead of booting)
//!                    [--tests numa01,numa02] [--balancers off,kernel,numad,numapilot]
//!                                               (a subset of the cases, to work on one; README.md untouched)
//!                    [--sample-ms MS] [--recorder-ms MS]
//!                                               the judge's sampler's cadence (default 100) and the bench
//!                                               recorder's (default 1000); README.md untouched with others
//!                                               issue 5's race (rig/scenarios/race.sh): numa01/numa02 forced onto
//!                                               node 0 under no balancing, the kernel's, numad and the numapilot
//!                                               daemon; prints the table and the verdicts judged from the guest's
//!                                               numa_maps and vmstat, and (full version) rewrites README.md's
//!                                               race section; --strict: exit 1 when a goal is not met
//! numapilot-rig cost [--procs N] [--threads T] [--seconds S] [--warmup S] [--mem-mb M]
//!                                               numad's cost beside the daemon's on one load in the 4-node guest
//!                                               (rig/scenarios/cost.sh, nodes of M MiB, default 1024): CPU share
//!                                               of one core per daemon and the ratio (crates/rig/src/cost.rs)
//! numapilot-rig capture-fixtures [--out DIR] [--kernel 6.12|6.1] [PRESET...]
//!                                               boot each guest (default: all) with rig/scenarios/capture.sh and
//!                                               replace DIR/rig-<major.minor>-PRESET (DIR default: fixtures/);
//!                                               --kernel 6.1: on Debian 12's own kernel
//! ```
//! Environment: NUMAPILOT_RIG_KERNEL, NUMAPILOT_RIG_CACHE, NUMAPILOT_RIG_OUT, NUMAPILOT_RIG_NO_INSTALL,
//! NUMAPILOT_RIG_RELEASE (see the crate documentation).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use std::collections::BTreeMap;

use numapilot_rig::checks::{bytes_by_node, parse_hardware, parse_numa_maps, stat_processor};
use numapilot_rig::provision::workspace_root;
use numapilot_rig::race::{self, RaceConfig};
use numapilot_rig::{GuestSpec, KernelSeries, Rig, RigOptions};

const CHECKS: &str = include_str!("../../../../rig/scenarios/checks.sh");
const CAPTURE: &str = include_str!("../../../../rig/scenarios/capture.sh");
const DEMO: &str = include_str!("../../../../rig/scenarios/demo.sh");
const RACE: &str = include_str!("../../../../rig/scenarios/race.sh");

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn preset(name: &str) -> Res<GuestSpec> {
    GuestSpec::preset(name).ok_or_else(|| {
        let names: Vec<String> = GuestSpec::presets().into_iter().map(|g| g.name).collect();
        format!("unknown preset {name:?} (have: {})", names.join(", ")).into()
    })
}

fn prepare() -> Res<Rig> {
    prepare_with(&RigOptions::default())
}

fn prepare_with(opts: &RigOptions) -> Res<Rig> {
    let (rig, t) = Rig::prepare(opts)?;
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
    const USAGE: &str = "usage: numapilot-rig boot PRESET [SCENARIO.sh] [--append KERNEL_ARG]...";
    let mut plain = Vec::new();
    let mut kernel_args = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--append" => kernel_args.push(it.next().ok_or(USAGE)?.clone()),
            _ => plain.push(a),
        }
    }
    let [name, rest @ ..] = plain.as_slice() else { return Err(USAGE.into()) };
    let mut spec = preset(name)?;
    spec.kernel_args = kernel_args;
    spec.validate().map_err(|e| e.to_string())?;
    let script = match rest {
        [] => CHECKS.to_string(),
        [p] => std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?,
        _ => return Err(USAGE.into()),
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

/// The demonstration: boots the guest with demo.sh, prints what our tools said, and judges every placement from
/// the kernel's own files (numa_maps for memory, task stat field 39 for where each thread last ran), not from our
/// output. Fails when a placement is not what was asked for, or when `numapilot stat -p` differs from `numastat -p`.
fn demo(args: &[String]) -> Res<()> {
    let spec = preset(args.first().map_or("4node", String::as_str))?;
    let rig = prepare()?;
    let run = rig.boot(&spec, "demo", DEMO, &[])?;
    let out = |name: &str| -> Res<String> { Ok(run.section(name)?.stdout()) };
    println!(
        "== guest {}: {} (userspace after {:.1} s under QEMU TCG)",
        spec.name,
        out("topo")?.lines().next().unwrap_or(""),
        run.boot_s.unwrap_or(f64::NAN)
    );
    println!("\n$ numapilot topo\n{}", out("topo")?);
    println!("$ numapilot topo --tree\n{}", out("tree")?);
    // CPUs per node as Debian's numactl reads them, so no verdict rests on our own output.
    let hw = parse_hardware(&out("hw")?)?;
    let node_of_cpu: BTreeMap<u32, u32> =
        hw.cpus.iter().flat_map(|(n, cpus)| cpus.iter().map(move |c| (*c, *n))).collect();
    let mut failures = Vec::new();
    for (how, want_mem, want_cpu) in
        [("remote", Some(0u32), Some(3u32)), ("local", Some(3), Some(3)), ("spread", None, None)]
    {
        let opts = out(&format!("{how}-opts"))?;
        println!("== {how}: numapilot run {} rig-toucher --mb 64 --threads 4", opts.trim());
        if run.section(&format!("{how}-start"))?.rc != 0 {
            failures
                .push(format!("{how}: the workload did not start: {}", run.section(&format!("{how}-start"))?.stderr()));
            continue;
        }
        println!("$ numapilot run {} numapilot run --show\n{}", opts.trim(), out(&format!("{how}-show"))?);
        let ours = out(&format!("{how}-stat"))?;
        println!("$ numapilot stat -p PID\n{ours}");
        if ours != out(&format!("{how}-numastat"))? {
            failures.push(format!("{how}: numapilot stat -p differs from numastat -p"));
        }
        let anon = bytes_by_node(&parse_numa_maps(&out(&format!("{how}-numa-maps"))?)?, |v| !v.file);
        let total: u64 = anon.values().sum();
        let tids = out(&format!("{how}-tids"))?;
        let mut thread_nodes = Vec::new();
        for tid in tids.split_whitespace() {
            let stat = out(&format!("{how}-task-{tid}-stat"))?;
            let cpu = stat_processor(&stat).ok_or_else(|| format!("{how}: thread {tid}: no CPU in stat"))?;
            thread_nodes.push(node_of_cpu.get(&cpu).copied().unwrap_or(u32::MAX));
        }
        let per_node: Vec<String> =
            anon.iter().map(|(n, b)| format!("node {n} {:.1} MiB", *b as f64 / 1048576.0)).collect();
        println!("kernel says: anonymous memory {}; threads last ran on nodes {thread_nodes:?}", per_node.join(", "));
        let on = |n: u32| anon.get(&n).copied().unwrap_or(0);
        match (want_mem, want_cpu) {
            (Some(m), Some(c)) => {
                // Memory on the nodes the threads actually ran on, as a share of all anonymous memory.
                let ran_on: std::collections::BTreeSet<u32> = thread_nodes.iter().copied().collect();
                let near: u64 = ran_on.iter().map(|n| on(*n)).sum();
                let ran_list = ran_on.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
                let ran_word = if ran_on.len() == 1 { "node" } else { "nodes" };
                println!(
                    "verdict: memory {:.0}% on node {m}, threads on {ran_word} {ran_list}: {:.0}% of the memory is \
                     local to the threads\n",
                    100.0 * on(m) as f64 / total.max(1) as f64,
                    100.0 * near as f64 / total.max(1) as f64
                );
                if on(m) * 100 < total * 99 || thread_nodes.iter().any(|n| *n != c) {
                    failures.push(format!("{how}: expected memory on node {m} and threads on node {c}"));
                }
            }
            _ => {
                // Interleave spreads pages over all nodes; shares need not be equal (a node holding the initramfs
                // has fewer free huge pages, and a THP that cannot be had there falls back to base pages), so the
                // judgement is: every node holds some, and none holds more than twice its even share.
                let nodes = hw.cpus.len() as u64;
                let (lo, hi) = (anon.values().min().copied().unwrap_or(0), anon.values().max().copied().unwrap_or(0));
                let even = anon.len() as u64 == nodes && lo > 0 && hi * nodes <= 2 * total;
                println!(
                    "verdict: memory on {} of {nodes} nodes, shares {:.0}%..{:.0}% (even would be {:.0}%): {}\n",
                    anon.len(),
                    100.0 * lo as f64 / total.max(1) as f64,
                    100.0 * hi as f64 / total.max(1) as f64,
                    100.0 / nodes as f64,
                    if even { "spread" } else { "NOT SPREAD" }
                );
                if !even {
                    failures.push(format!("{how}: interleaved memory is not spread over all {nodes} nodes"));
                }
            }
        }
    }
    let bad = run.section("bad")?;
    println!("== bad input: numapilot run --membind=7 ... -> exit {}: {}", bad.rc, bad.stderr().trim());
    if bad.rc != 1 {
        failures.push(format!("--membind=7 exited {} instead of 1", bad.rc));
    }
    if failures.is_empty() {
        println!("\ndemo: every placement is what was asked for, judged from the kernel's own files");
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// Boots every guest with race.sh and `cfg` in parallel (one QEMU each).
fn boot_race(guests: &[String], cfg: &RaceConfig) -> Res<Vec<Result<numapilot_rig::GuestRun, String>>> {
    let specs: Vec<GuestSpec> = guests.iter().map(|g| preset(g)).collect::<Res<_>>()?;
    let rig = prepare_with(&numapilot_rig::race::rig_options())?;
    let conf = vec![("rig/race.conf".to_string(), cfg.to_conf().into_bytes())];
    Ok(std::thread::scope(|sc| {
        let hs: Vec<_> = specs
            .iter()
            .map(|spec| {
                let mut spec = spec.clone();
                // Per case: the bench run, the workers' start-up and first touch under TCG (measured: a 15 s run
                // takes 35-40 s of guest time in the 2-node guest), the balancer's start and the sections' transfer.
                spec.timeout =
                    std::time::Duration::from_secs(60 + cfg.cases().len() as u64 * (u64::from(cfg.seconds) * 4 + 40));
                let (rig, conf) = (&rig, &conf);
                sc.spawn(move || rig.boot(&spec, "race", RACE, conf).map_err(|e| e.to_string()))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("guest thread panicked".into()))).collect()
    }))
}

/// A finished guest run read back from its `result.json` (to judge a run again without booting; the console is
/// not kept there).
fn load_run(dir: &Path) -> Result<numapilot_rig::GuestRun, String> {
    let file = dir.join("result.json");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let bad = |what: &str| format!("{}: {what}", file.display());
    let mut sections = BTreeMap::new();
    for (k, s) in v["sections"].as_object().ok_or_else(|| bad("no sections"))? {
        let text = |f: &str| s[f].as_str().map(|t| t.as_bytes().to_vec()).ok_or_else(|| bad(&format!("{k}.{f}")));
        let rc = s["rc"].as_i64().ok_or_else(|| bad(&format!("{k}.rc")))? as i32;
        sections.insert(k.clone(), numapilot_rig::Section { rc, out: text("out")?, err: text("err")? });
    }
    Ok(numapilot_rig::GuestRun {
        guest: v["guest"].as_str().ok_or_else(|| bad("no guest"))?.to_string(),
        sections,
        scenario_rc: v["scenario_rc"].as_i64().unwrap_or(-1) as i32,
        boot_s: v["boot_s"].as_f64(),
        wall_ms: v["wall_ms"].as_u64().unwrap_or(0),
        console: String::new(),
        dir: dir.to_path_buf(),
    })
}

/// Issue 5's race: every guest runs race.sh with the same [`RaceConfig`] (guests in parallel, one QEMU each),
/// the cases are judged by `numapilot_rig::race` from the scenario's own reads, the table and verdicts printed,
/// and (full version, unless --no-readme) README.md's section between the race markers rewritten.
fn cost(args: &[String]) -> Res<()> {
    let mut cfg = numapilot_rig::cost::CostConfig::default();
    let mut mem_mb = 1024u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |what: &str| -> Res<u64> {
            let v = it.next().ok_or(format!("cost: {what} needs a number"))?;
            v.parse::<u64>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("cost: {what} {v:?}: not a number >= 1").into())
        };
        match a.as_str() {
            "--procs" => cfg.procs = num("--procs")? as u32,
            "--threads" => cfg.threads = num("--threads")? as u32,
            "--seconds" => cfg.seconds = num("--seconds")? as u32,
            "--warmup" => cfg.warmup = num("--warmup")? as u32,
            "--mem-mb" => mem_mb = num("--mem-mb")?,
            other => return Err(format!("cost: unknown argument {other:?}").into()),
        }
    }
    let rig = prepare_with(&numapilot_rig::race::rig_options())?;
    let t0 = std::time::Instant::now();
    let (_run, res) = numapilot_rig::cost::run(&rig, &cfg, mem_mb)?;
    println!(
        "guest 4node ({} MiB a node, QEMU TCG): {} processes x {} threads ready ({} tasks in the guest); {} s measured after {} s per daemon; wall {:.0} s",
        mem_mb,
        res.procs,
        cfg.threads,
        res.threads,
        cfg.seconds,
        cfg.warmup,
        t0.elapsed().as_secs_f64()
    );
    print!("{}", res.render_markdown());
    Ok(())
}

fn race(args: &[String]) -> Res<()> {
    let mut short = false;
    let mut reps = 1u32;
    let mut guests: Option<Vec<String>> = None;
    let mut readme = true;
    let mut strict = false;
    let mut json: Option<PathBuf> = None;
    let mut from: Vec<PathBuf> = Vec::new();
    let mut tests: Option<Vec<String>> = None;
    let mut balancers: Option<Vec<race::Condition>> = None;
    let mut sample_ms: Option<u32> = None;
    let mut recorder_ms: Option<u32> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--short" => short = true,
            "--no-readme" => readme = false,
            "--strict" => strict = true,
            "--reps" => {
                let v = it.next().ok_or("--reps needs a number")?;
                reps = v.parse().ok().filter(|r| *r >= 1).ok_or(format!("--reps {v:?}: not a number >= 1"))?;
            }
            "--guests" => {
                let v = it.next().ok_or("--guests needs a list such as 2node,4node")?;
                guests = Some(v.split(',').map(str::to_string).collect());
            }
            "--json" => json = Some(PathBuf::from(it.next().ok_or("--json needs a file")?)),
            flag @ ("--sample-ms" | "--recorder-ms") => {
                let v = it.next().ok_or(format!("{flag} needs a number of milliseconds"))?;
                let ms = v
                    .parse()
                    .ok()
                    .filter(|m| (10..=10_000).contains(m))
                    .ok_or(format!("{flag} {v:?}: not 10-10000"))?;
                *(if flag == "--sample-ms" { &mut sample_ms } else { &mut recorder_ms }) = Some(ms);
            }
            "--from" => from.push(PathBuf::from(it.next().ok_or("--from needs a run directory")?)),
            "--tests" => {
                let v = it.next().ok_or("--tests needs a list such as numa01,numa02")?;
                let list: Vec<String> = v.split(',').map(str::to_string).collect();
                if let Some(bad) = list.iter().find(|t| !["numa01", "numa02"].contains(&t.as_str())) {
                    return Err(format!("--tests: unknown test {bad:?} (numa01, numa02)").into());
                }
                tests = Some(list);
            }
            "--balancers" => {
                let v = it.next().ok_or("--balancers needs a list such as kernel,numapilot")?;
                let list = v
                    .split(',')
                    .map(|b| {
                        race::Condition::parse(b)
                            .ok_or(format!("--balancers: unknown balancer {b:?} (off, kernel, numad, numapilot)"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                balancers = Some(list);
            }
            other => return Err(format!("race: unknown argument {other:?}").into()),
        }
    }
    let mut cfg = if short { RaceConfig::short() } else { RaceConfig::full(reps) };
    // A subset of the cases (for working on one of them) is judged and printed; the README keeps the full table.
    if tests.is_some() || balancers.is_some() {
        readme = false;
    }
    if let Some(t) = tests {
        cfg.tests = t;
    }
    if let Some(b) = balancers {
        cfg.conditions = b;
    }
    // Another cadence is a diagnosis (the published table uses the defaults).
    if let Some(ms) = sample_ms {
        readme &= ms == cfg.sample_ms;
        cfg.sample_ms = ms;
    }
    if let Some(ms) = recorder_ms {
        readme &= ms == cfg.recorder_ms;
        cfg.recorder_ms = ms;
    }
    let guests =
        guests.unwrap_or_else(|| if short { vec!["2node".into()] } else { vec!["2node".into(), "4node".into()] });
    let t0 = std::time::Instant::now();
    let runs: Vec<Result<numapilot_rig::GuestRun, String>> =
        if from.is_empty() { boot_race(&guests, &cfg)? } else { from.iter().map(|d| load_run(d)).collect() };
    let mut cases = Vec::new();
    let mut times = Vec::new();
    // A guest that failed is reported and the others still judged; the README is then left alone.
    let mut failed = Vec::new();
    for run in runs {
        let run = match run {
            Ok(r) if r.scenario_rc == 0 => r,
            Ok(r) => {
                failed.push(format!(
                    "guest {}: race.sh exit {}; console tail:\n{}",
                    r.guest,
                    r.scenario_rc,
                    r.console_tail()
                ));
                continue;
            }
            Err(e) => {
                failed.push(e);
                continue;
            }
        };
        times.push(format!("{} {:.0} s", run.guest, run.wall_ms as f64 / 1000.0));
        eprintln!("guest {}: QEMU wall {} ms, results in {}", run.guest, run.wall_ms, run.dir.display());
        match race::read_run(&run, &cfg) {
            Ok(c) => cases.extend(c),
            Err(e) => failed.push(format!("guest {}: {e}", run.guest)),
        }
    }
    let verdicts = race::judge(&cases);
    let table = race::render_markdown(&cases, &verdicts);
    println!("{table}");
    if let Some(j) = &json {
        std::fs::write(
            j,
            serde_json::to_string_pretty(&serde_json::json!({"config": cfg, "cases": cases, "verdicts": verdicts}))?,
        )
        .map_err(|e| format!("{}: {e}", j.display()))?;
    }
    if !failed.is_empty() {
        return Err(format!("race: {} (README.md left alone)", failed.join("\n")).into());
    }
    if !short && readme {
        let path = workspace_root().join("README.md");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let body = format!(
            "## Race against AutoNUMA and numad (rig, measured)\n\n\
             `scripts/race.sh` (= `numapilot-rig race`): in the rig's {} guests (Debian 6.12 kernel under QEMU TCG), \
             `numapilot bench numa01 --mb {} --threads {}` (two processes) and `numapilot bench numa02 --mb {} --threads {}` \
             (one process), `--seconds {} --force-node 0` (all memory first-touched on node 0), {} repetition(s), under \
             (a) numa_balancing=0, (b) numa_balancing=1, (c) Debian's `numad -i 1:1` with the workers named by `numad -p` \
             (numad skips processes under 300 MB otherwise), (d) `numapilot daemon` (numa_balancing=0, step {} ms). \
             Time to 90% and local % come from the scenario's own reads of numa_maps and task stat (`rig-sampler`), \
             {} ms apart plus the time of the reads (the last column: the median gap, the sampler's CPU time and that \
             of the bench's recorder, which reads every {} ms; its figure is beside the scenario's as a cross-check), \
             pages from /proc/vmstat deltas over the run. \
             \"final local %\" is the issue's measure (memory on the nodes where the process's threads run), under \
             which a process with one thread on each node counts as all-local wherever its memory is; \
             \"thread-weighted\" averages, over the worker threads, the share of the buffer on that thread's own \
             node; its time to 90% is judged too, as a stricter addition to the issue's goals (under the issue's \
             measure the balancers tie at 0.0 s in most numa02 cases). Times are from each process's first sample \
             with its workers running; 0.0 s means the placement was already local then, and a tie at 0.0 s passes \
             a \"sooner\" goal as `= at 0.0 s` (nothing to be sooner at; such ties are counted in the verdict), a tie \
             at any later time does not. Times are medians over the repetitions. Guest wall times: {}; {}.\n\n{table}",
            guests.join(" and "),
            cfg.mb01,
            cfg.threads,
            cfg.mb02,
            cfg.threads,
            cfg.seconds,
            cfg.reps,
            cfg.interval_ms,
            cfg.sample_ms,
            cfg.recorder_ms,
            times.join(", "),
            if from.is_empty() {
                format!("whole command {:.0} s", t0.elapsed().as_secs_f64())
            } else {
                "judged again from the saved runs (numapilot-rig race --from)".to_string()
            }
        );
        let new = race::replace_section(
            &text,
            "<!-- race:begin -->",
            "<!-- race:end -->",
            &body,
            "## Performance (measured)",
        )?;
        std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("README.md: race section rewritten");
    }
    if strict && verdicts.iter().any(|v| !v.pass) {
        return Err("race: a goal is not met (see the verdicts)".into());
    }
    Ok(())
}

/// `6.12.107+deb12-cloud-amd64` -> `6.12`.
fn major_minor(release: &str) -> Option<String> {
    let mut it = release.trim().split('.');
    let (a, b) = (it.next()?, it.next()?);
    (a.chars().all(|c| c.is_ascii_digit()) && b.chars().all(|c| c.is_ascii_digit())).then(|| format!("{a}.{b}"))
}

/// The kernel series a `--kernel` value names: `6.12` (the default) or `6.1` (Debian 12's own).
fn kernel_series(v: &str) -> Res<KernelSeries> {
    KernelSeries::from_version(v)
        .ok_or_else(|| format!("--kernel {v:?}: expected 6.12 (the default) or 6.1 (Debian 12's own kernel)").into())
}

fn capture(args: &[String]) -> Res<()> {
    let mut out = workspace_root().join("fixtures");
    let mut names = Vec::new();
    let mut kernel = KernelSeries::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--out" {
            out = PathBuf::from(it.next().ok_or("--out needs a directory")?);
        } else if a == "--kernel" {
            kernel = kernel_series(it.next().ok_or("--kernel needs 6.12 or 6.1")?)?;
        } else {
            names.push(a.clone());
        }
    }
    let specs: Vec<GuestSpec> =
        if names.is_empty() { GuestSpec::presets() } else { names.iter().map(|n| preset(n)).collect::<Res<_>>()? };
    let rig = prepare_with(&RigOptions { kernel, ..RigOptions::default() })?;
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
        Some("demo") => demo(&args[1..]),
        Some("race") => race(&args[1..]),
        Some("cost") => cost(&args[1..]),
        _ => Err("usage: numapilot-rig presets | boot PRESET [SCENARIO.sh] [--append KERNEL_ARG]... | demo [PRESET] | race [--short] [...] | cost [...] | capture-fixtures [--out DIR] [--kernel 6.12|6.1] [PRESET...]"
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
