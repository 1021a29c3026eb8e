//! The init gate: instance-manager pods that request the Multus storage network get an init
//! container that waits for it (see `longhorn-guard gate`).
//!
//! The patch only appends: one init container and one downward-API volume. It never touches
//! `containers[0]`, the `k8s.v1.cni.cncf.io/networks` annotation or anything else Longhorn
//! compares to decide whether to recreate the pod (docs/init-gate.md).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{json, Value};

use crate::admission::AdmissionRequest;
use crate::cluster::{COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE};
use crate::decision::Decision;
use crate::gate::networks::{format_networks, parse_networks, NETWORKS_ANNOTATION};
use crate::gate::DEFAULT_ANNOTATIONS_FILE;
use crate::policy::{Policy, RuleError};

use super::pod::{has_container, Pod, PodSpec};

/// Name of the injected init container; its presence makes the mutation a no-op.
pub const GATE_CONTAINER: &str = "longhorn-guard-gate";
/// Name of the injected downward-API volume.
pub const PODINFO_VOLUME: &str = "longhorn-guard-podinfo";
/// Where the injected volume is mounted (the annotations file is `annotations` inside it).
pub const PODINFO_DIR: &str = "/etc/longhorn-guard/podinfo";
/// The binary's path in the longhorn-guard image.
pub const GATE_BINARY: &str = "/usr/local/bin/longhorn-guard";
/// Where the kubelet mounts the service-account token.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Decides the patch for one Pod CREATE of `pod` (the request's object, read at dispatch). Pod
/// creation is never blocked: what cannot be patched is allowed with a warning.
pub fn mutate_pod(req: &AdmissionRequest, pod: &Pod, policy: &Policy) -> Decision {
    let meta = &pod.metadata;
    let namespace = match req.namespace() {
        "" => meta.namespace.as_deref().unwrap_or_default(),
        ns => ns,
    };
    if namespace != LONGHORN_NAMESPACE
        || meta.labels.get(COMPONENT_LABEL).map(String::as_str) != Some(INSTANCE_MANAGER_COMPONENT)
    {
        return Decision::allow();
    }
    let Some(annotation) = meta.annotations.get(NETWORKS_ANNOTATION) else {
        return Decision::allow();
    };
    let networks = match parse_networks(annotation, Some(namespace)) {
        Ok(n) if n.is_empty() => return Decision::allow(),
        Ok(n) => n,
        Err(e) => return skipped(&format!("{NETWORKS_ANNOTATION} is unreadable: {e}")),
    };
    let Some(spec) = &pod.spec else {
        return skipped("the pod has no spec object");
    };
    if spec.init_containers.as_deref().is_some_and(|list| has_container(list, GATE_CONTAINER)) {
        return Decision::allow();
    }
    // Container names are unique across the pod's lists: a second one would make the pod
    // invalid, and its creation fail.
    for (field, list) in
        [("containers", &spec.containers), ("ephemeralContainers", &spec.ephemeral_containers)]
    {
        if has_container(list, GATE_CONTAINER) {
            return skipped(&format!("spec.{field} already has a container named {GATE_CONTAINER}"));
        }
    }

    let container = gate_container(
        &GateText { image: &policy.gate.image, timeout: &crate::policy::show(policy.gate.timeout) },
        &format_networks(&networks),
        service_account_mount_name(spec),
    );
    let volume = podinfo_volume();

    let mut ops = vec![append(spec.init_containers.is_some(), "initContainers", container)];
    match spec.volumes.iter().flatten().find(|v| v.name == PODINFO_VOLUME) {
        None => ops.push(append(spec.volumes.is_some(), "volumes", volume)),
        // Ours from an earlier pass: the gate would read its annotations file from it.
        Some(existing)
            if existing.downward_api.as_ref().map(|d| &d["items"])
                == Some(&volume["downwardAPI"]["items"]) => {}
        Some(_) => {
            return skipped(&format!(
                "the pod already has a volume {PODINFO_VOLUME} that is not its downward-API annotations"
            ))
        }
    }
    Decision::patched(Patch(ops)).rule("init-gate")
}

/// A Pod CREATE whose object the gate cannot read (`why`: there is none, or it is no pod):
/// allowed with no patch and a warning naming what is wrong, and with `details.unreadable` set,
/// so that it is logged at WARN. The gate never blocks a pod.
pub fn unreadable(why: &RuleError) -> Decision {
    let mut d = match why {
        RuleError::Missing { .. } => skipped("the request has no pod object"),
        malformed => skipped(&malformed.to_string()),
    };
    d.details.unreadable = Some(why.to_string());
    d
}

/// Allowed with no patch, and the warning that no gate was added and why.
fn skipped(why: &str) -> Decision {
    Decision::allow().rule("init-gate").with_warning(format!("longhorn-guard: no init gate added: {why}"))
}

/// `add /spec/<field>/-` to an existing list, or `add /spec/<field>` with a new one-item list.
fn append(exists: bool, field: &str, item: Value) -> PatchOperation {
    let (path, value) = if exists {
        (PointerBuf::from_tokens(["spec", field, "-"]), item)
    } else {
        (PointerBuf::from_tokens(["spec", field]), Value::Array(vec![item]))
    };
    PatchOperation::Add(AddOperation { path, value })
}

/// The gate's settings as they appear in its container: the image and the `--timeout` text.
/// The webhook passes the policy's; the admission policy (`super::gate_policy`) passes names
/// it turns into its CEL variables.
#[derive(Clone, Copy, Debug)]
pub struct GateText<'a> {
    pub image: &'a str,
    pub timeout: &'a str,
}

/// The injected init container: the one definition both the webhook's patch and the
/// MutatingAdmissionPolicy are made of. `networks` is the `--networks` text; `sa_mount` names
/// the service-account token volume to mount (see [`service_account_mount_name`]).
pub fn gate_container(text: &GateText<'_>, networks: &str, sa_mount: Option<&str>) -> Value {
    let mut mounts = vec![json!({ "name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": true })];
    if let Some(name) = sa_mount {
        mounts.push(json!({ "name": name, "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": true }));
    }
    json!({
        "name": GATE_CONTAINER,
        "image": text.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [GATE_BINARY],
        "args": [
            "gate",
            "--networks", networks,
            "--timeout", text.timeout,
            "--annotations-file", DEFAULT_ANNOTATIONS_FILE,
        ],
        "env": [
            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.name" } } },
            { "name": "POD_NAMESPACE", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } } },
            { "name": "NO_COLOR", "value": "1" },
        ],
        // Requests equal to limits: Kubernetes counts init containers in the pod's QoS class,
        // and anything less would make a Guaranteed instance manager (v2 with
        // `data-engine-cpu-core-number`, pinned to exclusive cores) Burstable.
        "resources": {
            "requests": { "cpu": "100m", "memory": "64Mi" },
            "limits": { "cpu": "100m", "memory": "64Mi" },
        },
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "privileged": false,
            "capabilities": { "drop": ["ALL"] },
            "seccompProfile": { "type": "RuntimeDefault" },
        },
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    })
}

/// The injected downward-API volume of `metadata.annotations`.
pub fn podinfo_volume() -> Value {
    json!({
        "name": PODINFO_VOLUME,
        "downwardAPI": {
            "items": [{ "path": "annotations", "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.annotations" } }],
        },
    })
}

/// The name of the service-account token volume the ServiceAccount admission plugin mounted
/// into the pod's containers (it ran before the webhooks and admission policies, so the gate
/// does not get the mount by itself): the first named mount at [`SERVICE_ACCOUNT_DIR`] of the
/// first container that has one. Copied so the gate can GET its own pod; absent when
/// `automountServiceAccountToken` is false.
fn service_account_mount_name(spec: &PodSpec) -> Option<&str> {
    spec.containers.iter().find_map(|c| {
        c.volume_mounts
            .iter()
            .find(|m| m.mount_path == SERVICE_ACCOUNT_DIR && !m.name.is_empty())
            .map(|m| m.name.as_str())
    })
}
