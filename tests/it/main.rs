//! The integration tests, one binary: one module per area, one support tree (`support/`).
//! A test that needs its own process (process-wide environment, rlimits, a global
//! subscriber, process-wide counters read exactly) is a binary of its own, saying why in one
//! line: `tests/confirm_metrics.rs`.

mod support;

mod certs;
mod check_cluster;
mod check_cluster_live;
mod check_cluster_network;
mod check_drain;
mod confirm_bound;
mod confirm_cache;
mod confirm_deadline;
mod confirm_queue;
mod confirm_reads;
mod demo;
mod drain;
mod drain_confirm;
mod drain_deletes;
mod drain_doctor;
mod drain_index;
mod drain_plan;
mod drain_property;
mod drain_review;
mod drain_wait;
mod e2e_lib;
mod freshness_probes;
mod fuzz;
mod gate;
mod gate_api;
mod gate_policy;
mod gate_policy_literal;
mod init_gate;
mod layers;
mod lint;
mod longhorn_versions;
mod malformed_objects;
mod manifests;
mod message_property;
mod monitoring;
mod policy_env;
mod real_longhorn;
mod real_multus;
mod replicas;
mod review_cli;
mod serve_flags;
mod server;
mod server_load;
mod server_reliability;
mod server_shutdown;
mod server_watch;
mod streaming_lists;
mod synthetic;
mod unscheduled_pod;
mod upgrade_mixed;
mod upstream;
mod v2_server;
mod watch_faults;
mod watch_readiness;
mod why_not;
mod window_snapshots;
