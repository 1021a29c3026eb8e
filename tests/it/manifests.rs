//! The install manifests, as `kubectl kustomize` renders them: webhook rules, selectors and
//! failure policies per entry, read-only RBAC, the Deployment's security settings, and the
//! three overlays (cert-manager, dev-certs, local).
//!
//! Needs `kubectl` (v1.27+, with kustomize) on PATH or in `$KUBECTL`; fails, never skips,
//! without it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};

const NS: &str = "longhorn-guard";
const LH_NS: &str = "longhorn-system";
const VALIDATE: &str = "ValidatingWebhookConfiguration";
const MUTATE: &str = "MutatingWebhookConfiguration";

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// `kubectl kustomize DIR`, parsed into one JSON value per document.
fn render(dir: &Path) -> Vec<Value> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let out = match Command::new(&kubectl).arg("kustomize").arg(dir).output() {
        Ok(out) => out,
        Err(e) => panic!(
            "tests/it/manifests.rs needs kubectl (with kustomize) to render manifests/: \
             cannot run `{kubectl}`: {e}. Install kubectl or set KUBECTL=/path/to/kubectl."
        ),
    };
    assert!(
        out.status.success(),
        "`{kubectl} kustomize {}` failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("kustomize output is UTF-8");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("kustomize output parses");
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    assert!(!docs.is_empty(), "`kubectl kustomize {}` rendered nothing", dir.display());
    docs
}

fn base() -> Vec<Value> {
    render(&manifests_dir().join("base"))
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered manifests"))
}

fn find_prefix<'a>(docs: &'a [Value], kind: &str, prefix: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .unwrap_or_else(|| panic!("no {kind} {prefix}* in the rendered manifests"))
}

/// Every webhook entry of both configurations, with the kind of its configuration.
fn webhooks(docs: &[Value]) -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for d in docs.iter().filter(|d| d["kind"] == VALIDATE || d["kind"] == MUTATE) {
        for w in d["webhooks"].as_array().expect("webhooks is a list") {
            all.push((d["kind"].as_str().unwrap().to_string(), w.clone()));
        }
    }
    all
}

fn webhook<'a>(all: &'a [(String, Value)], name: &str) -> &'a (String, Value) {
    all.iter().find(|(_, w)| w["name"] == name).unwrap_or_else(|| panic!("no webhook {name}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_else(|| panic!("expected a string, got {s}")).to_string())
        .collect()
}

/// The values of the namespaceSelector expression `kubernetes.io/metadata.name <op> [...]`.
fn ns_values(w: &Value, op: &str) -> Option<Vec<String>> {
    w["namespaceSelector"]["matchExpressions"]
        .as_array()?
        .iter()
        .find(|e| e["key"] == "kubernetes.io/metadata.name" && e["operator"] == op)
        .map(|e| strings(&e["values"]))
}

#[test]
fn manifests_itself_installs_nothing() {
    // The base alone has no certificate and fails closed: `kubectl apply -k manifests/` must
    // stop before applying anything rather than install it.
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let out = Command::new(&kubectl).arg("kustomize").arg(manifests_dir()).output().unwrap();
    assert!(!out.status.success(), "manifests/ renders: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unable to find one of 'kustomization.yaml'"));
}

#[test]
fn base_renders_every_object() {
    let docs = base();
    let mut kinds: Vec<String> = docs
        .iter()
        .map(|d| format!("{}/{}", d["kind"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()))
        .collect();
    kinds.sort();
    for want in [
        "Namespace/longhorn-guard",
        "ServiceAccount/longhorn-guard",
        "ClusterRole/longhorn-guard-view",
        "ClusterRoleBinding/longhorn-guard-view",
        "Role/longhorn-guard-view",
        "RoleBinding/longhorn-guard-view",
        "Deployment/longhorn-guard",
        "Service/longhorn-guard",
        "PodDisruptionBudget/longhorn-guard",
        "ValidatingWebhookConfiguration/longhorn-guard",
        "MutatingWebhookConfiguration/longhorn-guard",
    ] {
        assert!(kinds.iter().any(|k| k == want), "missing {want}; rendered: {kinds:?}");
    }
    // The TLS Secret is not in the base: it comes from an overlay (never a committed key).
    assert!(!docs.iter().any(|d| d["kind"] == "Secret"), "the base must not ship a Secret");
    // Everything namespaced lives in the webhook's namespace, except the longhorn-system Role(Binding).
    for d in &docs {
        let ns = d["metadata"]["namespace"].as_str();
        match d["kind"].as_str().unwrap() {
            "Role" | "RoleBinding" => assert_eq!(ns, Some(LH_NS)),
            "Namespace" | "ClusterRole" | "ClusterRoleBinding" | VALIDATE | MUTATE => assert_eq!(ns, None),
            k => assert_eq!(ns, Some(NS), "{k} {}", d["metadata"]["name"]),
        }
    }
}

/// One expected rule: (apiGroups, apiVersions, operations, resources, scope).
type Rule = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static str,
);

/// One expected webhook entry: (name, configuration kind, rules, failurePolicy, namespace In).
type Expected = (&'static str, &'static str, &'static [Rule], &'static str, Option<&'static str>);

#[test]
fn each_webhook_has_its_rules_selectors_and_failure_policy() {
    let all = webhooks(&base());
    let names: BTreeSet<&str> = all.iter().map(|(_, w)| w["name"].as_str().unwrap()).collect();
    let expected: [Expected; 8] = [
        (
            "drain-eviction.longhorn-guard.io",
            VALIDATE,
            &[(&[""], &["v1"], &["CREATE"], &["pods/eviction"], "Namespaced")],
            "Fail",
            Some(LH_NS),
        ),
        (
            "node-delete.longhorn-guard.io",
            VALIDATE,
            &[(&[""], &["v1"], &["DELETE"], &["nodes"], "Cluster")],
            "Fail",
            None,
        ),
        (
            "node-cordon.longhorn-guard.io",
            VALIDATE,
            &[(&[""], &["v1"], &["UPDATE"], &["nodes"], "Cluster")],
            "Ignore",
            None,
        ),
        (
            "replicas.longhorn-guard.io",
            VALIDATE,
            &[
                (
                    &["longhorn.io"],
                    &["v1beta2"],
                    &["CREATE", "UPDATE"],
                    &["settings", "volumes"],
                    "Namespaced",
                ),
                (&["storage.k8s.io"], &["v1"], &["CREATE"], &["storageclasses"], "Cluster"),
            ],
            "Ignore",
            Some(LH_NS),
        ),
        (
            "init-gate.longhorn-guard.io",
            MUTATE,
            &[(&[""], &["v1"], &["CREATE"], &["pods"], "Namespaced")],
            "Ignore",
            Some(LH_NS),
        ),
        (
            "pod-delete.longhorn-guard.io",
            VALIDATE,
            &[(&[""], &["v1"], &["DELETE"], &["pods"], "Namespaced")],
            "Fail",
            Some(LH_NS),
        ),
        (
            "instance-manager-delete.longhorn-guard.io",
            VALIDATE,
            &[(&["longhorn.io"], &["v1beta2"], &["DELETE"], &["instancemanagers"], "Namespaced")],
            "Fail",
            Some(LH_NS),
        ),
        (
            "budget-delete.longhorn-guard.io",
            VALIDATE,
            &[(&["policy"], &["v1"], &["DELETE"], &["poddisruptionbudgets"], "Namespaced")],
            "Fail",
            Some(LH_NS),
        ),
    ];
    assert_eq!(names, expected.iter().map(|e| e.0).collect(), "one webhook entry per concern, no others");

    for (name, config, rules, failure, ns_in) in expected {
        let (kind, w) = webhook(&all, name);
        assert_eq!(kind, config, "{name} is in the {config}");
        assert_eq!(w["failurePolicy"], failure, "{name} failurePolicy");
        let got = w["rules"].as_array().unwrap();
        assert_eq!(got.len(), rules.len(), "{name} rules: {got:?}");
        for (g, (groups, versions, ops, resources, scope)) in got.iter().zip(rules) {
            assert_eq!(strings(&g["apiGroups"]), *groups, "{name} apiGroups");
            assert_eq!(strings(&g["apiVersions"]), *versions, "{name} apiVersions");
            assert_eq!(strings(&g["operations"]), *ops, "{name} operations");
            assert_eq!(strings(&g["resources"]), *resources, "{name} resources");
            assert_eq!(g["scope"], *scope, "{name} scope");
        }
        assert_eq!(ns_values(w, "In"), ns_in.map(|n| vec![n.to_string()]), "{name} namespaceSelector In");
    }

    // Evictions: the Eviction object has no pod labels, so an objectSelector would never match
    // (kubernetes#110169): the scope must come from the namespace (and the pod name).
    let (_, evict) = webhook(&all, "drain-eviction.longhorn-guard.io");
    assert!(
        evict.get("objectSelector").is_none_or(|s| s == &json!({})),
        "objectSelector on evictions never matches"
    );
    assert!(
        evict["matchConditions"].to_string().contains("request.name.startsWith('instance-manager-')"),
        "{}",
        evict["matchConditions"]
    );
    // Cordons: only updates that set spec.unschedulable.
    let (_, cordon) = webhook(&all, "node-cordon.longhorn-guard.io");
    assert!(cordon["matchConditions"].to_string().contains("object.spec.unschedulable == true"));
    // Init gate: instance-manager pods (objectSelector sees pod labels on CREATE) with the
    // networks annotation; re-run if a later webhook changes the pod.
    let (_, gate) = webhook(&all, "init-gate.longhorn-guard.io");
    assert_eq!(gate["objectSelector"], json!({"matchLabels": {"longhorn.io/component": "instance-manager"}}));
    assert!(gate["matchConditions"].to_string().contains("k8s.v1.cni.cncf.io/networks"));
    assert_eq!(gate["reinvocationPolicy"], "IfNeeded");
    // StorageClasses: only Longhorn's provisioner.
    let (_, replicas) = webhook(&all, "replicas.longhorn-guard.io");
    assert!(replicas["matchConditions"].to_string().contains("driver.longhorn.io"));
    // Deletes: instance-manager pods and budgets only, by their old object (a DELETE has no
    // `object`; one of a collection has no request.name), and never the trusted users.
    let conditions = |name: &str| -> Vec<(String, String)> {
        let (_, w) = webhook(&all, name);
        let list = w["matchConditions"].as_array().unwrap_or_else(|| panic!("{name}: no matchConditions"));
        list.iter()
            .map(|c| (c["name"].as_str().unwrap().into(), c["expression"].as_str().unwrap().into()))
            .collect()
    };
    let trusted = Policy::load(Some(&manifests_dir().join("base/policy.yaml"))).unwrap().drain.trusted_users;
    assert_eq!(
        trusted,
        longhorn_guard::policy::DEFAULT_TRUSTED_USERS,
        "the shipped policy trusts the defaults"
    );
    let skip = format!(
        "!(request.userInfo.username in [{}])",
        trusted.iter().map(|u| format!("'{u}'")).collect::<Vec<_>>().join(", ")
    );
    let im_label = "oldObject.metadata.labels['longhorn.io/component'] == 'instance-manager'";
    let im_selector = "oldObject.spec.selector.matchLabels['longhorn.io/component'] == 'instance-manager'";
    for (name, own) in [
        ("pod-delete.longhorn-guard.io", Some(("instance-manager-pod", im_label))),
        ("instance-manager-delete.longhorn-guard.io", None),
        ("budget-delete.longhorn-guard.io", Some(("instance-manager-budget", im_selector))),
    ] {
        let mut got = conditions(name);
        assert_eq!(got.pop(), Some(("not-a-trusted-user".to_string(), skip.clone())), "{name}");
        // A pod already terminating only has its object removed (the kubelet's final DELETE):
        // it never reaches the guard.
        if name == "pod-delete.longhorn-guard.io" {
            let terminating = "oldObject == null || !has(oldObject.metadata.deletionTimestamp)";
            assert_eq!(got.pop(), Some(("not-terminating".to_string(), terminating.to_string())), "{name}");
        }
        match own {
            Some((cond, has)) => {
                assert_eq!(got.len(), 1, "{name}: {got:?}");
                assert_eq!(got[0].0, cond, "{name}");
                assert!(
                    got[0].1.starts_with("oldObject != null && has(") && got[0].1.ends_with(has),
                    "{name}: {}",
                    got[0].1
                );
            }
            None => assert!(got.is_empty(), "{name}: {got:?}"),
        }
    }
}

#[test]
fn every_webhook_is_side_effect_free_v1_short_and_served_by_the_service() {
    let all = webhooks(&base());
    assert_eq!(all.len(), 8);
    for (kind, w) in &all {
        let name = w["name"].as_str().unwrap();
        assert_eq!(w["sideEffects"], "None", "{name}");
        assert_eq!(strings(&w["admissionReviewVersions"]), ["v1"], "{name}");
        assert_eq!(w["matchPolicy"], "Equivalent", "{name}");
        let timeout =
            w["timeoutSeconds"].as_u64().unwrap_or_else(|| panic!("{name}: timeoutSeconds must be set"));
        assert!((1..=10).contains(&timeout), "{name}: timeoutSeconds {timeout} must be 1..10");
        let path = if kind == MUTATE { "/mutate" } else { "/validate" };
        assert_eq!(
            w["clientConfig"]["service"],
            json!({"name": "longhorn-guard", "namespace": NS, "path": path, "port": 443}),
            "{name}"
        );
        // matchConditions compile only with the CEL variables the API server provides.
        for c in w["matchConditions"].as_array().into_iter().flatten() {
            assert!(c["name"].is_string() && c["expression"].is_string(), "{name}: {c}");
        }
    }
}

#[test]
fn own_namespace_and_kube_system_are_never_intercepted() {
    for (_, w) in webhooks(&base()) {
        let name = w["name"].as_str().unwrap();
        let namespaced = w["rules"].as_array().unwrap().iter().any(|r| r["scope"] != "Cluster");
        if namespaced {
            let not_in =
                ns_values(&w, "NotIn").unwrap_or_else(|| panic!("{name}: no NotIn namespaceSelector"));
            for ns in [NS, "kube-system"] {
                assert!(not_in.iter().any(|n| n == ns), "{name} must exclude {ns}: {not_in:?}");
                if let Some(only) = ns_values(&w, "In") {
                    assert!(!only.iter().any(|n| n == ns), "{name} includes {ns}");
                }
            }
        } else {
            // Cluster-scoped only (nodes): a namespaceSelector would not apply; none is set.
            assert!(w.get("namespaceSelector").is_none_or(|s| s == &json!({})), "{name}");
        }
        // Never wildcards.
        for r in w["rules"].as_array().unwrap() {
            for field in ["apiGroups", "apiVersions", "operations", "resources"] {
                assert!(!strings(&r[field]).iter().any(|s| s.contains('*')), "{name}: wildcard in {field}");
            }
        }
    }
}

#[test]
fn rbac_is_read_only_and_scoped() {
    let docs = base();
    let read = ["get", "list", "watch"];
    let mut roles = 0;
    for d in docs.iter().filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role") {
        roles += 1;
        for rule in d["rules"].as_array().unwrap() {
            for verb in strings(&rule["verbs"]) {
                assert!(
                    read.contains(&verb.as_str()),
                    "{} {}: verb {verb}",
                    d["kind"],
                    d["metadata"]["name"]
                );
            }
            for field in ["apiGroups", "resources"] {
                assert!(!strings(&rule[field]).iter().any(|s| s == "*"), "wildcard {field} in {}", d["kind"]);
            }
            assert!(!strings(&rule["resources"]).iter().any(|r| r == "secrets"), "no Secret access");
        }
    }
    assert_eq!(roles, 2);
    let cluster = find(&docs, "ClusterRole", "longhorn-guard-view");
    let resources: BTreeSet<String> =
        cluster["rules"].as_array().unwrap().iter().flat_map(|r| strings(&r["resources"])).collect();
    assert_eq!(
        resources,
        ["nodes", "storageclasses"].map(String::from).into(),
        "only cluster-scoped kinds cluster-wide"
    );
    let role = find(&docs, "Role", "longhorn-guard-view");
    assert_eq!(role["metadata"]["namespace"], LH_NS);
    let resources: BTreeSet<String> =
        role["rules"].as_array().unwrap().iter().flat_map(|r| strings(&r["resources"])).collect();
    let want = [
        "pods",
        "volumes",
        "replicas",
        "engines",
        "nodes",
        "settings",
        "instancemanagers",
        "poddisruptionbudgets",
        "backuptargets",
        "recurringjobs",
        "snapshots",
    ];
    assert_eq!(resources, want.map(String::from).into());
    for binding in [
        find(&docs, "ClusterRoleBinding", "longhorn-guard-view"),
        find(&docs, "RoleBinding", "longhorn-guard-view"),
    ] {
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "longhorn-guard", "namespace": NS}])
        );
        assert_eq!(binding["roleRef"]["name"], "longhorn-guard-view");
    }
}

#[test]
fn deployment_is_ha_probed_limited_and_restricted() {
    let docs = base();
    let dep = find(&docs, "Deployment", "longhorn-guard");
    let spec = &dep["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(pod["serviceAccountName"], "longhorn-guard");
    // Fail webhooks: the guard must not be the first pod evicted or left Pending.
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    // A guard pod that never gets ready does not hold up its node's drain.
    let pdb = find(&docs, "PodDisruptionBudget", "longhorn-guard");
    assert_eq!(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], pod_labels);

    let anti = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["podAffinityTerm"]["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(&anti["podAffinityTerm"]["labelSelector"]["matchLabels"], pod_labels);

    let psc = &pod["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true);
    assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
    assert_ne!(psc["runAsUser"], 0);

    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["image"], "ghcr.io/longhorn-guard/longhorn-guard:0.1.0");
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert!(sc["capabilities"].get("add").is_none());
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");

    for part in ["requests", "limits"] {
        for res in ["cpu", "memory"] {
            assert!(c["resources"][part][res].is_string(), "resources.{part}.{res} must be set");
        }
    }

    let port = &c["ports"][0];
    assert_eq!(port["name"], "https");
    assert_eq!(port["containerPort"], 8443);
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["scheme"], "HTTPS", "{probe}");
        assert_eq!(get["port"], "https", "{probe}");
    }

    let args = strings(&c["args"]);
    assert_eq!(args[0], "serve");
    assert!(args.contains(&"--tls-dir=/etc/longhorn-guard/tls".to_string()), "{args:?}");
    assert!(args.contains(&"--listen=0.0.0.0:8443".to_string()), "{args:?}");
    assert!(args.contains(&"--policy=/etc/longhorn-guard/policy/policy.yaml".to_string()), "{args:?}");

    // TLS from the Secret, mounted as a directory (no subPath: renewals reach the server).
    let mounts = c["volumeMounts"].as_array().unwrap();
    let tls_mount = mounts.iter().find(|m| m["mountPath"] == "/etc/longhorn-guard/tls").expect("tls mount");
    assert!(tls_mount.get("subPath").is_none());
    assert_eq!(tls_mount["readOnly"], true);
    let volumes = pod["volumes"].as_array().unwrap();
    let tls = volumes.iter().find(|v| v["name"] == tls_mount["name"]).unwrap();
    assert_eq!(tls["secret"]["secretName"], "longhorn-guard-tls");
    let policy_mount =
        mounts.iter().find(|m| m["mountPath"] == "/etc/longhorn-guard/policy").expect("policy mount");
    let policy_vol = volumes.iter().find(|v| v["name"] == policy_mount["name"]).unwrap();
    let cm_name = policy_vol["configMap"]["name"].as_str().unwrap();
    let cm = find(&docs, "ConfigMap", cm_name);

    // The shipped policy file is valid, and the gate runs the same image as the server.
    let policy =
        Policy::parse(cm["data"]["policy.yaml"].as_str().unwrap()).expect("shipped policy.yaml is valid");
    assert_eq!(c["image"], policy.gate.image.as_str(), "gate.image must equal the Deployment's image");

    // PDB keeps one pod; Service 443 -> the named container port.
    let pdb = find(&docs, "PodDisruptionBudget", "longhorn-guard");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], &spec["selector"]["matchLabels"]);
    let svc = find(&docs, "Service", "longhorn-guard");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "https");
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "Service selector {k} must match the pods");
    }
}

#[test]
fn cert_manager_overlay_issues_the_serving_secret_and_injects_the_ca() {
    let docs = render(&manifests_dir().join("overlays/cert-manager"));
    let serving = find(&docs, "Certificate", "longhorn-guard-serving");
    assert_eq!(serving["metadata"]["namespace"], NS);
    assert_eq!(serving["spec"]["secretName"], "longhorn-guard-tls");
    assert!(strings(&serving["spec"]["dnsNames"]).contains(&"longhorn-guard.longhorn-guard.svc".to_string()));
    let ca_issuer = find(&docs, "Issuer", serving["spec"]["issuerRef"]["name"].as_str().unwrap());
    let ca_secret = ca_issuer["spec"]["ca"]["secretName"].as_str().expect("a CA issuer");
    let ca_cert = docs
        .iter()
        .find(|d| d["kind"] == "Certificate" && d["spec"]["secretName"] == ca_secret)
        .expect("a Certificate for the CA secret");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root = find(&docs, "Issuer", ca_cert["spec"]["issuerRef"]["name"].as_str().unwrap());
    assert!(root["spec"]["selfSigned"].is_object());
    for kind in [VALIDATE, MUTATE] {
        let cfg = find(&docs, kind, "longhorn-guard");
        assert_eq!(
            cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "longhorn-guard/longhorn-guard-serving"
        );
    }
    // The base is all there too.
    find(&docs, "Deployment", "longhorn-guard");
    assert_eq!(webhooks(&docs).len(), 8);
}

/// Copies `manifests/` into a temporary directory (to add the generated tls/ files).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn dev_certs_overlay_fills_every_ca_bundle_and_the_tls_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("manifests");
    copy_dir(&manifests_dir(), &root);
    let tls = root.join("overlays/dev-certs/tls");
    let _ = std::fs::remove_dir_all(&tls);
    std::fs::create_dir_all(&tls).unwrap();
    let files = [
        ("ca.crt", "-----BEGIN CERTIFICATE-----\nY2EK\n-----END CERTIFICATE-----\n"),
        ("tls.crt", "-----BEGIN CERTIFICATE-----\ndGxzCg==\n-----END CERTIFICATE-----\n"),
        ("tls.key", "-----BEGIN PRIVATE KEY-----\na2V5Cg==\n-----END PRIVATE KEY-----\n"),
    ];
    for (name, text) in files {
        std::fs::write(tls.join(name), text).unwrap();
    }
    let docs = render(&root.join("overlays/dev-certs"));
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = find(&docs, "Secret", "longhorn-guard-tls");
    assert_eq!(secret["metadata"]["namespace"], NS);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    for (name, text) in files {
        let got: String = secret["data"][name].as_str().unwrap().split_whitespace().collect();
        assert_eq!(got, b64(text), "Secret data {name}");
    }
    let all = webhooks(&docs);
    assert_eq!(all.len(), 8);
    for (_, w) in &all {
        let got: String =
            w["clientConfig"]["caBundle"].as_str().expect("caBundle set").split_whitespace().collect();
        assert_eq!(got, b64(files[0].1), "{} caBundle is the CA", w["name"]);
        assert_eq!(w["clientConfig"]["service"]["name"], "longhorn-guard");
    }
    let _ = find_prefix(&docs, "ConfigMap", "longhorn-guard-policy");
}

#[test]
fn local_overlay_points_every_webhook_at_a_url_and_keeps_the_rules() {
    let local = webhooks(&render(&manifests_dir().join("overlays/local")));
    let base = webhooks(&base());
    assert_eq!(local.len(), base.len());
    for (kind, w) in &local {
        let name = w["name"].as_str().unwrap();
        let path = if kind == MUTATE { "/mutate" } else { "/validate" };
        assert_eq!(
            w["clientConfig"],
            json!({"url": format!("__URL__{path}"), "caBundle": "__CA_BUNDLE__"}),
            "{name}"
        );
        let (_, b) = webhook(&base, name);
        let strip = |v: &Value| {
            let mut v = v.clone();
            v.as_object_mut().unwrap().remove("clientConfig");
            v
        };
        assert_eq!(strip(w), strip(b), "{name}: only clientConfig differs from the base");
    }
}

#[test]
fn dockerfile_builds_a_non_root_image_with_the_binary_where_the_gate_runs_it() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap();
    let lines: Vec<&str> =
        text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: a build stage and a run stage: {froms:?}");
    // Base images are build args with real public defaults; the run stage needs no libc.
    let arg_default = |name: &str| {
        let prefix = format!("ARG {name}=");
        lines.iter().find_map(|l| l.strip_prefix(prefix.as_str())).unwrap_or_else(|| panic!("no {prefix}"))
    };
    assert_eq!(*froms[0], "FROM ${BUILD_IMAGE} AS build");
    assert_eq!(*froms[1], "FROM ${BASE_IMAGE}");
    assert!(arg_default("BUILD_IMAGE").contains("rust:"), "{}", arg_default("BUILD_IMAGE"));
    assert!(
        arg_default("BASE_IMAGE").starts_with("gcr.io/distroless/static-"),
        "final image is distroless static: {}",
        arg_default("BASE_IMAGE")
    );
    assert!(text.contains("cargo build --release --locked"));
    assert!(text.contains("RUSTFLAGS=\"-C target-feature=+crt-static\""), "a static binary");
    // The init gate runs `GATE_BINARY gate ...` from this image (src/mutate/init_gate.rs).
    let gate_binary = longhorn_guard::mutate::init_gate::GATE_BINARY;
    assert!(
        lines.iter().any(|l| l.starts_with("COPY --from=") && l.ends_with(&format!(" {gate_binary}"))),
        "the binary must be copied to {gate_binary}"
    );
    assert_eq!(
        lines.iter().rfind(|l| l.starts_with("ENTRYPOINT")),
        Some(&&*format!("ENTRYPOINT [\"{gate_binary}\"]"))
    );
    let user = lines.iter().rfind(|l| l.starts_with("USER ")).expect("a USER line");
    assert!(user.starts_with("USER 65532"), "{user}");
    // The Deployment runs as that user too.
    let docs = base();
    let dep = find(&docs, "Deployment", "longhorn-guard");
    assert_eq!(dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"], 65532);
}
