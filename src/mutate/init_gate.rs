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
use crate::policy::{object, Policy, RuleError};

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

/// Decides the patch for one Pod CREATE.
pub fn mutate_pod(req: &AdmissionRequest, policy: &Policy) -> Result<Decision, RuleError> {
    if !policy.gate.enabled {
        return Ok(Decision::allow());
    }
    // Pod creation is never blocked: what cannot be patched is allowed with a warning.
    let skip = |why: &str| {
        Ok(Decision::allow()
            .rule("init-gate")
            .with_warning(format!("longhorn-guard: no init gate added: {why}")))
    };
    let Ok(pod) = object(req) else {
        return skip("the request has no pod object");
    };
    let meta = &pod["metadata"];
    let namespace = match req.namespace() {
        "" => meta["namespace"].as_str().unwrap_or_default(),
        ns => ns,
    };
    if namespace != LONGHORN_NAMESPACE
        || meta["labels"][COMPONENT_LABEL].as_str() != Some(INSTANCE_MANAGER_COMPONENT)
    {
        return Ok(Decision::allow());
    }
    let Some(annotation) = meta["annotations"][NETWORKS_ANNOTATION].as_str() else {
        return Ok(Decision::allow());
    };
    let networks = match parse_networks(annotation, Some(namespace)) {
        Ok(n) if n.is_empty() => return Ok(Decision::allow()),
        Ok(n) => n,
        Err(e) => return skip(&format!("{NETWORKS_ANNOTATION} is unreadable: {e}")),
    };
    let spec = &pod["spec"];
    if !spec.is_object() {
        return skip("the pod has no spec object");
    }
    let init = &spec["initContainers"];
    let volumes = &spec["volumes"];
    for (field, v) in [("spec.initContainers", init), ("spec.volumes", volumes)] {
        if !v.is_null() && !v.is_array() {
            return skip(&format!("{field} is not a list"));
        }
    }
    let has_named = |list: &Value, name: &str| {
        list.as_array().is_some_and(|items| items.iter().any(|c| c["name"].as_str() == Some(name)))
    };
    if has_named(init, GATE_CONTAINER) {
        return Ok(Decision::allow());
    }
    // Container names are unique across the pod's lists: a second one would make the pod
    // invalid, and its creation fail.
    if let Some(field) =
        ["containers", "ephemeralContainers"].into_iter().find(|f| has_named(&spec[*f], GATE_CONTAINER))
    {
        return skip(&format!("spec.{field} already has a container named {GATE_CONTAINER}"));
    }

    let container = gate_container(
        &GateText { image: &policy.gate.image, timeout: &crate::policy::show(policy.gate.timeout) },
        &format_networks(&networks),
        service_account_mount_name(spec),
    );
    let volume = podinfo_volume();

    let mut ops = vec![append(init, "initContainers", container)];
    match volumes.as_array().and_then(|list| list.iter().find(|v| v["name"].as_str() == Some(PODINFO_VOLUME)))
    {
        None => ops.push(append(volumes, "volumes", volume)),
        // Ours from an earlier pass: the gate would read its annotations file from it.
        Some(existing) if existing["downwardAPI"]["items"] == volume["downwardAPI"]["items"] => {}
        Some(_) => {
            return skip(&format!(
                "the pod already has a volume {PODINFO_VOLUME} that is not its downward-API annotations"
            ))
        }
    }
    Ok(Decision::patched(Patch(ops)).rule("init-gate"))
}

/// `add /spec/<field>/-` to an existing list, or `add /spec/<field>` with a new one-item list.
fn append(existing: &Value, field: &str, item: Value) -> PatchOperation {
    let (path, value) = if existing.is_array() {
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
/// does not get the mount by itself): the first mount at [`SERVICE_ACCOUNT_DIR`] of the first
/// container that has one. Copied so the gate can GET its own pod; absent when
/// `automountServiceAccountToken` is false.
fn service_account_mount_name(spec: &Value) -> Option<&str> {
    spec["containers"].as_array()?.iter().find_map(|c| {
        c["volumeMounts"].as_array()?.iter().find_map(|m| {
            (m["mountPath"].as_str() == Some(SERVICE_ACCOUNT_DIR)).then(|| m["name"].as_str()).flatten()
        })
    })
}
