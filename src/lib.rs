//! longhorn-guard: a Kubernetes admission webhook that keeps Longhorn clusters from losing
//! replica redundancy during drains, deploys and instance-manager start-up.
//!
//! Decisions are pure functions of `(admission request, cluster view, policy, now)`:
//! [`policy::validate`] and [`mutate::mutate`]. The HTTPS [`server`], the offline [`review`],
//! [`lint`] and [`check`] commands and the tests all call them through the same code.

// One module calls into the C library (`heap`, which allows it); nothing else may.
#![deny(unsafe_code)]

pub mod admission;
pub mod admit;
pub mod certs;
pub mod check;
pub mod cli;
pub mod clip;
pub mod cluster;
pub mod decision;
pub mod duration;
pub mod exposition;
pub mod gate;
pub mod heap;
pub mod lint;
pub mod mutate;
pub mod output;
pub mod policy;
pub mod review;
pub mod server;
pub mod signal;
#[cfg(feature = "synthetic")]
pub mod synthetic;
pub mod tls;
pub mod yaml;
