//! `check cluster`'s `storage-network` check over snapshot files (the quiet snapshot of
//! `tests/data/check-cluster/quiet.json` with the storage network set, the DaemonSets of
//! `tests/data/check-cluster/daemonsets.json` and instance-manager pods built from the shared
//! fixtures' pod and Multus annotations), and over the stand-in API server (DaemonSets refused).

use crate::support;

use std::time::SystemTime;

use longhorn_guard::check::cluster::{live, load_snapshot, Check, Finding, Report, Severity};
use longhorn_guard::cluster::client::READ_TIMEOUT;
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};
use support::apiserver::FakeApi;

const QUIET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/check-cluster/quiet.json");
const DAEMONSETS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/check-cluster/daemonsets.json");
const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/longhorn");
/// The network of the shared Multus fixtures.
const NET: &str = "harvester-system/storagenetwork-svrwv";
const NEW: &str = "k8s.v1.cni.cncf.io/network-status";
const LEGACY: &str = "k8s.v1.cni.cncf.io/networks-status";

fn read(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The `network-status` value Multus wrote on a pod attached to [`NET`].
fn good_status() -> String {
    read(&format!("{SHARED}/multus-network-status-good.json"))["rawAnnotationString"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The instance-manager pod of the shared fixture, on `node`, Running, with `annotations`
/// (the storage-network request is kept unless `annotations` sets it to null).
fn im_pod(node: &str, annotations: Value) -> Value {
    let mut pod = read(&format!("{SHARED}/instance-manager-pod-storage-network.json"));
    pod.as_object_mut().unwrap().remove("_comment");
    pod["metadata"]["name"] = json!(format!("instance-manager-{node}"));
    pod["metadata"]["labels"]["longhorn.io/node"] = json!(node);
    pod["spec"]["nodeName"] = json!(node);
    pod["status"] = json!({"phase": "Running", "podIP": "10.52.0.65"});
    let ann = pod["metadata"]["annotations"].as_object_mut().unwrap();
    for (k, v) in annotations.as_object().unwrap() {
        if v.is_null() {
            ann.remove(k);
        } else {
            ann.insert(k.clone(), v.clone());
        }
    }
    pod
}

fn daemonsets() -> Vec<Value> {
    read(DAEMONSETS)["items"].as_array().unwrap().clone()
}

fn set_image(items: &mut [Value], name: &str, image: &str) {
    let ds = items.iter_mut().find(|i| i["kind"] == "DaemonSet" && i["metadata"]["name"] == name).unwrap();
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
}

fn setting(name: &str, value: &str) -> Value {
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
           "metadata": {"name": name, "namespace": "longhorn-system"}, "value": value})
}

/// The quiet snapshot with `storage-network` set to `network` and `extra` items added.
fn quiet_items(network: &str, extra: Vec<Value>) -> Vec<Value> {
    let mut doc = read(QUIET);
    let items = doc["items"].as_array_mut().unwrap();
    for i in items.iter_mut() {
        if i["kind"] == "Setting" && i["metadata"]["name"] == "storage-network" {
            i["value"] = json!(network);
        }
    }
    items.extend(extra);
    items.clone()
}

fn report(items: Vec<Value>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    let doc = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let (inv, view) = load_snapshot(&path).unwrap();
    Report::build(&inv, &view, &Policy::default(), SystemTime::now())
}

/// `(severity, object, message, remedy)` of the storage-network findings.
fn network(r: &Report) -> Vec<(Severity, String, String, String)> {
    let of = |f: &Finding| (f.severity, f.object.clone(), f.message.clone(), f.remedy.clone());
    r.findings.iter().filter(|f| f.check == Check::StorageNetwork).map(of).collect()
}

fn finding(sev: Severity, object: &str, message: &str, remedy: &str) -> (Severity, String, String, String) {
    (sev, object.into(), message.into(), remedy.into())
}

#[test]
fn nothing_is_reported_while_the_storage_network_is_unset() {
    let mut extra = daemonsets();
    extra.push(im_pod("n1", json!({})));
    let r = report(quiet_items("", extra));
    assert_eq!(network(&r), vec![]);
    assert!(r.summary_line().ends_with(" (10 checks)"), "{}", r.summary_line());
    assert!(r.summary.checks.contains(&"storage-network"));
}

#[test]
fn multus_4_with_a_longhorn_that_reads_only_networks_status_is_an_error() {
    // Longhorn v1.5.1 from its setting (the manager image says v1.6.0: the setting wins).
    let mut extra = daemonsets();
    extra.push(setting("current-longhorn-version", "v1.5.1"));
    // As Multus v4 leaves it: only `network-status`.
    extra.push(im_pod("n1", json!({NEW: good_status()})));
    let r = report(quiet_items(NET, extra));
    assert_eq!(
        network(&r),
        vec![
            finding(
                Severity::Error,
                "daemonset/kube-system/kube-multus-ds",
                "Multus v4.0.2 (kube-system/kube-multus-ds) writes only k8s.v1.cni.cncf.io/network-status; Longhorn v1.5.1 (current-longhorn-version) reads only k8s.v1.cni.cncf.io/networks-status: every instance manager's storage IP is its pod IP, so harvester-system/storagenetwork-svrwv carries no replica traffic (longhorn/longhorn#6953)",
                "upgrade Longhorn to v1.5.2 or later; until then keep Multus below v4.0.0 (v3.x writes k8s.v1.cni.cncf.io/networks-status)",
            ),
            finding(
                Severity::Error,
                "pod/instance-manager-n1",
                "instance-manager-n1 on n1 has no IP on storage network harvester-system/storagenetwork-svrwv: harvester-system/storagenetwork-svrwv is listed only in k8s.v1.cni.cncf.io/network-status, which Longhorn v1.5.1 does not read; Longhorn uses its pod IP for the replicas and engines there, and rebuilds to and from n1 stall",
                "check Multus on n1, then drain n1 (or detach its volumes) and delete the pod: Longhorn recreates it with the network; the init gate (gate.enabled) keeps a new one from starting without it",
            ),
        ]
    );
    assert_eq!(r.exit_code(), 1);
    let table = r.table();
    assert!(table.contains("== storage-network\nerror    daemonset/kube-system/kube-multus-ds"), "{table}");
}

#[test]
fn a_fixed_longhorn_reads_network_status_and_each_pod_is_checked() {
    // Longhorn v1.6.0 from the longhorn-manager image; n1 attached, n2 as in
    // harvester/harvester#11639 (no status annotation at all), n3 not running yet (not checked).
    let broken =
        read(&format!("{SHARED}/multus-network-status-bad-11639.json"))["metadata"]["annotations"].clone();
    let mut pending = im_pod("n3", json!({}));
    pending["status"] = json!({"phase": "Pending"});
    let mut extra = daemonsets();
    extra.extend([im_pod("n1", json!({NEW: good_status()})), im_pod("n2", broken), pending]);
    let r = report(quiet_items(NET, extra));
    assert_eq!(
        network(&r),
        vec![
            finding(
                Severity::Info,
                "daemonset/kube-system/kube-multus-ds",
                "Multus v4.0.2 (kube-system/kube-multus-ds) writes only k8s.v1.cni.cncf.io/network-status; Longhorn v1.6.0 (image of longhorn-system/longhorn-manager) reads k8s.v1.cni.cncf.io/network-status (else k8s.v1.cni.cncf.io/networks-status)",
                "",
            ),
            finding(
                Severity::Error,
                "pod/instance-manager-n2",
                "instance-manager-n2 on n2 has no IP on storage network harvester-system/storagenetwork-svrwv: annotation k8s.v1.cni.cncf.io/network-status is absent (and legacy k8s.v1.cni.cncf.io/networks-status too): Multus has not attached this pod's networks; Longhorn uses its pod IP for the replicas and engines there, and rebuilds to and from n2 stall",
                "check Multus on n2, then drain n2 (or detach its volumes) and delete the pod: Longhorn recreates it with the network; the init gate (gate.enabled) keeps a new one from starting without it",
            ),
            finding(
                Severity::Info,
                "pods",
                "1 instance manager with an IP on harvester-system/storagenetwork-svrwv in k8s.v1.cni.cncf.io/network-status",
                "",
            ),
        ]
    );
}

#[test]
fn multus_3_writes_both_keys_and_an_old_longhorn_reads_the_legacy_one() {
    let mut extra = daemonsets();
    set_image(&mut extra, "kube-multus-ds", "ghcr.io/k8snetworkplumbingwg/multus-cni:v3.9.3");
    set_image(&mut extra, "longhorn-manager", "longhornio/longhorn-manager:v1.4.3");
    extra.push(im_pod("n1", json!({NEW: good_status(), LEGACY: good_status()})));
    // A pod created before the setting was: no request, only the cluster network listed.
    let default_only = r#"[{"name": "k8s-pod-network", "ips": ["10.52.2.10"], "default": true, "dns": {}}]"#;
    extra.push(im_pod(
        "n2",
        json!({"k8s.v1.cni.cncf.io/networks": null, NEW: default_only, LEGACY: default_only}),
    ));
    let r = report(quiet_items(NET, extra));
    assert_eq!(
        network(&r),
        vec![
            finding(
                Severity::Info,
                "daemonset/kube-system/kube-multus-ds",
                "Multus v3.9.3 (kube-system/kube-multus-ds) writes k8s.v1.cni.cncf.io/network-status and k8s.v1.cni.cncf.io/networks-status; Longhorn v1.4.3 (image of longhorn-system/longhorn-manager) reads only k8s.v1.cni.cncf.io/networks-status: Multus v4 writes only k8s.v1.cni.cncf.io/network-status",
                "upgrade Longhorn to v1.4.4 or later before Multus v4",
            ),
            finding(
                Severity::Error,
                "pod/instance-manager-n2",
                "instance-manager-n2 on n2 has no IP on storage network harvester-system/storagenetwork-svrwv (the pod does not ask for it: no k8s.v1.cni.cncf.io/networks annotation): network harvester-system/storagenetwork-svrwv is not listed in annotation k8s.v1.cni.cncf.io/networks-status (listed: k8s-pod-network); Longhorn uses its pod IP for the replicas and engines there, and rebuilds to and from n2 stall",
                "drain n2 (or detach its volumes): Longhorn recreates the instance manager with the storage network once none of its instances runs",
            ),
            finding(
                Severity::Info,
                "pods",
                "1 instance manager with an IP on harvester-system/storagenetwork-svrwv in k8s.v1.cni.cncf.io/networks-status",
                "",
            ),
        ]
    );
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn what_cannot_be_compared_is_said() {
    // No DaemonSets in the snapshot.
    let r = report(quiet_items(NET, vec![]));
    assert_eq!(
        network(&r),
        vec![finding(
            Severity::Info,
            "daemonsets",
            "the snapshot holds no DaemonSets: the Multus version is not checked",
            "add DaemonSets to the snapshot (kubectl get daemonsets -A; README: cluster snapshots)",
        )]
    );
    assert_eq!(r.exit_code(), 0);

    // DaemonSets, none of them Multus.
    let extra: Vec<Value> =
        daemonsets().into_iter().filter(|d| d["metadata"]["name"] != "kube-multus-ds").collect();
    assert_eq!(
        network(&report(quiet_items(NET, extra))),
        vec![finding(
            Severity::Warning,
            "daemonsets",
            "storage-network is set but none of the 2 DaemonSets runs Multus: instance managers get no storage-network interface",
            "install Multus (its DaemonSet runs on every node that runs Longhorn), or clear storage-network",
        )]
    );
    // The same DaemonSets, and an instance manager Multus attached: Multus is installed on the
    // nodes (as in make e2e-longhorn-multus), not absent.
    let mut extra: Vec<Value> =
        daemonsets().into_iter().filter(|d| d["metadata"]["name"] != "kube-multus-ds").collect();
    extra.push(im_pod("n1", json!({NEW: good_status()})));
    assert_eq!(
        network(&report(quiet_items(NET, extra))),
        vec![
            finding(
                Severity::Info,
                "daemonsets",
                &format!("none of the 2 DaemonSets runs Multus, yet 1 instance manager has an IP on {NET}: Multus runs outside a DaemonSet, so its version is not checked"),
                "",
            ),
            finding(Severity::Info, "pods", &format!("1 instance manager with an IP on {NET} in {NEW}"), ""),
        ]
    );

    // A Multus image without a version; then a versioned one with no Longhorn version anywhere.
    let mut extra = daemonsets();
    set_image(&mut extra, "kube-multus-ds", "ghcr.io/k8snetworkplumbingwg/multus-cni:snapshot-thick");
    assert_eq!(
        network(&report(quiet_items(NET, extra))),
        vec![finding(
            Severity::Info,
            "daemonset/kube-system/kube-multus-ds",
            "Multus image ghcr.io/k8snetworkplumbingwg/multus-cni:snapshot-thick names no version: not compared with Longhorn's",
            "",
        )]
    );
    let mut extra = daemonsets();
    set_image(&mut extra, "longhorn-manager", "longhornio/longhorn-manager:master-head");
    set_image(&mut extra, "kube-multus-ds", "rancher/hardened-multus-cni:v4.0.2-build20230811");
    assert_eq!(
        network(&report(quiet_items(NET, extra))),
        vec![finding(
            Severity::Info,
            "daemonset/kube-system/kube-multus-ds",
            "Multus v4.0.2 writes only k8s.v1.cni.cncf.io/network-status; Longhorn's version could not be read (no current-longhorn-version setting, no longhorn-manager image with a version): not compared",
            "",
        )]
    );
}

#[test]
fn a_daemonset_that_cannot_be_read_is_an_error_of_this_check() {
    let mut extra = daemonsets();
    extra[0]["spec"]["template"]["spec"]["containers"] = json!("kube-multus");
    let r = report(quiet_items(NET, extra));
    let f = r.findings.iter().find(|f| f.object == "daemonsets" && f.severity == Severity::Error).unwrap();
    assert_eq!(f.check, Check::StorageNetwork);
    assert_eq!(
        f.message,
        "1 DaemonSet could not be read and was left out of this check: kube-multus-ds; kube-multus-ds: invalid type: string \"kube-multus\", expected a sequence"
    );
    assert!(f.remedy.contains("(kubectl get daemonsets -A kube-multus-ds -o yaml)"), "{}", f.remedy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_daemonsets_are_listed_cluster_wide_or_namespace_by_namespace_when_refused() {
    let mut extra = daemonsets();
    extra.push(setting("current-longhorn-version", "v1.5.0"));
    extra.push(im_pod("n1", json!({NEW: good_status()})));
    let items = quiet_items(NET, extra);

    // Readable: one paginated cluster-wide LIST.
    let fake = FakeApi::start(items.clone(), std::time::Duration::ZERO).await;
    let (inv, view) = live::read_within(&fake.client(), READ_TIMEOUT).await.unwrap();
    let r = Report::build(&inv, &view, &Policy::default(), SystemTime::now());
    let got = network(&r);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].0, got[0].1.as_str()), (Severity::Error, "daemonset/kube-system/kube-multus-ds"));
    assert!(got[1].2.contains("which Longhorn v1.5.0 does not read"), "{}", got[1].2);
    let lists: Vec<String> = fake.seen.requests().into_iter().filter(|q| q.contains("/daemonsets")).collect();
    assert_eq!(lists.len(), 1, "{lists:?}");
    assert!(lists[0].starts_with("/apis/apps/v1/daemonsets?") && lists[0].contains("limit=500"), "{lists:?}");

    // Refused cluster-wide and in kube-system (where Multus runs); longhorn-system is read.
    let fake = FakeApi::start_forbidding(
        items,
        &["/apis/apps/v1/daemonsets", "/apis/apps/v1/namespaces/kube-system/daemonsets"],
    )
    .await;
    let (inv, view) =
        live::read_within(&fake.client(), READ_TIMEOUT).await.expect("a refused DaemonSet read is not fatal");
    let r = Report::build(&inv, &view, &Policy::default(), SystemTime::now());
    let got = network(&r);
    assert_eq!(
        got[0],
        finding(
            Severity::Info,
            "daemonsets",
            "could not read DaemonSets (/apis/apps/v1/daemonsets: 403 the server does not allow this method on /apis/apps/v1/daemonsets; /apis/apps/v1/namespaces/kube-system/daemonsets: 403 the server does not allow this method on /apis/apps/v1/namespaces/kube-system/daemonsets); no Multus DaemonSet in longhorn-system, which could be read: the Multus version is not checked",
            "grant list on daemonsets.apps cluster-wide to whoever runs check cluster, or check the Multus image by hand: kubectl get daemonsets -A -o wide | grep multus",
        )
    );
    // The pods are still checked, as the Longhorn of the setting reads them.
    assert!(got[1].2.contains("which Longhorn v1.5.0 does not read"), "{}", got[1].2);
    assert_eq!(got.len(), 2, "{got:?}");
}
