//! The API objects of a [`Synthetic`] cluster, one [`Group`] at a time, each as
//! `kubectl get -o json` prints it, `status` included; where each one sits and what it is
//! called is the layout's ([`super`]).

use serde_json::{json, Map, Value};

use super::{Group, Synthetic, LABEL, REPLICAS};
use crate::cluster::{LONGHORN_API_VERSION, LONGHORN_NAMESPACE};

const ENGINE_IMAGE: &str = "longhornio/longhorn-engine:v1.12.1";
const IM_IMAGE: &str = "longhornio/longhorn-instance-manager:v1.12.1";
const DISK: &str = "default-disk-5ca1e000";
const VOLUME_SIZE: &str = "1073741824";

impl Synthetic {
    /// How many objects [`Synthetic::objects`] yields for `group`.
    pub fn count(&self, group: Group) -> usize {
        match group {
            Group::StorageClass => 1,
            Group::Setting => SETTINGS.len(),
            Group::Node | Group::LonghornNode | Group::InstanceManager | Group::InstanceManagerPod => {
                self.nodes
            }
            Group::Volume | Group::Engine => self.volumes,
            Group::Replica => self.volumes * REPLICAS,
        }
    }

    /// Every object of `group`, with its `status` (a creator strips it and writes it through
    /// the status subresource).
    pub fn objects(&self, group: Group) -> Box<dyn Iterator<Item = Value> + '_> {
        match group {
            Group::StorageClass => Box::new(std::iter::once(self.storage_class())),
            Group::Setting => Box::new(SETTINGS.iter().map(|(name, value)| self.setting(name, value))),
            Group::Node => Box::new((0..self.nodes).map(|n| self.node(n))),
            Group::LonghornNode => Box::new((0..self.nodes).map(|n| self.longhorn_node(n))),
            Group::InstanceManager => Box::new((0..self.nodes).map(|n| self.instance_manager(n))),
            Group::InstanceManagerPod => Box::new((0..self.nodes).map(|n| self.instance_manager_pod(n))),
            Group::Volume => Box::new((0..self.volumes).map(|v| self.volume(v))),
            Group::Engine => Box::new((0..self.volumes).map(|v| self.engine(v))),
            Group::Replica => {
                Box::new((0..self.volumes).flat_map(move |v| (0..REPLICAS).map(move |r| self.replica(v, r))))
            }
        }
    }

    /// The whole cluster as one `kind: List`, the snapshot format of `serve --state`.
    pub fn list(&self) -> Value {
        let items: Vec<Value> = Group::ALL.iter().flat_map(|g| self.objects(*g)).collect();
        json!({"apiVersion": "v1", "kind": "List", "items": items})
    }

    /// `metadata` of a synthetic object: its name, the `extra` labels and [`LABEL`]`=true`, in
    /// Longhorn's namespace when `namespaced`.
    pub(super) fn meta(name: &str, namespaced: bool, extra: &[(&str, String)]) -> Value {
        let mut labels = Map::new();
        for (k, v) in extra {
            labels.insert((*k).to_string(), Value::String(v.clone()));
        }
        labels.insert(LABEL.to_string(), json!("true"));
        let mut meta = json!({"name": name, "labels": labels});
        if namespaced {
            meta["namespace"] = json!(LONGHORN_NAMESPACE);
        }
        meta
    }

    /// A condition of that type and status, changed at [`Synthetic::timestamp`].
    pub(super) fn condition(&self, type_: &str, status: &str) -> Value {
        json!({"type": type_, "status": status, "reason": "", "message": "",
               "lastProbeTime": "", "lastTransitionTime": self.timestamp})
    }

    fn storage_class(&self) -> Value {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": Self::meta(LABEL, false, &[]), "provisioner": "driver.longhorn.io",
               "allowVolumeExpansion": true, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
               "parameters": {"numberOfReplicas": "3", "staleReplicaTimeout": "30", "dataEngine": "v1"}})
    }

    fn setting(&self, name: &str, value: &str) -> Value {
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Setting",
               "metadata": Self::meta(name, true, &[]), "value": value, "status": {"applied": true}})
    }

    fn node(&self, n: usize) -> Value {
        let name = Self::node_name(n);
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": Self::meta(&name, false, &[("kubernetes.io/hostname", name.clone()), ("kubernetes.io/os", "linux".into())]),
               "spec": {},
               "status": {"addresses": [{"type": "InternalIP", "address": Self::ip(n)}, {"type": "Hostname", "address": name}],
                          "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                          "message": "kubelet is posting ready status",
                                          "lastHeartbeatTime": self.timestamp, "lastTransitionTime": self.timestamp}]}})
    }

    fn longhorn_node(&self, n: usize) -> Value {
        let name = Self::node_name(n);
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Node",
               "metadata": Self::meta(&name, true, &[]),
               "spec": {"name": name, "allowScheduling": true, "evictionRequested": false, "tags": [],
                        "disks": {DISK: {"allowScheduling": true, "evictionRequested": false, "diskType": "filesystem",
                                         "path": "/var/lib/longhorn/", "storageReserved": 0, "tags": []}}},
               "status": {"autoEvicting": false, "region": "", "zone": "",
                          "conditions": [self.condition("Ready", "True"), self.condition("Schedulable", "True")],
                          "diskStatus": {DISK: {"diskName": DISK, "diskPath": "/var/lib/longhorn/", "diskType": "filesystem",
                                                "diskUUID": Self::disk_uuid(n),
                                                "instanceManagerName": Self::instance_manager_name(n),
                                                "conditions": [self.condition("Ready", "True"), self.condition("Schedulable", "True")]}}}})
    }

    fn instance(name: &str, kind: &str, port: u32) -> Value {
        json!({"spec": {"name": name, "dataEngine": "v1"},
               "status": {"state": "running", "type": kind, "errorMsg": "", "listen": "", "endpoint": "",
                          "portStart": port, "portEnd": port, "resourceVersion": 0}})
    }

    fn instance_manager(&self, n: usize) -> Value {
        let name = Self::instance_manager_name(n);
        let mut engines = Map::new();
        for v in self.attached_on(n) {
            engines.insert(Self::engine_name(v), Self::instance(&Self::engine_name(v), "engine", 0));
        }
        let mut replicas = Map::new();
        for r in 0..REPLICAS {
            for v in self.volumes_with(n, r) {
                let name = Self::replica_name(v, r);
                replicas.insert(name.clone(), Self::instance(&name, "replica", 0));
            }
        }
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "InstanceManager",
               "metadata": Self::meta(&name, true, &Self::im_labels(n)),
               "spec": {"nodeID": Self::node_name(n), "type": "aio", "dataEngine": "v1", "image": IM_IMAGE},
               "status": {"currentState": "running", "ownerID": Self::node_name(n), "ip": Self::ip(n),
                          "apiMinVersion": 1, "apiVersion": 6, "proxyApiMinVersion": 1, "proxyApiVersion": 6,
                          "instanceEngines": engines, "instanceReplicas": replicas}})
    }

    fn im_labels(n: usize) -> [(&'static str, String); 5] {
        [
            ("longhorn.io/component", "instance-manager".into()),
            ("longhorn.io/data-engine", "v1".into()),
            ("longhorn.io/instance-manager-type", "aio".into()),
            ("longhorn.io/managed-by", "longhorn-manager".into()),
            ("longhorn.io/node", Self::node_name(n)),
        ]
    }

    fn instance_manager_pod(&self, n: usize) -> Value {
        let name = Self::instance_manager_name(n);
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": Self::meta(&name, true, &Self::im_labels(n)),
               "spec": {"nodeName": Self::node_name(n), "restartPolicy": "Never", "automountServiceAccountToken": false,
                        "containers": [{"name": "instance-manager", "image": IM_IMAGE,
                                        "args": ["instance-manager", "--debug", "daemon", "--listen", ":8500"]}]},
               "status": {"phase": "Running", "podIP": Self::ip(n), "hostIP": Self::ip(n), "startTime": self.timestamp,
                          "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": self.timestamp}],
                          "containerStatuses": [{"name": "instance-manager", "image": IM_IMAGE, "imageID": "",
                                                 "ready": true, "started": true, "restartCount": 0,
                                                 "state": {"running": {"startedAt": self.timestamp}}}]}})
    }

    fn volume(&self, v: usize) -> Value {
        let name = Self::volume_name(v);
        let node = Self::node_name(self.attached_node(v));
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Volume",
               "metadata": Self::meta(&name, true, &[("longhornvolume", name.clone())]),
               "spec": {"numberOfReplicas": REPLICAS, "size": VOLUME_SIZE, "frontend": "blockdev", "dataEngine": "v1",
                        "accessMode": "rwo", "dataLocality": "disabled", "image": ENGINE_IMAGE, "nodeID": node,
                        "staleReplicaTimeout": 30},
               "status": {"state": "attached", "robustness": "healthy", "currentNodeID": node, "ownerID": node,
                          "currentImage": ENGINE_IMAGE, "frontendDisabled": false,
                          "kubernetesStatus": {"namespace": "default", "pvName": name, "pvStatus": "Bound",
                                               "pvcName": format!("data-{name}")}}})
    }

    fn engine(&self, v: usize) -> Value {
        let name = Self::engine_name(v);
        let n = self.attached_node(v);
        let mut addresses = Map::new();
        let mut modes = Map::new();
        let mut times = Map::new();
        for r in 0..REPLICAS {
            let replica = Self::replica_name(v, r);
            addresses.insert(replica.clone(), json!(self.replica_address(v, r)));
            modes.insert(replica.clone(), json!("RW"));
            times.insert(replica, json!(self.healthy_since(v, r)));
        }
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Engine",
               "metadata": Self::meta(&name, true, &[("longhornvolume", Self::volume_name(v)), ("longhornnode", Self::node_name(n))]),
               "spec": {"volumeName": Self::volume_name(v), "volumeSize": VOLUME_SIZE, "nodeID": Self::node_name(n),
                        "active": true, "desireState": "running", "dataEngine": "v1", "frontend": "blockdev",
                        "image": ENGINE_IMAGE, "replicaAddressMap": addresses.clone()},
               "status": {"currentState": "running", "started": true, "instanceManagerName": Self::instance_manager_name(n),
                          "ownerID": Self::node_name(n), "ip": Self::ip(n), "storageIP": Self::ip(n), "port": 10_000,
                          "currentImage": ENGINE_IMAGE, "endpoint": format!("/dev/longhorn/{}", Self::volume_name(v)),
                          "currentReplicaAddressMap": addresses, "replicaModeMap": modes,
                          "replicaTransitionTimeMap": times, "rebuildStatus": {}}})
    }

    fn replica(&self, v: usize, r: usize) -> Value {
        let name = Self::replica_name(v, r);
        let n = self.replica_node(v, r);
        let address = self.replica_address(v, r);
        let port: u64 = address.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(10_000);
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Replica",
               "metadata": Self::meta(&name, true, &[("longhornvolume", Self::volume_name(v)), ("longhornnode", Self::node_name(n)),
                                                     ("longhorndiskuuid", Self::disk_uuid(n))]),
               "spec": {"volumeName": Self::volume_name(v), "volumeSize": VOLUME_SIZE, "nodeID": Self::node_name(n),
                        "engineName": Self::engine_name(v), "active": true, "desireState": "running", "dataEngine": "v1",
                        "image": ENGINE_IMAGE, "diskID": Self::disk_uuid(n), "diskPath": "/var/lib/longhorn/",
                        "dataDirectoryName": format!("{}-{r:08x}", Self::volume_name(v)),
                        "healthyAt": self.healthy_since(v, r), "lastHealthyAt": self.healthy_since(v, r), "failedAt": "", "lastFailedAt": "",
                        "evictionRequested": false, "hardNodeAffinity": ""},
               "status": {"currentState": "running", "started": true, "instanceManagerName": Self::instance_manager_name(n),
                          "ownerID": Self::node_name(n), "ip": Self::ip(n), "storageIP": Self::ip(n), "port": port,
                          "currentImage": ENGINE_IMAGE}})
    }
}

const SETTINGS: [(&str, &str); 4] = [
    ("default-replica-count", r#"{"v1":"3","v2":"3"}"#),
    ("node-drain-policy", "block-if-contains-last-replica"),
    ("storage-network", ""),
    ("default-instance-manager-image", IM_IMAGE),
];
