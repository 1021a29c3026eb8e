//! The synthetic cluster holds what it was asked for, laid out as Longhorn would.

use super::*;
use crate::cluster::LONGHORN_NAMESPACE;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn sizes_out_of_range_are_errors() {
    assert_eq!(Synthetic::new(2, 10), Err(SyntheticError::Nodes(2)));
    assert_eq!(Synthetic::new(MAX_NODES + 1, 10), Err(SyntheticError::Nodes(MAX_NODES + 1)));
    assert_eq!(Synthetic::new(3, 0), Err(SyntheticError::Volumes(0)));
    assert!(Synthetic::new(3, 1).is_ok());
}

#[test]
fn counts_match_what_is_generated() {
    let s = Synthetic::new(7, 101).unwrap();
    for g in Group::ALL {
        assert_eq!(s.objects(g).count(), s.count(g), "{g:?}");
    }
    assert_eq!(s.count(Group::Replica), 303);
}

#[test]
fn replicas_of_a_volume_are_on_distinct_nodes_and_no_engine_on_the_storage_node() {
    for nodes in [3, 4, 10, 13, 30] {
        let s = Synthetic::new(nodes, 200).unwrap();
        for v in 0..200 {
            let on: BTreeSet<usize> = (0..REPLICAS).map(|r| s.replica_node(v, r)).collect();
            assert_eq!(on.len(), REPLICAS, "nodes={nodes} v={v}");
            assert_ne!(s.attached_node(v), s.storage_node());
        }
    }
}

#[test]
fn the_first_node_runs_exactly_the_engines_asked_for() {
    for (nodes, volumes, first) in [(60, 3_000, 50), (30, 10_000, 300), (3, 10, 4), (4, 9, 9), (5, 20, 0)] {
        let s = Synthetic::new(nodes, volumes).unwrap().with_first_node_engines(first).unwrap();
        let mut by_im: BTreeMap<String, usize> = BTreeMap::new();
        for e in s.objects(Group::Engine) {
            *by_im.entry(e["status"]["instanceManagerName"].as_str().unwrap().to_string()).or_default() += 1;
        }
        let listed: Vec<usize> = s
            .objects(Group::InstanceManager)
            .map(|im| im["status"]["instanceEngines"].as_object().unwrap().len())
            .collect();
        assert_eq!(listed[0], first, "{nodes} x {volumes}");
        assert_eq!(listed[nodes - 1], 0, "the storage node runs no engine");
        assert_eq!(listed.iter().sum::<usize>(), volumes);
        for (n, count) in listed.iter().enumerate() {
            let name = Synthetic::instance_manager_name(n);
            assert_eq!(by_im.get(&name).copied().unwrap_or(0), *count, "{name}");
        }
    }
    assert_eq!(
        Synthetic::new(5, 20).unwrap().with_first_node_engines(21),
        Err(SyntheticError::FirstNodeEngines { engines: 21, volumes: 20 })
    );
}

/// The instance managers' instance maps, the replicas' nodes and the engines' replica maps
/// all describe the same placement.
#[test]
fn instance_managers_list_exactly_the_instances_on_their_node() {
    let s = Synthetic::new(10, 1_000).unwrap();
    let mut replicas_by_im: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rep in s.objects(Group::Replica) {
        let im = rep["status"]["instanceManagerName"].as_str().unwrap().to_string();
        let node = rep["spec"]["nodeID"].as_str().unwrap();
        let n: usize = node.trim_start_matches("scale-node-").parse().unwrap();
        assert_eq!(im, Synthetic::instance_manager_name(n));
        replicas_by_im.entry(im).or_default().insert(rep["metadata"]["name"].as_str().unwrap().to_string());
    }
    let mut engines_by_im: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in s.objects(Group::Engine) {
        let im = e["status"]["instanceManagerName"].as_str().unwrap().to_string();
        engines_by_im.entry(im).or_default().insert(e["metadata"]["name"].as_str().unwrap().to_string());
    }
    let mut total = 0;
    for (n, im) in s.objects(Group::InstanceManager).enumerate() {
        let name = im["metadata"]["name"].as_str().unwrap();
        let engines: BTreeSet<String> =
            im["status"]["instanceEngines"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(engines, engines_by_im.get(name).cloned().unwrap_or_default(), "{name}");
        assert_eq!(engines.is_empty(), n == s.storage_node(), "{name}");
        let listed: BTreeSet<String> =
            im["status"]["instanceReplicas"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(Some(&listed), replicas_by_im.get(im["metadata"]["name"].as_str().unwrap()));
        assert_eq!(listed.len(), s.replicas_on_node(n));
        assert_eq!(listed.len(), 300, "1,000 volumes x 3 replicas over 10 nodes");
        total += im["status"]["instanceEngines"].as_object().unwrap().len();
    }
    assert_eq!(total, 1_000, "one engine per volume");
    for e in s.objects(Group::Engine) {
        let modes = e["status"]["replicaModeMap"].as_object().unwrap();
        assert_eq!(modes.len(), REPLICAS);
        assert!(modes.values().all(|m| m == "RW"));
    }
}

#[test]
fn every_object_carries_the_label_and_longhorn_objects_the_namespace() {
    let s = Synthetic::new(3, 5).unwrap();
    let list = s.list();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), Group::ALL.iter().map(|g| s.count(*g)).sum::<usize>());
    for item in items {
        assert_eq!(item["metadata"]["labels"][LABEL], "true", "{item}");
        let group = Group::ALL.iter().find(|g| {
            let r = g.resource();
            let api_version =
                if r.group.is_empty() { r.version.to_string() } else { format!("{}/{}", r.group, r.version) };
            item["apiVersion"] == api_version.as_str() && item["kind"] == r.kind
        });
        let namespaced = group.expect("every item is of a known group").resource().namespaced;
        assert_eq!(item["metadata"]["namespace"].as_str() == Some(LONGHORN_NAMESPACE), namespaced);
    }
}
