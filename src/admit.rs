//! One admission round trip, shared by the HTTPS server and the offline `review` command:
//! parse the body, decide with the pure policy core, confirm stale allows, log, respond.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::admission::{parse_review, response_review, AdmissionRequest, ReviewError};
use crate::cluster::stats::{self, ConfirmResult};
use crate::cluster::SharedView;
use crate::decision::Decision;
use crate::policy::{self, Policy};

/// Which webhook endpoint a body arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WebhookKind {
    /// `POST /validate`: the drain guard and the replica/settings rules.
    Validate,
    /// `POST /mutate`: the init gate.
    Mutate,
}

impl WebhookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validate => "validate",
            Self::Mutate => "mutate",
        }
    }
}

pub use crate::policy::drain::confirm::{ConfirmFuture, ConfirmOutcome, Confirmer};

/// The outcome of one admission round trip.
#[derive(Debug)]
pub struct Admitted {
    pub request: AdmissionRequest,
    pub decision: Decision,
    /// The response AdmissionReview to send, as JSON bytes.
    pub response: Vec<u8>,
}

impl Admitted {
    /// [`Self::response`] read back as a JSON value (for tests and the offline `review`).
    pub fn response_json(&self) -> Value {
        serde_json::from_slice(&self.response).expect("the response is JSON")
    }
}

/// Everything a decision needs besides the request.
#[derive(Clone)]
pub struct Admitter {
    pub view: SharedView,
    pub policy: Arc<Policy>,
    /// Present in watch mode; absent for snapshots, which never need confirming.
    pub confirmer: Option<Confirmer>,
    /// The longest a confirmation may take (`serve --confirm-timeout`), inside the request's
    /// own deadline; `None`: the deadline alone.
    pub confirm_timeout: Option<Duration>,
}

impl Admitter {
    pub fn new(view: SharedView, policy: Arc<Policy>, confirmer: Option<Confirmer>) -> Self {
        Self { view, policy, confirmer, confirm_timeout: None }
    }

    /// Gives up on a confirmation after `timeout` (a 429 "could not confirm"), whatever the
    /// request's deadline leaves.
    pub fn with_confirm_timeout(mut self, timeout: Duration) -> Self {
        self.confirm_timeout = Some(timeout);
        self
    }

    /// Parses, decides and logs one AdmissionReview body. `deadline` bounds a confirmation
    /// read; when it cannot finish in time the eviction is denied as unconfirmed.
    pub async fn admit(
        &self,
        kind: WebhookKind,
        body: &[u8],
        deadline: Duration,
    ) -> Result<Admitted, ReviewError> {
        let request = parse_review(body)?;
        let now = SystemTime::now();
        let mut decision = self.decide(kind, &request, now);
        if let Some(node) = decision.confirm_node.take() {
            decision = self.confirm(&request, decision.rule, &node, now, deadline).await;
        }
        log_decision(kind, &request, &decision);
        let response = response_review(&request.uid, &decision).to_bytes();
        Ok(Admitted { request, decision, response })
    }

    fn decide(&self, kind: WebhookKind, request: &AdmissionRequest, now: SystemTime) -> Decision {
        let view = self.view.read();
        match kind {
            WebhookKind::Validate => policy::validate(request, &view, &self.policy, now),
            WebhookKind::Mutate => crate::mutate::mutate(request, &view, &self.policy),
        }
    }

    /// Confirms `rule`'s allow on `node` with fresh data, or denies it as unconfirmed.
    async fn confirm(
        &self,
        request: &AdmissionRequest,
        rule: &'static str,
        node: &str,
        now: SystemTime,
        deadline: Duration,
    ) -> Decision {
        // Deletions are confirmed as an eviction is; a denial says what was asked.
        let Some(confirmer) = self.confirmer.as_ref() else {
            return policy::drain::unconfirmed(
                rule,
                node,
                "no API client is configured to confirm it",
                &self.policy,
            );
        };
        // Leave a margin inside the caller's deadline so that a hanging API server still gets
        // the 429 "could not confirm" answer, not the caller's own timeout (a 5xx, which the
        // API server would treat as a webhook failure).
        let margin = (deadline / 10).max(Duration::from_millis(100));
        let budget = deadline.saturating_sub(margin).min(self.confirm_timeout.unwrap_or(Duration::MAX));
        let started = Instant::now();
        let failed =
            |why: &str| (policy::drain::unconfirmed(rule, node, why, &self.policy), ConfirmResult::Failed);
        // The confirmer keeps to `budget` itself (and says why it could not); this timeout,
        // half the margin later, only stops one that does not.
        let backstop = budget + margin / 2;
        let (decision, result) =
            match tokio::time::timeout(backstop, confirmer(node.to_string(), budget)).await {
                Ok(Ok(fresh)) => {
                    let mut d = policy::validate(request, &fresh, &self.policy, now);
                    if d.confirm_node.take().is_some() {
                        failed("the confirmation read was itself stale")
                    } else if let Some(other) = d.details.node.as_deref().filter(|n| *n != node) {
                        // The fresh view holds only `node`'s state: a decision for another node
                        // would rest on data that was never read.
                        failed(&format!("the pod's node changed to {other} while confirming"))
                    } else if d.allowed {
                        (d, ConfirmResult::Allowed)
                    } else {
                        (d, ConfirmResult::Denied)
                    }
                }
                Ok(Err(e)) => failed(&e),
                Err(_) => failed(&format!("no answer within {}ms", backstop.as_millis())),
            };
        let took = started.elapsed();
        stats::global().confirmation(result, took);
        // The confirmation's bodies and view are gone: give their memory back.
        crate::heap::release_soon();
        tracing::debug!(
            node,
            result = result.as_str(),
            took_ms = took.as_millis() as u64,
            "confirmation finished"
        );
        decision
    }
}

/// One structured event per decision: denials, overrides and allows of an unreadable object at
/// WARN with their reason, other allows with a warning or a patch at INFO, the rest at DEBUG.
/// Request-supplied fields are cut to a fixed length (`crate::clip`).
pub fn log_decision(kind: WebhookKind, req: &AdmissionRequest, d: &Decision) {
    use crate::clip::{clip, clip_to, MAX_TEXT};
    let node = d.details.node.as_deref().unwrap_or("");
    let message =
        d.status.as_ref().map(|s| s.message.as_str()).or(d.details.unreadable.as_deref()).unwrap_or("");
    let code = d.status.as_ref().map(|s| s.code).unwrap_or(200);
    macro_rules! event {
        ($level:expr, $msg:literal) => {
            tracing::event!(
                $level,
                uid = %clip(&req.uid),
                user = %clip(&req.user_info.username),
                webhook = kind.as_str(),
                resource = %clip(&req.resource_label()),
                operation = req.operation.as_str(),
                namespace = %clip(req.namespace()),
                name = %clip(req.name()),
                dry_run = req.is_dry_run(),
                rule = d.rule,
                decision = d.outcome(),
                code,
                node = %clip(node),
                volumes = %clip_to(&d.details.volumes.join(","), MAX_TEXT),
                overridden = %clip(d.details.overridden.as_deref().unwrap_or("")),
                warnings = d.warnings.len(),
                // One event, one line: a message's line breaks are joined in the log.
                reason = %clip_to(&message.replace(['\r', '\n'], " "), MAX_TEXT),
                $msg
            )
        };
    }
    if !d.allowed {
        event!(tracing::Level::WARN, "admission denied");
    } else if d.details.overridden.is_some() {
        event!(tracing::Level::WARN, "admission allowed by operator override");
    } else if d.details.unreadable.is_some() {
        event!(tracing::Level::WARN, "admission allowed with an unreadable object");
    } else if !d.warnings.is_empty() || d.patch.is_some() {
        event!(tracing::Level::INFO, "admission allowed");
    } else {
        event!(tracing::Level::DEBUG, "admission allowed");
    }
}
