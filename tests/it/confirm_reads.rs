//! What a confirmation reads, and when it reads more: the other nodes' instance managers come
//! as a Table of their printer columns (from Longhorn's CRD), the node's own replicas are not
//! read twice, objects without a node still come back, and every case where the Table cannot stand in (an API server
//! that cannot print one, old and new instance managers side by side, an instance manager on
//! the node without its `longhorn.io/node` label) reads the full list once more and decides as
//! a snapshot of the same state does. The stand-in API server runs on 127.0.0.1:0 over TLS.

use crate::support;

use std::time::{Duration, SystemTime};

use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use serde_json::Value;
use support::apiserver::FakeApi;
use support::generated::*;

const IMS: &str = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/instancemanagers";

fn three_replicas(volumes: usize) -> Vec<Value> {
    state(&Layout { volumes, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 })
}

/// Confirms `DRAINED` against a stand-in serving `items`; checks that the confirmed analysis is
/// the snapshot's, and returns the requests made.
async fn confirm_against(fake: &FakeApi, items: &[Value]) -> Vec<String> {
    let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
    let now = SystemTime::now();
    let policy = Policy::default();
    assert_eq!(
        analyze_node(&view, DRAINED, &policy, now),
        analyze_node(&snapshot_view(items), DRAINED, &policy, now)
    );
    fake.seen.requests()
}

fn instance_manager_reads(requests: &[String]) -> Vec<&str> {
    let mut reads: Vec<&str> = requests.iter().filter_map(|r| r.strip_prefix(IMS)).collect();
    reads.sort();
    reads
}

#[tokio::test]
async fn other_instance_managers_come_as_a_table_and_the_node_is_not_read_twice() {
    let items = three_replicas(20);
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let requests = confirm_against(&fake, &items).await;
    assert_eq!(requests.len(), confirm::request_count(1), "{requests:#?}");
    assert_eq!(
        instance_manager_reads(&requests),
        ["?includeObject=None", "?labelSelector=longhorn.io%2Fnode%3Dnode-3"],
        "{requests:#?}"
    );
    // The per-volume replica read leaves out what the by-node read returned; engines change
    // node as volumes attach, so theirs reads them all (the later read's copy is kept).
    for (kind, tail) in [("replicas", "),longhornnode%21%3Dnode-3"), ("engines", ")")] {
        let per_volume: Vec<&String> = requests
            .iter()
            .filter(|r| r.contains(&format!("/{kind}?labelSelector=longhornvolume")))
            .collect();
        assert_eq!(per_volume.len(), 1, "{requests:#?}");
        assert!(per_volume[0].ends_with(tail), "{}", per_volume[0]);
    }
    let volumes = requests.iter().find(|r| r.contains("/volumes?")).unwrap();
    assert!(volumes.ends_with(')'), "{volumes}");
    // node-3 has a Kubernetes Node: Longhorn nodes are not read.
    assert!(!requests
        .iter()
        .any(|r| r.starts_with("/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes")));
}

#[tokio::test]
async fn an_api_server_without_tables_gets_one_full_list_instead() {
    let items = three_replicas(20);
    let fake = FakeApi::start_without_tables(items.clone(), Duration::ZERO).await;
    let requests = confirm_against(&fake, &items).await;
    assert_eq!(requests.len(), confirm::request_count(1) + 1, "{requests:#?}");
    assert_eq!(
        instance_manager_reads(&requests),
        ["?", "?includeObject=None", "?labelSelector=longhorn.io%2Fnode%3Dnode-3"],
        "{requests:#?}"
    );
}

#[tokio::test]
async fn old_and_new_instance_managers_side_by_side_are_read_whole_for_their_images() {
    let items =
        upgrade(state(&Layout { volumes: 10, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 0 }));
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let requests = confirm_against(&fake, &items).await;
    assert_eq!(requests.len(), confirm::request_count(1) + 1, "{requests:#?}");
    assert!(instance_manager_reads(&requests).contains(&"?"), "{requests:#?}");
    // The image decided it: the confirmed drain is allowed, as the snapshot's is.
    let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
    assert!(!analyze_node(&view, DRAINED, &Policy::default(), SystemTime::now()).would_block());
}

#[tokio::test]
async fn a_table_that_is_one_page_of_a_longer_one_is_not_taken_for_the_whole() {
    // An upgrade on node-1 whose replicas still name the old instance manager, which stopped:
    // the snapshot blocks. The Table comes back as one page (a continue token) without the old
    // instance manager's row; taken whole, its absence would place node-1's replicas in the
    // new, running one and allow.
    let mut items =
        upgrade(state(&Layout { volumes: 3, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 0 }));
    let old = im_of(&items, "node-1");
    for r in items.iter_mut().filter(|o| o["kind"] == "Replica" && o["spec"]["nodeID"] == "node-1") {
        r["status"]["instanceManagerName"] = serde_json::json!(old);
    }
    let fake = FakeApi::start_mangled(items.clone(), |_path, query, body| {
        if query.contains("includeObject=None") {
            body["metadata"]["continue"] = serde_json::json!("page-2");
            // The old instance manager is the one stopped.
            let rows = body["rows"].as_array_mut().unwrap();
            rows.retain(|r| !r["cells"].as_array().unwrap().contains(&serde_json::json!("stopped")));
        }
    })
    .await;
    let requests = confirm_against(&fake, &items).await;
    assert!(instance_manager_reads(&requests).contains(&"?"), "{requests:#?}");
    let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
    assert!(analyze_node(&view, DRAINED, &Policy::default(), SystemTime::now()).would_block());
}

#[tokio::test]
async fn labels_that_disagree_with_the_spec_fail_the_confirmation() {
    // The reads find objects by Longhorn's labels; the analysis places them by spec. A replica
    // whose label says another node than its spec (a hand edit) shows the labels cannot be
    // trusted, so nothing is decided from them.
    for (label, value, want) in [
        ("longhornnode", "node-2", "is labelled longhornnode=node-2 but its spec.nodeID is node-1"),
        ("longhornvolume", "pvc-other", "is labelled longhornvolume=pvc-other but its spec.volumeName is"),
    ] {
        let mut items = three_replicas(4);
        let replica =
            items.iter_mut().find(|o| o["kind"] == "Replica" && o["spec"]["nodeID"] == "node-1").unwrap();
        replica["metadata"]["labels"][label] = serde_json::json!(value);
        // The volume label moved: the read of the node's volumes finds it only by the node read.
        if label == "longhornvolume" {
            replica["spec"]["nodeID"] = serde_json::json!(DRAINED);
            replica["metadata"]["labels"]["longhornnode"] = serde_json::json!(DRAINED);
        }
        let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
        let err = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap_err().to_string();
        assert!(err.starts_with("cannot rely on the labels of replicas"), "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[tokio::test]
async fn an_unlabelled_instance_manager_on_the_node_is_still_read_whole() {
    // node-3's instance manager lost its node label and reports an engine of a volume with no
    // replica or engine object on node-3: only its instance list puts that volume in the read.
    let mut items = three_replicas(4);
    let extra = "pvc-ffffffff-0000-4000-8000-00000000ffff";
    for im in items.iter_mut().filter(|o| o["kind"] == "InstanceManager" && o["spec"]["nodeID"] == DRAINED) {
        im["metadata"]["labels"].as_object_mut().unwrap().remove("longhorn.io/node");
        im["status"]["instanceEngines"][format!("{extra}-e-0")] =
            serde_json::json!({"spec": {"name": format!("{extra}-e-0")}, "status": {"state": "running"}});
    }
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let requests = confirm_against(&fake, &items).await;
    assert!(instance_manager_reads(&requests).contains(&"?"), "{requests:#?}");
    let volumes = requests.iter().find(|r| r.contains("/volumes?")).unwrap();
    assert!(volumes.contains(extra), "the unlabelled instance manager's engine was not followed: {volumes}");
    let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
    let analysis = analyze_node(&view, DRAINED, &Policy::default(), SystemTime::now());
    assert!(analysis.would_block(), "an engine no known volume owns blocks the drain");
}

#[tokio::test]
async fn a_node_without_a_kubernetes_node_reads_longhorn_nodes() {
    let items: Vec<Value> = three_replicas(4)
        .into_iter()
        .filter(|o| !(o["apiVersion"] == "v1" && o["kind"] == "Node" && o["metadata"]["name"] == DRAINED))
        .collect();
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let requests = confirm_against(&fake, &items).await;
    assert_eq!(requests.len(), confirm::request_count(1) + 1, "{requests:#?}");
    assert!(requests
        .iter()
        .any(|r| r.starts_with("/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes?")));
    let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
    assert!(view.longhorn_node(DRAINED).is_some());
}

#[tokio::test]
async fn expected_volumes_are_read_beside_the_node_and_a_short_expectation_is_topped_up() {
    let items = three_replicas(12);
    let all = longhorn_guard::policy::drain::volumes_on_node(&snapshot_view(&items), DRAINED);
    assert_eq!(all.len(), 12);
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let policy = Policy::default();
    let now = SystemTime::now();
    let want = analyze_node(&snapshot_view(&items), DRAINED, &policy, now);

    // Exact: the usual 10 requests.
    let view = confirm::read_node_state_expecting(&fake.client(), DRAINED, &all).await.unwrap();
    assert_eq!(analyze_node(&view, DRAINED, &policy, now), want);
    assert_eq!(fake.seen.requests().len(), confirm::request_count(1));

    // Short by three volumes (created since the cache saw the node): one more batch reads
    // exactly those three, and the decision still covers all twelve.
    let short: std::collections::BTreeSet<String> = all.iter().skip(3).cloned().collect();
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let view = confirm::read_node_state_expecting(&fake.client(), DRAINED, &short).await.unwrap();
    assert_eq!(analyze_node(&view, DRAINED, &policy, now), want);
    let requests = fake.seen.requests();
    assert_eq!(requests.len(), confirm::request_count(2), "{requests:#?}");
    let topped_up: Vec<&String> = requests.iter().filter(|r| r.contains("/volumes?")).collect();
    assert_eq!(topped_up.len(), 2);
    let missing: Vec<&String> = all.iter().take(3).collect();
    assert!(
        topped_up
            .iter()
            .any(|r| missing.iter().all(|v| r.contains(v.as_str())) && r.matches(',').count() == 2),
        "{topped_up:#?}"
    );

    // Long by a volume the cache still places on the node but whose replica there is gone:
    // read, and not looked at.
    let gone = all.iter().next().unwrap().clone();
    let moved: Vec<Value> = items
        .iter()
        .filter(|o| {
            !(o["kind"] == "Replica"
                && o["spec"]["volumeName"] == gone.as_str()
                && o["spec"]["nodeID"] == DRAINED)
        })
        .cloned()
        .collect();
    let fake = FakeApi::start(moved.clone(), Duration::ZERO).await;
    let view = confirm::read_node_state_expecting(&fake.client(), DRAINED, &all).await.unwrap();
    let analysis = analyze_node(&view, DRAINED, &policy, now);
    assert_eq!(analysis, analyze_node(&snapshot_view(&moved), DRAINED, &policy, now));
    assert_eq!(analysis.volumes.len(), 11);
    assert!(analysis.volumes.iter().all(|v| v.volume != gone));
    assert!(view.volume(&gone).is_some(), "{gone} was expected, so it was read");
    assert_eq!(fake.seen.requests().len(), confirm::request_count(1));
}

#[tokio::test]
async fn objects_without_a_node_come_back_through_the_per_volume_reads() {
    // Volume 0's engine has no node (detached: no `longhornnode` label) and it has a fourth
    // replica not yet scheduled (no node, no label): `longhornnode!=N` still selects them.
    let mut items = three_replicas(3);
    let vol = items.iter().find(|o| o["kind"] == "Volume").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let engine = format!("{vol}-e-0");
    for e in items.iter_mut().filter(|o| o["kind"] == "Engine" && o["metadata"]["name"] == engine.as_str()) {
        e["spec"]["nodeID"] = "".into();
        e["metadata"]["labels"].as_object_mut().unwrap().remove("longhornnode");
    }
    let mut unscheduled = items
        .iter()
        .find(|o| o["kind"] == "Replica" && o["spec"]["volumeName"] == vol.as_str())
        .unwrap()
        .clone();
    let replica = format!("{vol}-r-ffffffff");
    unscheduled["metadata"]["name"] = replica.clone().into();
    unscheduled["metadata"]["labels"].as_object_mut().unwrap().remove("longhornnode");
    unscheduled["spec"]["nodeID"] = "".into();
    unscheduled["spec"]["healthyAt"] = "".into();
    items.push(unscheduled);
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
    assert!(view.engine(&engine).is_some(), "the engine without a node was not read");
    assert!(view.replica(&replica).is_some(), "the unscheduled replica was not read");
    let now = SystemTime::now();
    let policy = Policy::default();
    assert_eq!(
        analyze_node(&view, DRAINED, &policy, now),
        analyze_node(&snapshot_view(&items), DRAINED, &policy, now)
    );
}

#[test]
fn a_real_api_servers_table_reads_as_the_stand_ins_does() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/confirm/instancemanagers-table.json");
    let body = std::fs::read_to_string(path).unwrap();
    let ims = confirm::summary::parse(&body).unwrap();
    assert_eq!(ims.len(), 30);
    for (i, im) in ims.iter().enumerate() {
        assert_eq!(im.spec.node_id, format!("scale-node-{i:03}"));
        assert_eq!((im.spec.type_.as_str(), im.spec.data_engine.as_str()), ("aio", "v1"));
        assert_eq!(im.status.current_state, "running");
        assert!(im.spec.image.is_empty() && im.status.instance_engines.is_empty());
    }
    assert!(!confirm::summary::needs_images(&ims));
    // The stand-in prints the same columns, in the same order, from the fixture CRD.
    let real: Value = serde_json::from_str(&body).unwrap();
    let items = three_replicas(1);
    let c = support::apiserver::collection(IMS).unwrap();
    let list = support::apiserver::list(&items, IMS, "").unwrap();
    let fake = support::apiserver::table(&c, &list).unwrap();
    let names = |t: &Value| -> Vec<Value> {
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].clone()).collect()
    };
    assert_eq!(names(&fake), names(&real));
}
