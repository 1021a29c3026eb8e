//! The counters' labels and their exposition.

use super::*;

#[test]
fn requests_are_classified_by_kind_and_verb() {
    use ObjectKind::{LonghornNode, Node, Pod, Replica, Setting};
    let lh = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system";
    let is = |method: &str, path: &str, query: &str, want: (Option<ObjectKind>, &str)| {
        assert_eq!(classify(method, path, query), want, "{method} {path}?{query}");
    };
    is("GET", &format!("{lh}/replicas"), "labelSelector=longhornnode%3Dn1", (Some(Replica), "list"));
    is("GET", &format!("{lh}/nodes"), "watch=true&timeoutSeconds=290", (Some(LonghornNode), "watch"));
    is("GET", &format!("{lh}/settings/storage-network"), "", (Some(Setting), "get"));
    is("GET", "/api/v1/nodes", "", (Some(Node), "list"));
    is("GET", "/api/v1/namespaces/longhorn-system/pods/im-1", "", (Some(Pod), "get"));
    is("PATCH", "/api/v1/namespaces/x/pods/p", "", (Some(Pod), "patch"));
    is("GET", "/api/v1/namespaces/default", "", (None, "get"));
    is("GET", "/apis/apps/v1/deployments", "", (None, "list"));
    is("GET", "/version", "", (None, "list"));
    is("OPTIONS", "/api/v1/nodes", "", (Some(Node), "other"));
}

#[test]
fn renders_fixed_label_sets() {
    let s = ApiStats::new();
    let mut registry = Registry::default();
    s.register(&mut registry);
    let render = || {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).unwrap();
        out
    };
    let (one, two) = (s.queued(), s.queued());
    drop(one);
    s.api_request("GET", "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/replicas", "");
    s.api_request("GET", "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/replicas", "");
    s.api_request("GET", "/apis/example.com/v1/widgets", "watch=1");
    s.confirmation(ConfirmResult::Allowed, Duration::from_millis(7));
    s.confirmation(ConfirmResult::Failed, Duration::from_secs(30));
    let out = render();
    for line in [
        "longhorn_guard_api_requests_total{kind=\"replicas.longhorn.io\",verb=\"list\"} 2",
        "longhorn_guard_api_requests_total{kind=\"other\",verb=\"watch\"} 1",
        "longhorn_guard_confirmations_total{result=\"allowed\"} 1",
        "longhorn_guard_confirmations_total{result=\"denied\"} 0",
        "longhorn_guard_confirmations_total{result=\"failed\"} 1",
        "longhorn_guard_confirmation_duration_seconds_bucket{le=\"0.005\"} 0",
        "longhorn_guard_confirmation_duration_seconds_bucket{le=\"0.01\"} 1",
        "longhorn_guard_confirmation_duration_seconds_bucket{le=\"10\"} 1",
        "longhorn_guard_confirmation_duration_seconds_bucket{le=\"+Inf\"} 2",
        "longhorn_guard_confirmation_duration_seconds_sum 30.007",
        "longhorn_guard_confirmation_duration_seconds_count 2",
        "# TYPE longhorn_guard_confirmations_queued gauge",
        "longhorn_guard_confirmations_queued 1",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line} in\n{out}");
    }
    drop(two);
    let out = render();
    assert!(out.lines().any(|l| l == "longhorn_guard_confirmations_queued 0"), "{out}");
    assert!(!out.contains("verb=\"get\""), "zero series are not rendered: {out}");
}
