//! Built-in machines: the machines of the published results and seed documents numapilot is measured
//! against, so the simulator and the policies can run on them by name.
//!
//! Each preset is a machine file under `machines/` at the repository root, compiled in with
//! `include_str!`: the file is the single source, so `numapilot topo --machine machines/X.toml` and
//! `--preset X` are the same machine, and each file's comments say where every figure comes from and
//! which figures are our assumptions.
//!
//! | name | machine |
//! |---|---|
//! | `autonuma-2s12c-24g` | 2 sockets x 6 cores, SMT2, 24 GB: kernel 3.7-rc3 autonuma-benchmark box |
//! | `autonuma-2s12c-16g` | 2 sockets x 6 cores, SMT2, 16 GB: the 2012 AutoNUMA box |
//! | `article-4n96` | 4 nodes, 96 CPUs, 10/11/20: the NUMA article seed's `numactl --hardware` |
//! | `ring-8n64c` | 8 nodes, 64 cores, 4 sockets in a ring: 10/11/21/32 |
//! | `epyc-2s256c` | 2 x 128-core EPYC 9755, NPS1, SMT2: 512 CPUs, 32 MB L3 per 8-core CCD |
//! | `numaconnect-288c` | 6 NumaConnect servers, 36 nodes, 288 cores: 10/16/22/160/200 |

use crate::error::TopologyError;
use crate::machine::{Format, MachineFile};
use crate::Topology;

/// (name, machine file text) of every preset.
const PRESETS: [(&str, &str); 6] = [
    ("autonuma-2s12c-24g", include_str!("../../../machines/autonuma-2s12c-24g.toml")),
    ("autonuma-2s12c-16g", include_str!("../../../machines/autonuma-2s12c-16g.toml")),
    ("article-4n96", include_str!("../../../machines/article-4n96.toml")),
    ("ring-8n64c", include_str!("../../../machines/ring-8n64c.toml")),
    ("epyc-2s256c", include_str!("../../../machines/epyc-2s256c.toml")),
    ("numaconnect-288c", include_str!("../../../machines/numaconnect-288c.toml")),
];

/// Names of the presets, in a stable order.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The machine file of a preset.
pub fn machine_file(name: &str) -> Result<MachineFile, TopologyError> {
    let text = PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| TopologyError::UnknownPreset { name: name.to_string(), valid: names().join(", ") })?;
    Ok(MachineFile::parse(text, Format::Toml, &format!("<preset {name}>"))?)
}

/// The topology of a preset.
pub fn topology(name: &str) -> Result<Topology, TopologyError> {
    let file = machine_file(name)?;
    file.build().map_err(|e| TopologyError::Machine(e.in_file(&format!("<preset {name}>"))))
}

/// `(name, description)` of every preset, for listings.
pub fn list() -> Vec<(&'static str, String)> {
    PRESETS
        .iter()
        .map(|(name, _)| {
            let description = machine_file(name).ok().and_then(|f| f.description).unwrap_or_default();
            (*name, description)
        })
        .collect()
}
