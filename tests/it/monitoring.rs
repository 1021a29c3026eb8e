//! The opt-in monitoring component (manifests/components/monitoring): every alert and
//! dashboard query is valid PromQL (parsed with `promql-parser`) and names only metrics a
//! running `serve` exports, scraped over real TLS from a server holding the demo snapshot.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use longhorn_guard::admit::Admitter;
use longhorn_guard::check::cluster::{self, metrics, Check};
use longhorn_guard::cluster::SharedView;
use longhorn_guard::policy::Policy;
use serde_json::Value;
use support::{request, TestServer};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/components/monitoring");
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");

/// Metric names in `# TYPE` lines of a real scrape of `serve` with the checks on.
async fn exported() -> BTreeSet<String> {
    let policy = Arc::new(Policy::default());
    let (inv, view) = cluster::load_snapshot(Path::new(DEMO)).unwrap();
    let checks = metrics::SharedChecks::default();
    metrics::run_once(&checks, &inv, &view, &policy);
    let admitter = Admitter::new(SharedView::new(view), policy, None);
    let server = TestServer::with_checks(admitter, checks).await;
    let reply = request(server.addr, &server.client, "GET", "/metrics", Vec::new()).await.unwrap();
    server.handle.shutdown();
    assert_eq!(reply.status, 200);
    let text = reply.text();
    assert!(
        text.contains("longhorn_guard_findings{check=\"backup-target\",severity=\"error\"} 1\n"),
        "{text}"
    );
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// Every `longhorn_guard_*` name a query uses, histogram suffixes folded to the family.
fn names_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("longhorn_guard_") {
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        out.insert(family.to_string());
        rest = &tail[end..];
    }
    out
}

fn parses(expr: &str, what: &str) {
    if let Err(e) = promql_parser::parser::parse(expr) {
        panic!("{what}: `{expr}` is not valid PromQL: {e}");
    }
}

#[tokio::test]
async fn alerts_and_dashboard_query_only_exported_metrics() {
    let exported = exported().await;
    for name in metrics::NAMES {
        assert!(exported.contains(name), "{name} is exported");
    }

    let rule: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(format!("{DIR}/prometheusrule.yaml")).unwrap())
            .unwrap();
    assert_eq!(rule["kind"], "PrometheusRule");
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let mut alerted_checks = BTreeSet::new();
    for r in rules {
        let alert = r["alert"].as_str().unwrap();
        let expr = r["expr"].as_str().unwrap();
        parses(expr, alert);
        for n in names_in(expr) {
            assert!(exported.contains(&n), "{alert} uses {n}, which serve does not export");
        }
        for key in ["summary", "description", "runbook"] {
            assert!(r["annotations"][key].as_str().is_some_and(|s| !s.is_empty()), "{alert}: {key}");
        }
        assert!(["warning", "critical"].contains(&r["labels"]["severity"].as_str().unwrap()), "{alert}");
        if let Some(c) = Check::ALL.iter().find(|c| expr.contains(&format!("check=\"{}\"", c.id()))) {
            alerted_checks.insert(c.id());
        }
    }
    // An alert for every check that can report an error, and for stalled rebuilds.
    let error_capable: BTreeSet<&str> =
        Check::ALL.iter().filter(|c| **c != Check::DrainReadiness).map(|c| c.id()).collect();
    assert_eq!(alerted_checks, error_capable);
    assert!(rules.iter().any(|r| r["expr"].as_str().unwrap().contains("longhorn_guard_stalled_rebuilds")));

    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/dashboard.json")).unwrap()).unwrap();
    assert_eq!(dash["uid"], "longhorn-guard");
    let panels = dash["panels"].as_array().unwrap();
    assert!(panels.len() >= 6);
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_i64().unwrap()), "panel ids are unique");
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            parses(expr, p["title"].as_str().unwrap());
            for n in names_in(expr) {
                assert!(exported.contains(&n), "panel {} uses {n}, which serve does not export", p["title"]);
            }
        }
    }
}

#[test]
fn the_component_renders_with_the_base() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    // kustomize takes only relative paths to bases and components.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = relative(dir.path(), Path::new(env!("CARGO_MANIFEST_DIR")));
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {root}/manifests/base\ncomponents:\n  - {root}/manifests/components/monitoring\n"
        ),
    )
    .unwrap();
    let out = Command::new(&kubectl).arg("kustomize").arg(dir.path()).output().expect("kubectl on PATH");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let kinds: BTreeSet<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    for k in ["PrometheusRule", "ServiceMonitor", "ConfigMap", "Deployment"] {
        assert!(kinds.contains(k), "{k} in {kinds:?}");
    }
    let cm = docs.iter().find(|d| d["metadata"]["name"] == "longhorn-guard-dashboard").unwrap();
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(cm["data"]["longhorn-guard.json"].as_str().unwrap()).unwrap();
    assert_eq!(json["title"], "longhorn-guard");
}

/// `to` as a path relative to the directory `from` (both made absolute).
fn relative(from: &Path, to: &Path) -> String {
    let (from, to) = (from.canonicalize().unwrap(), to.canonicalize().unwrap());
    let common = from.components().zip(to.components()).take_while(|(a, b)| a == b).count();
    let ups = from.components().count() - common;
    let mut parts: Vec<String> = vec!["..".into(); ups];
    parts.extend(to.components().skip(common).map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}
