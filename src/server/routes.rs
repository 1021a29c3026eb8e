//! The axum routes: the two webhooks, the probes and `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::FutureExt as _;

use super::body::{read_body, BodyError};
use super::AppState;
use crate::admit::WebhookKind;
use crate::clip::{clip_to, MAX_TEXT};

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/validate", post(|State(app), req| webhook(app, WebhookKind::Validate, req)))
        .route("/mutate", post(|State(app), req| webhook(app, WebhookKind::Mutate, req)))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(no_route)
        .method_not_allowed_fallback(no_route)
        .with_state(state)
}

/// The routes, for the answer to a request that matches none.
const ROUTES: &str = "POST /validate, POST /mutate, GET /healthz, GET /readyz, GET /metrics";

/// 404 for an unknown path, 405 for a known path with another method, each with one line.
async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let path = uri.path();
    let known = ROUTES.split(", ").any(|r| r.ends_with(&format!(" {path}")));
    let (code, what) = if known {
        (StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
    } else {
        (StatusCode::NOT_FOUND, "no such route")
    };
    let path = clip_to(path, 200);
    text(code, &format!("{what}: {method} {path}; longhorn-guard serves {ROUTES}"))
}

/// One webhook request, its head read in place (no copy of the headers or the query).
async fn webhook(app: Arc<AppState>, kind: WebhookKind, req: Request) -> Response {
    let started = Instant::now();
    let _in_flight = app.metrics.in_flight();
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    let deadline = request_deadline(app.limits.request_timeout, parts.uri.query());
    let work = async {
        let read = read_body(headers, body, app.limits.max_body_bytes, &app.bodies).await;
        let (bytes, budget) = read.map_err(|e| match e {
            BodyError::TooLarge => {
                let msg = format!(
                    "request body is larger than {} bytes; raise --max-body-bytes if the API server really sends this much",
                    app.limits.max_body_bytes
                );
                (StatusCode::PAYLOAD_TOO_LARGE, msg)
            }
            BodyError::Read(e) => (StatusCode::BAD_REQUEST, format!("cannot read the request body: {e}")),
        })?;
        let remaining = deadline.saturating_sub(started.elapsed());
        let decide = async {
            #[cfg(test)]
            tests::panic_hook(&bytes);
            app.admitter.admit(kind, &bytes, remaining).await
        };
        // A panic while deciding answers this request 500 (the API server then applies the
        // webhook's failurePolicy); the connection and the server carry on. (Gap: tower-http's
        // `CatchPanic` sits outside the handler: no webhook in the log line, no latency.)
        match std::panic::AssertUnwindSafe(decide).catch_unwind().await {
            Ok(Ok(admitted)) => Ok((admitted, budget)),
            Ok(Err(e)) => Err((StatusCode::BAD_REQUEST, e.to_string())),
            Err(panic) => {
                app.metrics.server.panics.inc();
                let what = crate::clip::panic_text(panic.as_ref());
                tracing::error!(webhook = kind.as_str(), panic = %clip_to(&what, MAX_TEXT), "decision panicked; answering 500");
                Err((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error while deciding (logged as \"decision panicked\"); the API server applies the webhook's failurePolicy".to_string(),
                ))
            }
        }
    };
    let result = match tokio::time::timeout(deadline, work).await {
        Ok(r) => r,
        Err(_) => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no decision within the request deadline of {}ms", deadline.as_millis()),
        )),
    };
    match result {
        // The body's share of the budget is held until its parsed form is gone (end of arm).
        Ok((admitted, _budget)) => {
            let req = &admitted.request;
            app.metrics.admission(
                kind.as_str(),
                &req.resource_label(),
                req.operation.as_str(),
                admitted.decision.outcome(),
                started.elapsed(),
            );
            ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], admitted.response)
                .into_response()
        }
        Err((code, reason)) => {
            app.metrics.observe(kind.as_str(), started.elapsed());
            app.metrics.http_error(code.as_u16());
            if code != StatusCode::INTERNAL_SERVER_ERROR {
                tracing::warn!(webhook = kind.as_str(), code = code.as_u16(), reason = %clip_to(&reason, MAX_TEXT), "bad admission request");
            }
            let mut resp = text(code, &clip_to(&reason, MAX_TEXT));
            if code == StatusCode::PAYLOAD_TOO_LARGE {
                resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            resp
        }
    }
}

/// The per-request deadline: `--request-timeout`, or less when the API server's
/// `?timeout=` is shorter, minus a margin (a fifth of it, at most 2 s) so the answer arrives
/// before the API server gives up. (Gap: tower-http's `TimeoutLayer` answers an empty 408 at one
/// fixed deadline; this follows the API server's `?timeout=`, and the 503 says why.)
pub fn request_deadline(configured: Duration, query: Option<&str>) -> Duration {
    let timeout = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("timeout=")));
    // A Go `time.Duration` as the API server writes it (`10s`, `1m30s`); a bare number is not one.
    let Some(api) = timeout.filter(|t| *t != "0").and_then(|t| humantime::parse_duration(t).ok()) else {
        return configured;
    };
    let margin = (api / 5).min(Duration::from_secs(2));
    configured.min(api.saturating_sub(margin))
}

async fn healthz() -> Response {
    text(StatusCode::OK, "ok")
}

async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    if *app.stage.borrow() != super::Stage::Serving {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    match app.observe_readiness() {
        super::readiness::Verdict::Ready => text(StatusCode::OK, "ok"),
        super::readiness::Verdict::NotSynced => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "cluster view not synced yet: waiting for the initial list of every watched kind",
        ),
        super::readiness::Verdict::Proving => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "cluster view synced, not yet proven current: waiting for its first proof (a probe its watches have reached) so that evictions are answered from it",
        ),
        super::readiness::Verdict::Unready(why) => text(StatusCode::SERVICE_UNAVAILABLE, &why),
    }
}

async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    let mut body = String::with_capacity(8192);
    app.observe_readiness();
    app.metrics.encode(&mut body);
    if let Some(checks) = &app.checks {
        let status = checks.lock().unwrap_or_else(|p| p.into_inner()).clone();
        crate::exposition::append(&mut body, status);
    }
    ([(header::CONTENT_TYPE, HeaderValue::from_static(crate::exposition::CONTENT_TYPE))], body)
        .into_response()
}

fn text(code: StatusCode, msg: &str) -> Response {
    let mut body = msg.replace(['\n', '\r'], " ");
    body.push('\n');
    (code, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], body)
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use std::path::Path;
    use tower::ServiceExt as _;

    /// A request with this uid panics inside the guarded decision (test builds only).
    const PANIC_UID: &str = "panic-in-decision";

    pub(super) fn panic_hook(body: &[u8]) {
        if body.windows(PANIC_UID.len()).any(|w| w == PANIC_UID.as_bytes()) {
            panic!("test hook: deciding {PANIC_UID}");
        }
    }

    fn app() -> (Arc<AppState>, tempfile::TempDir) {
        let snapshot =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/cluster/snapshot-three-nodes.json");
        let view =
            crate::cluster::SharedView::new(crate::cluster::snapshot::load(Path::new(snapshot)).unwrap());
        let admitter = crate::admit::Admitter::new(view, Arc::new(crate::policy::Policy::default()), None);
        let (metrics, readiness, dir) =
            crate::server::metrics::tests::metrics_over(admitter.view.clone(), admitter.policy.clone());
        let app = AppState {
            admitter,
            checks: None,
            metrics,
            limits: Default::default(),
            stage: tokio::sync::watch::channel(crate::server::Stage::Serving).1,
            bodies: crate::server::body::BodyBudget::new(crate::server::Limits::default().max_body_bytes),
            readiness,
        };
        (Arc::new(app), dir)
    }

    async fn call(router: &Router, method: &str, path: &str, body: Vec<u8>) -> (StatusCode, String) {
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn a_panic_while_deciding_is_a_counted_500_for_that_request_only() {
        let (app, _certs) = app();
        let router = router(app);
        let fixture = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/fixtures/admission/eviction-create.json"
        ))
        .unwrap();
        let mut review: serde_json::Value = serde_json::from_slice(&fixture).unwrap();
        review["request"]["uid"] = PANIC_UID.into();
        let (status, body) = call(&router, "POST", "/validate", serde_json::to_vec(&review).unwrap()).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert!(body.contains("failurePolicy"), "{body}");
        // The next request is decided as usual.
        let (status, body) = call(&router, "POST", "/validate", fixture).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (_, metrics) = call(&router, "GET", "/metrics", vec![]).await;
        assert!(metrics.contains("\nlonghorn_guard_panics_total 1\n"), "{metrics}");
        assert!(metrics.contains("longhorn_guard_http_errors_total{code=\"500\"} 1"), "{metrics}");
    }

    #[test]
    fn deadline_honours_a_shorter_api_server_timeout() {
        let eight = Duration::from_secs(8);
        assert_eq!(request_deadline(eight, None), eight);
        assert_eq!(request_deadline(eight, Some("timeout=10s")), eight);
        assert_eq!(request_deadline(eight, Some("timeout=30s")), eight);
        assert_eq!(request_deadline(eight, Some("a=b&timeout=5s")), Duration::from_secs(4));
        // Parsed, not fallen back to the configured deadline: a longer one shows the margin.
        let long = Duration::from_secs(200);
        assert_eq!(request_deadline(long, Some("timeout=10s")), eight);
        assert_eq!(request_deadline(long, Some("timeout=1m30s")), Duration::from_secs(88));
        assert_eq!(request_deadline(eight, Some("timeout=500ms")), Duration::from_millis(400));
        assert_eq!(request_deadline(eight, Some("timeout=1.5s")), Duration::from_millis(1200));
        for not_go in ["bogus", "", "0", "3"] {
            assert_eq!(request_deadline(eight, Some(&format!("timeout={not_go}"))), eight, "{not_go}");
        }
    }
}
