//! `longhorn-guard review`: one AdmissionReview from stdin, the response on stdout, through
//! exactly the code path the server uses.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::admit::{Admitter, WebhookKind};
use crate::cluster::{snapshot, SharedView};
use crate::output::bad_input;
use crate::policy::Policy;

/// Arguments of `longhorn-guard review`.
#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// Cluster snapshot to decide against (a `kubectl get -o json|yaml` List or multi-document YAML).
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_STATE")]
    pub state: PathBuf,
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<PathBuf>,
    /// Which webhook to run the review through.
    #[arg(long, value_enum, default_value = "validate")]
    pub webhook: WebhookKind,
}

/// Exit status: 0 allowed, 1 denied, 2 bad input (reason on stderr).
pub async fn run(args: ReviewArgs) -> ExitCode {
    let policy = match Policy::load(args.policy.as_deref()) {
        Ok(p) => Arc::new(p),
        Err(e) => return bad_input("review", &format!("policy: {e}")),
    };
    let view = match snapshot::load(&args.state) {
        Ok(v) => SharedView::new(v.derive(crate::policy::drain::derivations(), std::time::SystemTime::now())),
        Err(e) => return bad_input("review", &format!("state: {e}")),
    };
    let mut body = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut body) {
        return bad_input("review", &format!("cannot read stdin: {e}"));
    }
    let admitter = Admitter::new(view, policy, None);
    match admitter.admit(args.webhook, &body, Duration::from_secs(5)).await {
        Ok(admitted) => {
            let review = crate::admission::response_review(&admitted.request.uid, &admitted.decision);
            let text = format!("{}\n", serde_json::to_string_pretty(&review).unwrap_or_default());
            crate::check::print_and("review", u8::from(!admitted.decision.allowed), &text)
        }
        Err(e) => bad_input("review", &e.to_string()),
    }
}
