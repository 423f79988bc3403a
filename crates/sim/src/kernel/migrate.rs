//! Page migration and its cost: moving memory is never free.
//!
//! # Problem
//!
//! Every placement policy that moves memory (AutoNUMA's hinting-fault migrations, `migrate_pages`,
//! `move_pages` from a policy) pays for it: the kernel unmaps the pages, copies them (reading the
//! source node, writing the destination, crossing the links between), flushes TLBs and remaps.
//! The copy competes with the application for bandwidth, and whoever waits for it stalls.
//!
//! # Approach
//!
//! ```text
//!   migrate(region, to):  place it on `to` (refused if full: nothing changes)
//!                         pages_migrated += 512
//!                         cost: stall = 2 MiB / migrate_gbs + migrate_fixed_us   (0.1 ms by default)
//!                               traffic = 2 MiB on the source controller, every link of the
//!                               route source -> destination, and the destination controller
//! ```
//!
//! The engine charges the stall to the task that caused the migration (the faulting task for
//! AutoNUMA; the process's tasks, shared out, for a policy's `migrate_pages`) and adds the traffic
//! to the next epoch's resource loads, where it takes bandwidth from the application.
//!
//! # Limits
//!
//! No partial failure inside a region (a region moves whole or not at all); pages pinned by I/O are
//! not modelled (nothing is ever `EBUSY`).

use crate::kernel::{Kernel, NO_NODE, PAGES_PER_REGION, REGION_BYTES};
use crate::machine::MachineModel;

/// Why a region could not be migrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// The destination node has no free memory.
    #[error("destination node {0} is full")]
    Full(u32),
    /// The region is not allocated (nothing to move).
    #[error("region not resident")]
    NotResident,
}

/// The cost of one region migration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigrationCost {
    /// Time the waiting task stalls, ns.
    pub stall_ns: u64,
    /// Dense index of the source node.
    pub from: usize,
    /// Dense index of the destination node.
    pub to: usize,
    /// Bytes copied.
    pub bytes: u64,
}

impl MigrationCost {
    /// The resources of `model` the copy loads: the source controller and the links from source
    /// to destination (the route of data read on `from` for a CPU on `to`), then the destination
    /// controller.
    pub fn resources<'a>(&self, model: &'a MachineModel) -> impl Iterator<Item = usize> + 'a {
        model.route(self.from, self.to).iter().map(|&r| r as usize).chain(std::iter::once(self.to))
    }

    /// Adds the copy's traffic (bytes) to `traffic`, indexed by resource of `model`.
    pub fn charge(&self, model: &MachineModel, traffic: &mut [f64]) {
        let b = self.bytes as f64;
        for r in self.resources(model) {
            traffic[r] += b;
        }
    }
}

/// Migrates region `region` to node `to` (kernel id). A region already there costs nothing and
/// counts nothing.
pub fn migrate(
    k: &mut Kernel,
    model: &MachineModel,
    region: usize,
    to: u32,
) -> Result<Option<MigrationCost>, MigrateError> {
    let from = k.regions[region].node;
    if from == NO_NODE {
        return Err(MigrateError::NotResident);
    }
    if from == to {
        return Ok(None);
    }
    if !k.place(region, to) {
        return Err(MigrateError::Full(to));
    }
    k.pages_migrated += PAGES_PER_REGION;
    Ok(Some(MigrationCost {
        stall_ns: model.migrate_ns(REGION_BYTES),
        from: k.nidx(from),
        to: k.nidx(to),
        bytes: REGION_BYTES,
    }))
}
