//! The daemon's steady-state back-off ([`numapilot_daemon::run::Backoff`]) driven by the real engine
//! over a scripted host: one real observation of this machine, replayed with the clock moving and
//! no counter moving (an idle machine), then with a process added. This single-node machine plans
//! nothing, so every replayed step is quiet unless the script changes something.

use std::path::Path;

use numapilot_daemon::run::Backoff;
use numapilot_observe::{Reader, Sample};
use numapilot_policy::{Action, Adaptive, Engine, Host, HostError, Outcome};
use numapilot_topology::Topology;

struct Script {
    topo: Topology,
    sample: Sample,
    now_ns: u64,
}

impl Host for Script {
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        self.now_ns += 1_000_000_000;
        let mut s = self.sample.clone();
        s.monotonic_ns = self.now_ns;
        Ok(s)
    }
    fn apply(&mut self, _: &Action) -> Outcome {
        Outcome::Refused { message: "scripted host".into() }
    }
}

#[test]
fn idle_steps_double_the_wait_up_to_the_cap_and_a_new_process_snaps_it_back() {
    let topo = Topology::from_sysfs(Path::new("/")).unwrap();
    let sample = Reader::new("/").sample().unwrap();
    assert!(!sample.processes.is_empty());
    let mut host = Script { topo: topo.clone(), now_ns: sample.monotonic_ns, sample };
    let mut engine = Engine::new(topo, numapilot_model::Tunables::default(), Box::new(Adaptive::new()));
    engine.dry_run = true;
    let cap = 5_000_000_000;
    let mut backoff = Backoff::new(5_000);
    let step = |engine: &mut Engine, host: &mut Script, backoff: &mut Backoff| {
        let r = engine.step(host).unwrap();
        let base = engine.next_interval_ns();
        (backoff.next_wait_ns(base, &engine.model, Some(r.plan.actions.len())), base, r.plan.actions.len())
    };
    // First step: nothing to compare with, the policy's interval.
    let (w, base, _) = step(&mut engine, &mut host, &mut backoff);
    assert_eq!(w, base);
    // Idle: the wait doubles from the interval until it reaches the cap, and stays there.
    let mut waits = Vec::new();
    for _ in 0..12 {
        let (w, base, planned) = step(&mut engine, &mut host, &mut backoff);
        assert_eq!(planned, 0, "a one-node machine replayed idle plans nothing");
        if backoff.quiet_steps() > 0 {
            assert_eq!(w, (base << backoff.quiet_steps().min(20)).min(cap), "doubling from the interval");
        }
        waits.push(w);
    }
    assert!(waits.windows(2).all(|p| p[1] >= p[0] || p[1] == cap), "{waits:?}");
    assert_eq!(*waits.last().unwrap(), cap, "an idle machine is stepped every 5 s: {waits:?}");
    assert!(waits[0] < cap, "the first quiet wait is twice the interval, not the cap: {waits:?}");

    // A new process: back to the policy's interval at once.
    let mut extra = host.sample.processes[0].clone();
    extra.pid = host.sample.processes.iter().map(|p| p.pid).max().unwrap() + 1;
    extra.starttime += 1;
    for t in &mut extra.threads {
        t.tid += extra.pid;
    }
    host.sample.processes.push(extra);
    let (w, base, _) = step(&mut engine, &mut host, &mut backoff);
    assert_eq!((w, backoff.quiet_steps()), (base, 0), "a new process snaps the wait back");
    // Quiet again from there.
    let (w, base, _) = step(&mut engine, &mut host, &mut backoff);
    assert_eq!(w, (base * 2).min(cap));
    // A step that planned something, or failed, is never quiet.
    assert_eq!(backoff.next_wait_ns(base, &engine.model, Some(1)), base);
    assert_eq!(backoff.next_wait_ns(base, &engine.model, None), base);
    // After a step that planned an action, the policy's holds run at the interval: no back-off
    // for hold_periods (10) steps, then the doubling again.
    let mut b2 = Backoff::new(5_000);
    b2.next_wait_ns(base, &engine.model, Some(0));
    assert_eq!(b2.next_wait_ns(base, &engine.model, Some(0)), (base * 2).min(cap), "quiet, no action yet");
    assert_eq!(b2.next_wait_ns(base, &engine.model, Some(2)), base);
    let holds = engine.model.tunables.hold_periods;
    for i in 0..holds {
        assert_eq!(b2.next_wait_ns(base, &engine.model, Some(0)), base, "step {i} of the holds");
    }
    assert_eq!(b2.next_wait_ns(base, &engine.model, Some(0)), (base * 2).min(cap), "the holds are over");
    // A cap at or below the interval: no back-off at all.
    let mut off = Backoff::new(base / 1_000_000);
    off.next_wait_ns(base, &engine.model, Some(0));
    assert_eq!(off.next_wait_ns(base, &engine.model, Some(0)), base);
}
