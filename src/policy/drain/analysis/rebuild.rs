//! Rebuilds as the drain analysis sees them: progress, when one stalled, and whether the
//! replica came up without the storage network; times and durations as messages print them.

use std::time::{Duration, SystemTime};
use time::format_description::well_known::Rfc3339;

use crate::cluster::{ClusterView, Engine, Replica, Source};
use crate::policy::Policy;

use super::StalledRebuild;
use crate::cluster::readset::STORAGE_NETWORK_SETTING;

/// What a rebuild of one replica looks like.
#[derive(Clone, Debug)]
pub(super) struct Rebuild {
    pub(super) progress: i64,
    pub(super) stalled_since: Option<SystemTime>,
    /// The storage network is set but the replica's storage IP is its pod IP.
    pub(super) no_storage_network: bool,
}

/// True when `addr` (`ip:port`, without `tcp://`) is an address the engine uses for the
/// replica: its entry in the engine's address map, or the replica's storage IP or IP with its
/// port. Compared in place: nothing is written (it runs per replica on the denial path).
pub(super) fn is_replica_address(engine: &Engine, r: &Replica, addr: &str) -> bool {
    let mapped = r
        .metadata
        .name
        .as_deref()
        .and_then(|name| engine.status.current_replica_address_map.get(name))
        .is_some_and(|a| a.trim_start_matches("tcp://") == addr);
    mapped
        || (r.status.port > 0
            && addr.rsplit_once(':').is_some_and(|(host, port)| {
                // As `format!("{ip}:{port}")` writes it: decimal digits, no sign, no leading zero.
                let decimal = !port.is_empty()
                    && !port.starts_with('0')
                    && port.bytes().all(|b| b.is_ascii_digit())
                    && port.parse::<i64>() == Ok(r.status.port);
                decimal
                    && [&r.status.storage_ip, &r.status.ip]
                        .iter()
                        .any(|ip| !ip.is_empty() && ip.as_str() == host)
            }))
}

pub(super) fn parse_time(s: &str) -> Option<SystemTime> {
    time::OffsetDateTime::parse(s, &Rfc3339).ok().map(SystemTime::from)
}

/// How long before `now` a time was (zero when it is in the future).
pub(super) fn age(now: SystemTime, t: SystemTime) -> Duration {
    now.duration_since(t).unwrap_or(Duration::ZERO)
}

/// Formats a time as RFC 3339 UTC to the nearest second.
pub fn format_time(t: SystemTime) -> String {
    // Half a second up, then the fraction off: the nearest second (halves away from the past).
    let rounded = time::OffsetDateTime::from(t)
        .checked_add(time::Duration::milliseconds(500))
        .and_then(|t| t.replace_nanosecond(0).ok());
    rounded.and_then(|t| t.format(&Rfc3339).ok()).unwrap_or_else(|| "an unknown time".to_string())
}

/// Since when a rebuild has not progressed, if that is longer than `stall_after`.
/// Watch views date each progress value as they see it change; for progress 0 the time the
/// replica entered `WO` (the engine's `replicaTransitionTimeMap`) bounds it too, which is
/// all a snapshot has.
pub(super) fn stall_since(
    view: &ClusterView,
    engine: &Engine,
    address_key: &str,
    replica: Option<&str>,
    progress: i64,
    stall_after: Duration,
    now: SystemTime,
) -> Option<SystemTime> {
    let marks = view.derived::<super::super::RebuildMarks>().filter(|_| *view.source() == Source::Watch);
    let mark = marks.and_then(|m| m.get(engine.metadata.name.as_deref().unwrap_or(""), address_key));
    let seen = mark.filter(|m| m.progress == progress).map(|m| m.since);
    let in_wo = |name: &&str| engine.status.replica_mode_map.get(name).is_some_and(|m| m == "WO");
    let entered_wo = replica
        .filter(|_| progress == 0)
        .filter(in_wo)
        .and_then(|n| engine.status.replica_transition_time_map.get(n)?.time());
    seen.into_iter().chain(entered_wo).min().filter(|&s| age(now, s) > stall_after)
}

pub(super) fn rebuild_of(
    view: &ClusterView,
    engine: &Engine,
    r: &Replica,
    policy: &Policy,
    now: SystemTime,
) -> Option<Rebuild> {
    let (key, rs) =
        engine.status.rebuild_status.iter().find(|(k, rs)| {
            rs.is_rebuilding && is_replica_address(engine, r, k.trim_start_matches("tcp://"))
        })?;
    let stalled_since = stall_since(
        view,
        engine,
        key,
        r.metadata.name.as_deref(),
        rs.progress,
        policy.drain.stall_after,
        now,
    );
    let storage_net = view.setting(STORAGE_NETWORK_SETTING).is_some_and(|s| !s.trim().is_empty());
    let no_storage_network =
        storage_net && !r.status.storage_ip.is_empty() && r.status.storage_ip == r.status.ip;
    Some(Rebuild { progress: rs.progress, stalled_since, no_storage_network })
}

/// Every rebuild in the view stalled longer than `drain.stallAfter`, for the metric.
pub fn stalled_rebuilds(view: &ClusterView, policy: &Policy, now: SystemTime) -> Vec<StalledRebuild> {
    let mut out = Vec::new();
    for engine in view.engines_rebuilding() {
        let volume = engine.volume().unwrap_or("").to_string();
        for (key, rs) in &engine.status.rebuild_status {
            if !rs.is_rebuilding {
                continue;
            }
            let addr = key.trim_start_matches("tcp://");
            let replica = view
                .replicas_of_volume(&volume)
                .find(|r| is_replica_address(engine, r, addr))
                .and_then(|r| r.metadata.name.clone())
                .or_else(|| {
                    engine
                        .status
                        .current_replica_address_map
                        .iter()
                        .find(|(_, a)| a.trim_start_matches("tcp://") == addr)
                        .map(|(n, _)| n.clone())
                });
            if let Some(since) =
                stall_since(view, engine, key, replica.as_deref(), rs.progress, policy.drain.stall_after, now)
            {
                out.push(StalledRebuild {
                    volume: volume.clone(),
                    engine: engine.metadata.name.as_deref().unwrap_or_default().to_string(),
                    replica: replica.map(String::from),
                    progress: rs.progress,
                    since,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_addresses_match_as_the_engine_writes_them() {
        let engine: Engine = serde_json::from_value(serde_json::json!({"metadata": {"name": "v-e-0"},
            "status": {"currentReplicaAddressMap": {"v-r-1": "tcp://10.0.0.9:10000"}}}))
        .unwrap();
        let replica = |name: &str, ip: &str, storage_ip: &str, port: i64| -> Replica {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name},
                "status": {"ip": ip, "storageIP": storage_ip, "port": port}}))
            .unwrap()
        };
        let r1 = replica("v-r-1", "10.0.0.1", "", 0);
        assert!(is_replica_address(&engine, &r1, "10.0.0.9:10000"));
        assert!(!is_replica_address(&engine, &r1, "10.0.0.1:0"));
        let r2 = replica("v-r-2", "10.0.0.2", "192.168.0.2", 10010);
        for (addr, is) in [
            ("192.168.0.2:10010", true),
            ("10.0.0.2:10010", true),
            ("10.0.0.2:010010", false),
            ("10.0.0.2:+10010", false),
            ("10.0.0.2:10011", false),
            ("10.0.0.2:", false),
            ("10.0.0.2", false),
            ("10.0.0.9:10000", false),
        ] {
            assert_eq!(is_replica_address(&engine, &r2, addr), is, "{addr}");
        }
        let v6 = replica("v-r-3", "fd00::3", "", 10020);
        assert!(is_replica_address(&engine, &v6, "fd00::3:10020"));
        assert!(!is_replica_address(&engine, &replica("v-r-4", "", "", 10030), ":10030"));
    }

    #[test]
    fn times_parse_as_rfc3339_and_print_to_the_nearest_second() {
        let t = parse_time("2026-11-30T11:50:00Z").unwrap();
        assert_eq!(format_time(t), "2026-11-30T11:50:00Z");
        assert_eq!(parse_time("2026-11-30T12:50:00+01:00"), Some(t));
        assert_eq!(format_time(t + Duration::from_millis(499)), "2026-11-30T11:50:00Z");
        assert_eq!(format_time(t + Duration::from_millis(500)), "2026-11-30T11:50:01Z");
        assert_eq!(format_time(parse_time("2026-11-30T11:50:59.7Z").unwrap()), "2026-11-30T11:51:00Z");
        for bad in ["", "yesterday", "2026-11-30", "2026-13-30T11:50:00Z", "2026-11-30T11:50:00"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }
}
