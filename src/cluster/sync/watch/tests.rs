//! What the watch loop does to the view: relists, unreadable objects, failed watches, ages.

use super::*;
use crate::cluster::model::Name;
use crate::cluster::store::{ClusterView, Source};
use serde_json::json;

fn replica(name: &str, node: &str) -> Object {
    Object::from_value(
        ObjectKind::Replica,
        json!({"metadata": {"name": name, "namespace": "longhorn-system"},
               "spec": {"nodeID": node, "volumeName": "v"}}),
    )
    .unwrap()
}

/// A watch view whose every kind was listed, empty, at `at`.
pub(crate) fn synced(at: SystemTime) -> ClusterView {
    let mut v = ClusterView::new(Source::Watch);
    for kind in ObjectKind::ALL {
        v.replace_kind(kind, Vec::new(), at);
    }
    v.mark_synced();
    v
}

#[test]
fn a_relist_replaces_the_kind_and_keeps_indexes_consistent() {
    let now = SystemTime::now();
    let mut v = ClusterView::new(Source::Watch);
    v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1"), replica("r2", "n2")], now);
    assert_eq!(v.replicas_on_node("n1").count(), 1);
    v.replace_kind(ObjectKind::Replica, vec![replica("r2", "n1"), replica("r3", "n3")], now);
    assert!(v.replica("r1").is_none());
    assert_eq!(
        v.replicas_on_node("n1").map(|r| r.metadata.name.clone().unwrap()).collect::<Vec<Name>>(),
        ["r2"]
    );
    assert_eq!(v.replicas_on_node("n2").count(), 0);
    assert_eq!(v.replicas_of_volume("v").count(), 2);
    assert!(!v.freshness().synced);
}

#[test]
fn a_relist_buffers_only_what_changed_and_ends_as_a_full_replace() {
    let now = SystemTime::now();
    let mut v = ClusterView::new(Source::Watch);
    v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1"), replica("r2", "n2")], now);
    let mut relist = Relist::default();
    for o in [replica("r2", "n2"), replica("r3", "n1"), replica("r4", "n4")] {
        relist.push(&v, o);
    }
    relist.push(&v, replica("r3", "n3"));
    assert_eq!(relist.keep.len(), 3);
    let changed: Vec<&str> = relist.changed.iter().map(Object::name).collect();
    assert_eq!(changed, ["r3", "r4", "r3"]);
    v.apply_relist(ObjectKind::Replica, relist, now, Instant::now());
    let mut want = ClusterView::new(Source::Watch);
    want.replace_kind(
        ObjectKind::Replica,
        vec![replica("r2", "n2"), replica("r3", "n3"), replica("r4", "n4")],
        now,
    );
    for name in ["r1", "r2", "r3", "r4"] {
        assert_eq!(v.replica(name), want.replica(name), "{name}");
    }
    for node in ["n1", "n2", "n3", "n4"] {
        assert_eq!(v.replica_count_on_node(node), want.replica_count_on_node(node), "{node}");
    }
    let mut changed_rv = replica("r2", "n2");
    changed_rv.metadata_mut().resource_version = Some("7".into());
    assert!(!v.holds(&changed_rv) && v.holds(&replica("r2", "n2")));
}

#[test]
fn a_relist_is_as_old_as_its_start_however_long_its_pages_took() {
    // Every page shows the state at the first one: a list that started 6 s ago and ends
    // now holds 6 s old data, and must not make the view fresh for a 5 s maxViewAge.
    let (now, mono) = (SystemTime::now(), Instant::now());
    let secs = Duration::from_secs;
    let mut v = ClusterView::new(Source::Watch);
    for kind in ObjectKind::ALL {
        // Listed 20 s ago (the replicas' watch then failed), the others current now.
        v.apply_relist(kind, Relist::default(), now - secs(20), mono - secs(20));
        if kind != ObjectKind::Replica {
            v.touch_kind_at(kind, now, mono);
        }
    }
    v.mark_synced();
    v.note_watch_failed(ObjectKind::Replica);
    v.apply_relist(ObjectKind::Replica, Relist::default(), now - secs(6), mono - secs(6));
    let f = v.freshness();
    assert!(f.failing.is_empty(), "{f:?}");
    assert!(!f.is_fresh(now, secs(5)), "{f:?}");
    assert!(f.age(now).is_some_and(|a| a >= secs(6)), "{f:?}");
    assert!(f.monotonic_age.is_some_and(|a| a >= secs(6)), "{f:?}");
    // The next event of the kind makes it current again.
    v.upsert(replica("r1", "n1"), now);
    assert!(v.freshness().is_fresh(now, secs(5)));
}

#[test]
fn unreadable_objects_make_the_view_untrusted_until_read_again() {
    let now = SystemTime::now();
    let mut v = synced(now);
    let bound = std::time::Duration::from_secs(5);
    assert!(v.freshness().is_fresh(now, bound));
    v.note_unreadable(ObjectKind::Replica, "r1");
    assert_eq!(v.freshness().unreadable, ["replicas.longhorn.io/r1"]);
    assert!(!v.freshness().is_fresh(now, bound));
    v.upsert(replica("r1", "n1"), now);
    assert!(v.freshness().is_fresh(now, bound));
    v.note_unreadable(ObjectKind::Replica, "r2");
    v.remove(ObjectKind::Replica, Some("longhorn-system"), "r2");
    assert!(v.freshness().is_fresh(now, bound));
}

#[test]
fn the_view_is_as_old_as_its_least_recently_updated_kind() {
    let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    let mut v = synced(t0);
    // Every kind but Replica keeps receiving events; the replica watch is broken.
    let later = t0 + std::time::Duration::from_secs(60);
    for kind in ObjectKind::ALL.into_iter().filter(|k| *k != ObjectKind::Replica) {
        v.touch_kind(kind, later);
    }
    assert_eq!(v.freshness().age(later), Some(std::time::Duration::from_secs(60)));
    assert!(!v.freshness().is_fresh(later, std::time::Duration::from_secs(5)));
    v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1")], later);
    assert!(v.freshness().is_fresh(later, std::time::Duration::from_secs(5)));
}

#[test]
fn a_failed_watch_makes_the_view_stale_until_its_kind_is_relisted() {
    let now = SystemTime::now();
    let bound = Duration::from_secs(5);
    let mut v = synced(now);
    assert!(v.freshness().is_fresh(now, bound));
    v.note_watch_failed(ObjectKind::Replica);
    v.note_watch_failed(ObjectKind::Node);
    let f = v.freshness();
    assert_eq!(f.failing, ["nodes", "replicas.longhorn.io"]);
    assert_eq!(f.age(now), Some(Duration::ZERO), "data just arrived, yet:");
    assert!(!f.is_fresh(now, bound));
    // Data through other paths (confirmation reads, snapshots) does not clear it.
    v.upsert(replica("r1", "n1"), now);
    v.touch(now);
    assert!(!v.freshness().is_fresh(now, bound));
    // Only a completed relist does.
    v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1")], now);
    assert_eq!(v.freshness().failing, ["nodes"]);
    v.replace_kind(ObjectKind::Node, Vec::new(), now);
    assert!(v.freshness().is_fresh(now, bound));
}

#[test]
fn a_kind_listed_early_in_the_first_sync_keeps_the_age_of_its_list() {
    // Nodes finish their list at t0 and hear nothing more; the other kinds finish 10 s
    // later, which completes the sync. The nodes' data is 10 s old, not new.
    let t0 = SystemTime::now() - Duration::from_secs(10);
    let synced_at = t0 + Duration::from_secs(10);
    let bound = Duration::from_secs(5);
    let mut v = ClusterView::new(Source::Watch);
    v.replace_kind(ObjectKind::Node, Vec::new(), t0);
    for kind in ObjectKind::ALL.into_iter().filter(|k| *k != ObjectKind::Node) {
        v.replace_kind(kind, Vec::new(), synced_at);
    }
    v.mark_synced();
    let f = v.freshness();
    assert!(f.synced);
    assert_eq!(f.age(synced_at), Some(Duration::from_secs(10)));
    assert!(!f.is_fresh(synced_at, bound));
    let current = v.current_kinds(synced_at, bound);
    assert!(!current.contains(&ObjectKind::Node), "{current:?}");
    assert_eq!(current.len(), ObjectKind::ALL.len() - 1, "{current:?}");
}
