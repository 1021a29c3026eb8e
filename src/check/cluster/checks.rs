//! The checks, one function per identifier, grouped by what they read.

pub mod backups;
pub mod jobs;
pub mod network;
pub mod nodes;
pub mod versions;
pub mod volumes;
