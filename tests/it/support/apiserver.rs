//! A stand-in Kubernetes API server over real TLS on 127.0.0.1:0: it serves LISTs of a fixed set
//! of objects with label selectors (`k=v`, `k!=v`, `k in (a,b)`) and `metadata.name` field
//! selectors, as a Table of the printer columns of Longhorn's CRD (`../shared/fixtures/crds`)
//! when asked to, records every request, and counts how many were in flight at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};

/// What the stand-in saw.
#[derive(Default)]
pub struct Seen {
    /// Every request as `path?query`, in arrival order.
    pub requests: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    /// The most requests that were being answered at the same time.
    pub max_in_flight: AtomicUsize,
}

impl Seen {
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }
}

/// A running stand-in API server.
/// Rewrites an answer body, given the request's path and query.
pub type Mangle = fn(&str, &str, &mut Value);

pub struct FakeApi {
    pub addr: std::net::SocketAddr,
    pub seen: Arc<Seen>,
    /// Holds the CA and serving pair.
    pub certs: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApi {
    /// Serves `items` (objects with apiVersion and kind); each answer is held for `hold` so that
    /// concurrent requests overlap and the in-flight count shows the client's concurrency.
    pub async fn start(items: Vec<Value>, hold: Duration) -> Self {
        Self::start_with(items, hold, true).await
    }

    /// As [`FakeApi::start`], but answering a Table request with 406 Not Acceptable, as an API
    /// server that cannot print the kind does.
    pub async fn start_without_tables(items: Vec<Value>, hold: Duration) -> Self {
        Self::start_with(items, hold, false).await
    }

    /// As [`FakeApi::start`], but `mangle` may rewrite each successful answer (given the
    /// request's path and query), as a broken proxy or API server would.
    pub async fn start_mangled(items: Vec<Value>, mangle: Mangle) -> Self {
        Self::start_full(items, Duration::ZERO, true, Some(mangle)).await
    }

    /// As [`FakeApi::start`], but answering 403 Forbidden (as RBAC does) to a request whose
    /// path is one of `forbidden`.
    pub async fn start_forbidding(items: Vec<Value>, forbidden: &'static [&'static str]) -> Self {
        Self::start_full_forbidding(items, Duration::ZERO, true, None, forbidden).await
    }

    async fn start_with(items: Vec<Value>, hold: Duration, tables: bool) -> Self {
        Self::start_full(items, hold, tables, None).await
    }

    async fn start_full(items: Vec<Value>, hold: Duration, tables: bool, mangle: Option<Mangle>) -> Self {
        Self::start_full_forbidding(items, hold, tables, mangle, &[]).await
    }

    async fn start_full_forbidding(
        items: Vec<Value>,
        hold: Duration,
        tables: bool,
        mangle: Option<Mangle>,
        forbidden: &'static [&'static str],
    ) -> Self {
        let (certs, acceptor, listener) = super::tls_listener().await;
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let items = Arc::new(items);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let (acceptor, seen, items) = (acceptor.clone(), seen.clone(), items.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else { return };
                        let service =
                            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                                let (seen, items) = (seen.clone(), items.clone());
                                async move {
                                    let accept = req
                                        .headers()
                                        .get(http::header::ACCEPT)
                                        .and_then(|v| v.to_str().ok())
                                        .map(str::to_string);
                                    let refuse =
                                        !tables && accept.as_deref().is_some_and(|a| a.contains("as=Table"));
                                    Ok::<_, std::convert::Infallible>(
                                        if forbidden.contains(&req.uri().path()) {
                                            forbid(&seen, req.uri())
                                        } else if refuse {
                                            not_acceptable(&seen, req.uri())
                                        } else {
                                            answer(&seen, &items, req.uri(), accept.as_deref(), hold, mangle)
                                                .await
                                        },
                                    )
                                }
                            });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    });
                }
            })
        };
        Self { addr, seen, certs, task }
    }

    /// A kube configuration for this server, trusting only its CA.
    pub fn config(&self) -> kube::Config {
        let mut config =
            kube::Config::new(format!("https://127.0.0.1:{}", self.addr.port()).parse().unwrap());
        let pem = std::fs::read(self.certs.path().join("ca.crt")).unwrap();
        let ders = CertificateDer::pem_slice_iter(&pem).map(|c| c.unwrap().to_vec()).collect();
        config.root_cert = Some(ders);
        config
    }

    /// A counting client (as `serve` builds it) for this server.
    pub fn client(&self) -> kube::Client {
        longhorn_guard::cluster::client::build(self.config()).unwrap()
    }
}

/// The API server's answer when RBAC refuses a LIST.
fn forbid(seen: &Seen, uri: &hyper::Uri) -> hyper::Response<Full<Bytes>> {
    seen.requests.lock().unwrap().push(format!("{}?{}", uri.path(), uri.query().unwrap_or("")));
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                      "message": format!("the server does not allow this method on {}", uri.path())});
    hyper::Response::builder()
        .status(403)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn not_acceptable(seen: &Seen, uri: &hyper::Uri) -> hyper::Response<Full<Bytes>> {
    seen.requests.lock().unwrap().push(format!("{}?{}", uri.path(), uri.query().unwrap_or("")));
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotAcceptable", "code": 406,
                      "message": "only the following media types are accepted: application/json, application/yaml"});
    hyper::Response::builder()
        .status(406)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

async fn answer(
    seen: &Seen,
    items: &[Value],
    uri: &hyper::Uri,
    accept: Option<&str>,
    hold: Duration,
    mangle: Option<Mangle>,
) -> hyper::Response<Full<Bytes>> {
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    seen.requests.lock().unwrap().push(format!("{path}?{query}"));
    tokio::time::sleep(hold).await;
    let reply = respond(items, &path, &query, accept);
    seen.in_flight.fetch_sub(1, Ordering::SeqCst);
    let (status, body) = match reply {
        Ok(mut body) => {
            if let Some(mangle) = mangle {
                mangle(&path, &query, &mut body);
            }
            (200, body)
        }
        Err(message) => (
            400,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": "BadRequest", "code": 400}),
        ),
    };
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// A collection path: `apiVersion`, namespace (`None` when cluster-wide) and `kind` of its items.
pub struct Collection {
    pub api: String,
    pub namespace: Option<String>,
    pub kind: &'static str,
}

impl Collection {
    /// True when `o` (an object with apiVersion, kind and metadata) belongs to this collection.
    pub fn holds(&self, o: &Value) -> bool {
        o["apiVersion"] == self.api.as_str()
            && o["kind"] == self.kind
            && self.namespace.as_deref().is_none_or(|ns| o["metadata"]["namespace"] == ns)
    }
}

/// Reads a collection path of the kinds the cluster view holds.
pub fn collection(path: &str) -> Result<Collection, String> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (api, rest) = match segments.as_slice() {
        ["api", v, rest @ ..] => (v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return Err(format!("unexpected path {path}")),
    };
    let (namespace, plural) = match rest {
        ["namespaces", ns, plural] => (Some(ns.to_string()), *plural),
        [plural] => (None, *plural),
        _ => return Err(format!("not a collection: {path}")),
    };
    let kind = match (api.as_str(), plural) {
        ("v1", "nodes") => "Node",
        ("v1", "pods") => "Pod",
        ("longhorn.io/v1beta2", "nodes") => "Node",
        ("longhorn.io/v1beta2", "replicas") => "Replica",
        ("longhorn.io/v1beta2", "engines") => "Engine",
        ("longhorn.io/v1beta2", "volumes") => "Volume",
        ("longhorn.io/v1beta2", "settings") => "Setting",
        ("longhorn.io/v1beta2", "instancemanagers") => "InstanceManager",
        // What only `check cluster` reads.
        ("longhorn.io/v1beta2", "backuptargets") => "BackupTarget",
        ("longhorn.io/v1beta2", "recurringjobs") => "RecurringJob",
        ("longhorn.io/v1beta2", "snapshots") => "Snapshot",
        ("storage.k8s.io/v1", "storageclasses") => "StorageClass",
        // What only the storage-network check reads.
        ("apps/v1", "daemonsets") => "DaemonSet",
        // What only `check drain`'s doctor reads.
        ("policy/v1", "poddisruptionbudgets") => "PodDisruptionBudget",
        _ => return Err(format!("unexpected resource {path}")),
    };
    Ok(Collection { api, namespace, kind })
}

/// The answer to a LIST: [`list`], or its [`table`] when `accept` asks for one (the request must
/// then say `includeObject=None`: the confirmation reads no object through a Table).
pub fn respond(items: &[Value], path: &str, query: &str, accept: Option<&str>) -> Result<Value, String> {
    let body = list(items, path, query)?;
    match accept {
        Some(a) if a.contains("as=Table") => {
            if !query.split('&').any(|kv| kv == "includeObject=None") {
                return Err(format!("a Table without includeObject=None: {query}"));
            }
            table(&collection(path)?, &body)
        }
        _ => Ok(body),
    }
}

/// A LIST answer (resourceVersion `999`) from `items`, narrowed by the query's label and
/// `metadata.name` / `spec.nodeName` field selectors; a `resourceVersion` in the query is an error (confirmation
/// reads must be consistent reads).
pub fn list(items: &[Value], path: &str, query: &str) -> Result<Value, String> {
    let c = collection(path)?;
    let mut labels = Vec::new();
    let mut fields = Vec::new();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "labelSelector" => labels = parse_selector(&decode(v))?,
            "fieldSelector" => fields = parse_selector(&decode(v))?,
            "resourceVersion" | "resourceVersionMatch" => {
                return Err(format!("{k} given: not a consistent read"))
            }
            _ => {}
        }
    }
    let selected: Vec<Value> = items
        .iter()
        .filter(|o| c.holds(o))
        .filter(|o| labels.iter().all(|r| r.matches(o["metadata"]["labels"][&r.key].as_str())))
        .filter(|o| {
            fields.iter().all(|r| match r.key.as_str() {
                "metadata.name" => r.matches(o["metadata"]["name"].as_str()),
                "spec.nodeName" => r.matches(o["spec"]["nodeName"].as_str()),
                _ => false,
            })
        })
        .cloned()
        .collect();
    Ok(
        json!({"apiVersion": c.api, "kind": format!("{}List", c.kind), "metadata": {"resourceVersion": "999"}, "items": selected}),
    )
}

/// The Table the API server prints for a list of Longhorn objects: the `Name` column, then the
/// CRD's `additionalPrinterColumns` (simple `.a.b` JSONPaths; a path that finds nothing is null).
pub fn table(c: &Collection, list: &Value) -> Result<Value, String> {
    let columns = printer_columns(c.kind)?;
    let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name", "priority": 0})];
    defs.extend(columns.iter().map(|(name, _)| json!({"name": name, "type": "string", "priority": 0})));
    let rows: Vec<Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            cells.extend(columns.iter().map(|(_, path)| {
                let found = path.trim_start_matches('.').split('.').try_fold(o, |v, k| v.get(k));
                match found {
                    Some(Value::Null) | None => Value::Null,
                    Some(Value::String(s)) => json!(s),
                    Some(other) => json!(other.to_string()),
                }
            }));
            json!({"cells": cells})
        })
        .collect();
    Ok(json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "999"},
              "columnDefinitions": defs, "rows": rows}))
}

/// `(name, jsonPath)` of the printer columns of Longhorn kind `kind` (v1beta2), from the
/// fixture CRDs.
fn printer_columns(kind: &str) -> Result<Vec<(String, String)>, String> {
    const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/crds/longhorn-crds.yaml");
    let text = std::fs::read_to_string(CRDS).map_err(|e| e.to_string())?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| e.to_string())?;
    let crd = docs.iter().find(|d| d["spec"]["names"]["kind"] == kind).ok_or(format!("no CRD for {kind}"))?;
    let version = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "v1beta2"))
        .ok_or(format!("no v1beta2 in the CRD of {kind}"))?;
    Ok(version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (c["name"].as_str().unwrap_or("").to_string(), c["jsonPath"].as_str().unwrap_or("").to_string())
        })
        .collect())
}

/// One selector requirement: the key's value is (or, `negated`, is not) one of `values`; a
/// negated requirement also matches objects without the key, as the API server's does.
pub struct Requirement {
    pub key: String,
    pub values: std::collections::HashSet<String>,
    pub negated: bool,
}

impl Requirement {
    pub fn matches(&self, value: Option<&str>) -> bool {
        value.is_some_and(|v| self.values.contains(v)) != self.negated
    }
}

/// `k=v`, `k==v`, `k!=v` and `k in (a,b)` requirements, comma-separated.
fn parse_selector(s: &str) -> Result<Vec<Requirement>, String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    let req = |k: &str, vals: Vec<&str>, negated| Requirement {
        key: k.trim().to_string(),
        values: vals.into_iter().map(|x| x.trim().to_string()).collect(),
        negated,
    };
    for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((k, v)) = part.split_once(" in ") {
            let v = v
                .trim()
                .strip_prefix('(')
                .and_then(|v| v.strip_suffix(')'))
                .ok_or(format!("bad set in {part}"))?;
            out.push(req(k, v.split(',').collect(), false));
        } else if let Some((k, v)) = part.split_once("!=") {
            out.push(req(k, vec![v], true));
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            out.push(req(k, vec![v], false));
        } else {
            return Err(format!("unsupported selector requirement {part}"));
        }
    }
    Ok(out)
}

/// Percent- and `+`-decoding of a query value.
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8(out).unwrap()
}
