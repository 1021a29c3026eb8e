//! `longhorn-guard lint`: the replica and settings rules over manifests, without a cluster.
//!
//! Every object is checked by the webhook's own [`crate::policy::validate`] with a synthetic
//! CREATE request, against a view holding only the Settings found in the same input (so a
//! Volume with `numberOfReplicas: 0` resolves `default-replica-count` when the input has it).

pub mod source;
mod targets;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use serde::Serialize;

use crate::admission::{AdmissionRequest, GroupVersionResource};
use crate::cluster::{ClusterView, Object, ObjectKind, Source};
use crate::decision::Decision;
use crate::policy::replicas::PREFIX;
use crate::policy::{self, Policy};
pub use source::{Input, InputError};
use targets::{classify, flatten, str_at, Target};

/// Arguments of `longhorn-guard lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: LintFormat,
    /// Files or folders of manifests (YAML, JSON, Lists, `helm template` output, Helm values);
    /// `-` reads stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
}

/// How serious a finding is.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The webhook would allow with this warning.
    Warning,
    /// The webhook would deny (`replicas.action: deny`): exit 1.
    Deny,
    /// The input cannot be read or the object is not valid: exit 2.
    Error,
}

/// One line of lint output.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    /// 1-based; 0 when unknown (an unreadable file).
    pub line: usize,
    pub kind: String,
    pub name: String,
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    /// `path:line: kind/name: message`, with `denied: ` / `error: ` before deny-level and
    /// invalid-object messages. Unreadable input has no kind/name: `path[:line]: error: reason`.
    pub fn text(&self) -> String {
        let tag = match self.severity {
            Severity::Warning => "",
            Severity::Deny => "denied: ",
            Severity::Error => "error: ",
        };
        let at = if self.line > 0 { format!("{}:{}", self.path, self.line) } else { self.path.clone() };
        if self.kind.is_empty() {
            format!("{at}: {tag}{}", self.message)
        } else {
            format!("{at}: {}/{}: {tag}{}", self.kind, self.name, self.message)
        }
    }
}

/// Everything one lint run found, in input order.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Inputs read (files, stdin).
    pub inputs: usize,
}

impl Report {
    /// 2 when any input or object was unreadable, else 1 when a deny-level finding exists,
    /// else 0.
    pub fn exit_code(&self) -> u8 {
        match self.findings.iter().map(|f| f.severity).max() {
            Some(Severity::Error) => 2,
            Some(Severity::Deny) => 1,
            _ => 0,
        }
    }

    /// The text output: one line per finding.
    pub fn text(&self) -> String {
        self.findings.iter().map(|f| f.text() + "\n").collect()
    }

    /// The JSON output: an array of `{path,line,kind,name,severity,message}`, pretty-printed.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(&self.findings).unwrap_or_else(|_| "[]".into()) + "\n"
    }

    fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }
}

/// Runs the command. Exit 0: nothing or only warnings; 1: a deny-level finding; 2: unreadable
/// input or policy.
pub fn run(args: LintArgs) -> ExitCode {
    let policy = match Policy::load(args.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::output::bad_input("lint", &format!("policy: {e}")),
    };
    let report = lint_paths(&args.paths, &policy, &mut std::io::stdin());
    let out = match args.format {
        LintFormat::Text => report.text(),
        LintFormat::Json => report.json(),
    };
    if let Err(e) = crate::output::stdout(&out) {
        return crate::output::bad_input("lint", &e);
    }
    crate::stderr_line!(
        "longhorn-guard lint: {} input(s), {} warning(s), {} denied, {} error(s)",
        report.inputs,
        report.count(Severity::Warning),
        report.count(Severity::Deny),
        report.count(Severity::Error)
    );
    ExitCode::from(report.exit_code())
}

/// Lints files, folders and `-` (read from `stdin`).
pub fn lint_paths(paths: &[PathBuf], policy: &Policy, stdin: &mut dyn std::io::Read) -> Report {
    let (inputs, errors) = source::collect(paths, stdin);
    let mut report = lint_inputs(&inputs, policy);
    report.findings.splice(0..0, errors.into_iter().map(input_error));
    report
}

fn input_error(e: InputError) -> Finding {
    Finding {
        path: e.path,
        line: e.line.unwrap_or(0),
        kind: String::new(),
        name: String::new(),
        severity: Severity::Error,
        message: e.reason,
    }
}

/// Lints already-read inputs.
pub fn lint_inputs(inputs: &[Input], policy: &Policy) -> Report {
    let mut findings = Vec::new();
    let mut targets = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        match source::documents(input) {
            Ok(docs) => {
                for doc in docs {
                    let mut items = Vec::new();
                    flatten(&doc.value, None, &mut items);
                    for (value, anchor) in items {
                        classify(i, input, &doc, value, anchor, &mut targets, &mut findings);
                    }
                }
            }
            Err(e) => findings.push(input_error(e)),
        }
    }
    // A view holding the Settings of every input (the last one of a name wins).
    let global =
        ClusterView::from_objects(Source::Direct, setting_objects(targets.iter()), SystemTime::now());
    // Each input's lines, split once: every finding looks up the line of its field.
    let lines: Vec<source::Lines<'_>> = inputs.iter().map(|i| source::Lines::new(&i.text)).collect();
    let mut own: Option<(usize, ClusterView)> = None;
    for t in &targets {
        // Settings of the object's own input win over those of other inputs.
        if own.as_ref().is_none_or(|(i, _)| *i != t.input) {
            let mut view = global.clone();
            for o in setting_objects(targets.iter().filter(|x| x.input == t.input)) {
                view.upsert(o, SystemTime::now());
            }
            own = Some((t.input, view));
        }
        let view = own.as_ref().map(|(_, v)| v).unwrap_or(&global);
        let decision = policy::validate(&request(t), view, policy, SystemTime::now());
        findings.extend(decision_findings(t, &decision, &lines[t.input]));
    }
    findings.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    Report { findings, inputs: inputs.len() }
}

fn setting_objects<'a>(targets: impl Iterator<Item = &'a Target>) -> Vec<Object> {
    targets
        .filter(|t| t.resource.1 == "settings")
        .filter_map(|t| Object::from_value(ObjectKind::Setting, t.object.clone()).ok())
        .collect()
}

/// The CREATE request the API server would send for the target.
fn request(t: &Target) -> AdmissionRequest {
    let version = str_at(&t.object, "/apiVersion").rsplit('/').next().unwrap_or("").to_string();
    let resource =
        GroupVersionResource { group: t.resource.0.into(), version, resource: t.resource.1.into() };
    let kind = str_at(&t.object, "/kind").to_string();
    AdmissionRequest::dry_run_create("lint", "longhorn-guard-lint", resource, &kind, t.object.clone())
}

/// Findings for one decision, each placed on the line of its field.
fn decision_findings(t: &Target, d: &Decision, lines: &source::Lines<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |severity: Severity, field_key: Option<&str>, message: String| {
        let key = t.key.as_deref().or(field_key);
        let line = key
            .and_then(|k| source::find_key_line(lines, t.first, t.last, k, t.anchor.as_deref()))
            .unwrap_or(t.first);
        out.push(Finding {
            path: t.path.clone(),
            line,
            kind: t.kind.clone(),
            name: t.name.clone(),
            severity,
            message,
        });
    };
    if let Some(st) = d.status.as_ref().filter(|_| !d.allowed) {
        if d.rule == "bad-request" {
            let why = st.message.rsplit_once("malformed: ").map(|(_, w)| w).unwrap_or(&st.message);
            add(Severity::Error, None, format!("not a valid {}: {why}", t.kind));
        } else if st.causes.is_empty() {
            add(Severity::Deny, None, tidy(t, &st.message));
        } else {
            for c in &st.causes {
                add(Severity::Deny, c.field.rsplit('.').next(), tidy(t, &c.message));
            }
        }
    }
    for w in &d.warnings {
        let key = if w.contains("strict-local") {
            "dataLocality"
        } else if t.resource.1 == "settings" {
            "value"
        } else {
            "numberOfReplicas"
        };
        add(Severity::Warning, Some(key), tidy(t, w));
    }
    out
}

/// Drops the `longhorn-guard: ` prefix, and the `volume NAME: ` / `storageclass NAME: `
/// subject the output line already names.
fn tidy(t: &Target, message: &str) -> String {
    let m = message.strip_prefix(PREFIX).unwrap_or(message);
    if t.kind != "HelmValues" && (m.starts_with("volume ") || m.starts_with("storageclass ")) {
        if let Some((_, rest)) = m.split_once(": ") {
            return rest.to_string();
        }
    }
    m.to_string()
}
