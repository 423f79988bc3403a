//! The machine a policy runs against: the live kernel or the simulator.

use numapilot_observe::Sample;
use numapilot_topology::Topology;

use crate::action::{Action, Outcome};

/// Why a host could not produce a sample.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host's own data could not be read (e.g. /proc not mounted); the message names what.
    #[error("{0}")]
    Unavailable(String),
}

/// A machine that can be observed and acted on.
///
/// Implementations: the live kernel (observe + actuate) and `numapilot_sim::SimHost`. A policy only
/// ever sees this trait, so it runs unchanged on both.
pub trait Host {
    /// The machine's topology (fixed for the host's lifetime).
    fn topology(&self) -> &Topology;

    /// Host time, ns since an arbitrary origin (monotonic). Simulated time for the simulator.
    fn now_ns(&self) -> u64;

    /// One observation of every process, thread and node, in the observe crate's raw form.
    fn sample(&mut self) -> Result<Sample, HostError>;

    /// Applies one action. Never fails as a whole: a vanished target, a refusal or pages that could
    /// not move are reported in the [`Outcome`].
    fn apply(&mut self, action: &Action) -> Outcome;

    /// Takes back a sample its user is done with ([`crate::Engine::step`] gives it back right
    /// after the model's update). A host that keeps parts of its observation between samples
    /// (the live observer's carried processes) moves them into each sample and back here instead
    /// of copying them every cycle; a host that is not given the sample back must still produce
    /// correct samples (it reads again what it lent). Default: the sample is dropped.
    fn recycle(&mut self, sample: Sample) {
        drop(sample);
    }

    /// The step that sampled last is over (its plan applied): a host may note the moment, e.g. the
    /// live host reads /proc/stat here so the next sample's CPU load leaves the step itself out
    /// (`Sample::cpu_base`). Default: nothing.
    fn step_done(&mut self) {}

    /// The page moves that ended since the last call, each with the action that started it
    /// ([`Outcome::Started`]) and what became of it. Default: none (a host that moves pages
    /// synchronously reports them in [`Host::apply`]'s outcome).
    fn finished_moves(&mut self) -> Vec<FinishedMove> {
        Vec::new()
    }

    /// The access sampler's period for the coming wait, as a multiple of its base period
    /// ([`crate::cadence::sampling_stretch`]: the wait over the policy's interval, 1 when not
    /// backed off), so a step after a long wait sees about as many samples as one after an
    /// interval and the sampling costs less while nothing changes. Default: nothing (a host
    /// without an access sampler).
    fn set_sampling_stretch(&mut self, stretch: u32) {
        let _ = stretch;
    }

    /// The access sampler's period in force, as a multiple of its base period; `None` when the
    /// host samples no accesses (the default).
    fn sampling_stretch(&self) -> Option<u32> {
        None
    }

    /// A topology the host read again since the last call, because the machine changed under it
    /// (CPU hotplug: a node's CPUs went offline or came back), for the engine to adopt before it
    /// updates the model with the sample just taken ([`crate::Engine::step`] asks right after
    /// [`Host::sample`]; `topology()` returns the new one from then on). Default: none (a machine
    /// that never changes).
    fn take_topology_change(&mut self) -> Option<Topology> {
        None
    }
}

/// A page move that ran in the background ([`Outcome::Started`]) and ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FinishedMove {
    /// The action that started it.
    pub action: Action,
    /// What became of it: `Applied`, `Partial`, `Vanished` or `Refused`, as a synchronous move's.
    pub outcome: Outcome,
    /// Host time it was handed to the mover and when it ended, ns.
    pub started_ns: u64,
    /// See `started_ns`.
    pub ended_ns: u64,
    /// CPUs the host ran the copy on, when it chose them (the live daemon: the destination
    /// nodes' CPUs); `None`: wherever its mover ran.
    #[serde(default)]
    pub ran_on: Option<numapilot_topology::CpuSet>,
    /// Most threads the host split the copy over (the live daemon's split-copy); 0: not known or
    /// nothing was copied.
    #[serde(default)]
    pub threads: usize,
}
