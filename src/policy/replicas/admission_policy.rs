//! The replica-count rules that are pure functions of the object and the policy, as a
//! ValidatingAdmissionPolicy the API server evaluates itself (docs/replicas.md, "In the API
//! server"): exactly the findings the webhook denies under `replicas.action: deny`
//! ([`super::storage_class`], [`super::volume`]), with the minimums as a parameter ConfigMap.

use serde_json::{json, Value};

use super::LONGHORN_PROVISIONER;
use crate::policy::{Policy, ReplicaAction};

/// Name of the ValidatingAdmissionPolicy, its binding and its parameter ConfigMap.
pub const NAME: &str = "longhorn-guard-replicas";
/// The namespace of the parameter ConfigMap (longhorn-guard's own).
pub const PARAM_NAMESPACE: &str = "longhorn-guard";

/// The parameter ConfigMap's data: `minimum`, `storageClass.<name>` and `namespace.<ns>`.
pub fn params(policy: &Policy) -> Value {
    let r = &policy.replicas;
    let mut data = serde_json::Map::new();
    data.insert("minimum".into(), json!(r.minimum.to_string()));
    for (name, m) in &r.storage_class_minimums {
        data.insert(format!("storageClass.{name}"), json!(m.to_string()));
    }
    for (ns, m) in &r.namespace_minimums {
        data.insert(format!("namespace.{ns}"), json!(m.to_string()));
    }
    Value::Object(data)
}

/// The policy, its binding and its parameter ConfigMap. The binding denies under
/// `replicas.action: deny` and warns under `warn`.
pub fn render(policy: &Policy) -> [Value; 3] {
    let actions = match policy.replicas.action {
        ReplicaAction::Deny => "Deny",
        ReplicaAction::Warn => "Warn",
    };
    let variables = [
        ("storageClass", "request.resource.resource == \"storageclasses\"".to_string()),
        (
            "count",
            "variables.storageClass ?\n  (has(object.parameters) && \"numberOfReplicas\" in object.parameters ? object.parameters[\"numberOfReplicas\"] : \"\") :\n  (has(object.spec) && has(object.spec.numberOfReplicas) ? string(object.spec.numberOfReplicas) : \"\")".to_string(),
        ),
        // As Longhorn's CSI driver reads a parameter (Go's strconv.Atoi: a sign and leading
        // zeros allowed); anything else is not a count here (the webhook warns about it).
        ("n", "variables.count.matches(r'^[+-]?[0-9]{1,18}$') ? int(variables.count) : 0".to_string()),
        (
            "pvcNamespace",
            "variables.storageClass ? \"\" : (has(object.status) && has(object.status.kubernetesStatus) && has(object.status.kubernetesStatus.namespace) ? object.status.kubernetesStatus.namespace : \"\")".to_string(),
        ),
        (
            "key",
            "variables.storageClass ? \"storageClass.\" + object.metadata.name : \"namespace.\" + variables.pvcNamespace".to_string(),
        ),
        (
            "minimum",
            "variables.key in params.data ? int(params.data[variables.key]) : int(params.data.minimum)".to_string(),
        ),
        (
            "source",
            "!(variables.key in params.data) ? \"policy minimum\" :\n  variables.storageClass ? \"storageclass \" + object.metadata.name + \" minimum\" : \"namespace \" + variables.pvcNamespace + \" minimum\"".to_string(),
        ),
        // A Volume names neither its StorageClass nor, until Longhorn fills in its status, its
        // namespace: while an override it cannot see could allow the count, it is not denied.
        (
            "uncertain",
            "!variables.storageClass && params.data.exists(k, (k.startsWith(\"storageClass.\") || (variables.pvcNamespace == \"\" && k.startsWith(\"namespace.\"))) && int(params.data[k]) < variables.minimum)".to_string(),
        ),
        // Only a count the request lowers: a CREATE, or an UPDATE below the old count.
        (
            "lowered",
            "variables.storageClass || oldObject == null || !has(oldObject.spec) || !has(oldObject.spec.numberOfReplicas) ||\n  oldObject.spec.numberOfReplicas <= 0 || oldObject.spec.numberOfReplicas > variables.n".to_string(),
        ),
    ];
    let tolerates = "(variables.n <= 1 ? \"has no redundancy\" : variables.n == 2 ? \"tolerates 1 node failure\" : \"tolerates \" + string(variables.n - 1) + \" node failures\")";
    let map = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": NAME },
        "spec": {
            // As the webhook's replicas entry: an evaluation error never blocks Longhorn's writes.
            "failurePolicy": "Ignore",
            "paramKind": { "apiVersion": "v1", "kind": "ConfigMap" },
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["longhorn.io"], "apiVersions": ["v1beta2"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["volumes"], "scope": "Namespaced",
                    },
                    {
                        "apiGroups": ["storage.k8s.io"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["storageclasses"], "scope": "Cluster",
                    },
                ],
                "matchPolicy": "Equivalent",
            },
            "matchConditions": [
                {
                    "name": "longhorn-storageclasses-only",
                    "expression": format!("request.resource.resource != \"storageclasses\" || object.provisioner == \"{LONGHORN_PROVISIONER}\""),
                },
                {
                    "name": "volumes-in-longhorn-system-only",
                    "expression": "request.resource.resource != \"volumes\" || request.namespace == \"longhorn-system\"",
                },
            ],
            "variables": variables.iter().map(|(n, e)| json!({ "name": n, "expression": e })).collect::<Vec<_>>(),
            "validations": [{
                "expression": "!(variables.n >= 1 && variables.n <= 20 && variables.n < variables.minimum && variables.lowered && !variables.uncertain)",
                "reason": "Invalid",
                "messageExpression": format!(
                    "\"longhorn-guard: \" + (variables.storageClass ? \"storageclass \" : \"volume \") + object.metadata.name +\n  \": numberOfReplicas=\" + string(variables.n) + \" \" + {tolerates} + \"; \" + variables.source + \" is \" + string(variables.minimum)"
                ),
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": NAME },
        "spec": {
            "policyName": NAME,
            "paramRef": { "name": NAME, "namespace": PARAM_NAMESPACE, "parameterNotFoundAction": "Allow" },
            "validationActions": [actions],
        },
    });
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": NAME, "namespace": PARAM_NAMESPACE },
        "data": params(policy),
    });
    [map, binding, config_map]
}

/// The three objects as one YAML stream, with a header saying where they come from; `Err`
/// with the YAML writer's message.
pub fn render_yaml(policy: &Policy) -> Result<String, String> {
    let mut out = String::from(
        "# Generated by `longhorn-guard replicas-policy` from the policy's replicas settings: do not edit.\n\
         # The replica-count rules the API server can check itself (docs/replicas.md, \"In the API server\").\n",
    );
    for (i, obj) in render(policy).iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(
            &serde_saphyr::to_string(obj).map_err(|e| format!("cannot write the policy as YAML: {e}"))?,
        );
    }
    Ok(out)
}

/// Arguments of `longhorn-guard replicas-policy`.
#[derive(Debug, clap::Args)]
pub struct ReplicasPolicyArgs {
    /// The policy file whose `replicas` settings (minimums, action) the policy checks; without
    /// it the defaults (docs/policy.md).
    #[arg(long, env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<std::path::PathBuf>,
}

/// `longhorn-guard replicas-policy`: prints the ValidatingAdmissionPolicy, its binding and its
/// parameter ConfigMap as YAML. Exit 0, 2 on an unreadable policy file.
pub fn run(args: ReplicasPolicyArgs) -> std::process::ExitCode {
    let policy = match Policy::load(args.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::output::bad_input("replicas-policy", &format!("policy: {e}")),
    };
    match render_yaml(&policy).map(|text| crate::output::stdout(&text).map_err(|e| e.to_string())) {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) | Err(e) => crate::output::bad_input("replicas-policy", &e),
    }
}
