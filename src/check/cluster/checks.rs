//! The checks, one function per identifier, grouped by what they read.

pub mod backups;
pub mod jobs;
pub mod network;
pub mod nodes;
pub mod versions;
pub mod volumes;

use std::time::SystemTime;

use super::finding::Finding;
use super::inventory::Inventory;
use crate::cluster::ClusterView;
use crate::policy::Policy;

/// Runs every check, in report order (after the objects that could not be read); also
/// returns the per-node drain counts.
pub fn run_all(
    inv: &Inventory,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> (Vec<Finding>, Vec<volumes::NodeReadiness>) {
    let mut out = inv.unreadable.findings();
    out.extend(nodes::node_conditions(inv));
    out.extend(nodes::disk_space(inv));
    out.extend(backups::backup_target(inv));
    out.extend(jobs::recurring_jobs(inv));
    out.extend(backups::snapshot_retention(inv));
    out.extend(volumes::replica_count(inv, view, policy, now));
    out.extend(volumes::volume_health(inv, view, policy, now));
    out.extend(volumes::settings(inv, policy));
    out.extend(network::storage_network(inv));
    let (drain, nodes) = volumes::drain_readiness(inv, view, policy);
    out.extend(drain);
    (out, nodes)
}
