//! The gate policy's container and volume, evaluated: the CEL literals of its JSONPatch
//! expression are read back (a reader for exactly the forms `gate_policy::cel::literal` writes:
//! typed objects, maps, lists, `+`, `size(variables.x) > 0 ? [..] : []`, strings, numbers,
//! booleans, `variables.x` and `variables.x[0]`) with the variables a pod gives, and must equal
//! the container and volume the webhook's patch adds to that pod, for every fixture pod the
//! webhook gates. (The reading of the annotation itself is checked on a real API server:
//! e2e/gate-policy.sh.)

use std::collections::BTreeMap;

use longhorn_guard::admission::parse_review;
use longhorn_guard::cluster::{ClusterView, Source};
use longhorn_guard::mutate::gate_policy::render;
use longhorn_guard::mutate::mutate;
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    vars: &'a BTreeMap<&'static str, Value>,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, t: &str) {
        assert!(self.eat(t), "expected {t:?} at {:?}", self.rest());
    }
    fn rest(&self) -> String {
        String::from_utf8_lossy(&self.s[self.i..(self.i + 60).min(self.s.len())]).into_owned()
    }
    fn ident(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"._".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        String::from_utf8(self.s[start..self.i].to_vec()).unwrap()
    }
    /// sum := term ('+' term)*   (lists only)
    fn expr(&mut self) -> Value {
        let mut v = self.term();
        while self.eat("+") {
            let more = self.term();
            v.as_array_mut().expect("+ on lists only").extend(more.as_array().unwrap().iter().cloned());
        }
        v
    }
    fn term(&mut self) -> Value {
        self.ws();
        match self.s[self.i] {
            b'"' => {
                let mut de = serde_json::Deserializer::from_slice(&self.s[self.i..]).into_iter::<Value>();
                let v = de.next().unwrap().unwrap();
                self.i += de.byte_offset();
                v
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                while !self.eat("]") {
                    items.push(self.expr());
                    self.eat(",");
                }
                Value::Array(items)
            }
            b'{' => {
                self.i += 1;
                self.fields(true)
            }
            b'(' => {
                // (size(variables.X) > 0 ? A : B)
                self.i += 1;
                self.expect("size(");
                let name = self.ident();
                self.expect(")");
                self.expect(">");
                self.expect("0");
                self.expect("?");
                let yes = self.expr();
                self.expect(":");
                let no = self.expr();
                self.expect(")");
                let var = &self.vars[name.strip_prefix("variables.").unwrap()];
                if var.as_array().unwrap().is_empty() {
                    no
                } else {
                    yes
                }
            }
            c if c.is_ascii_digit() => Value::from(self.ident().parse::<i64>().unwrap()),
            _ => {
                let id = self.ident();
                match id.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    v if v.starts_with("variables.") => {
                        let var = self.vars[v.strip_prefix("variables.").unwrap()].clone();
                        if self.eat("[0]") {
                            var[0].clone()
                        } else {
                            var
                        }
                    }
                    // A typed object literal: `Object.spec.initContainers{...}`.
                    t if t.starts_with("Object.") => {
                        self.expect("{");
                        self.fields(false)
                    }
                    other => panic!("not a literal: {other:?} at {:?}", self.rest()),
                }
            }
        }
    }
    /// The fields of `{...}` after its brace: quoted keys in a map, identifiers in an object.
    fn fields(&mut self, map: bool) -> Value {
        let mut out = serde_json::Map::new();
        while !self.eat("}") {
            let key = if map { self.term().as_str().unwrap().to_string() } else { self.ident() };
            self.expect(":");
            out.insert(key, self.expr());
            self.eat(",");
        }
        Value::Object(out)
    }
}

/// The `value` of the `JSONPatch{...}` whose path is `path`, read with `vars`.
fn patch_value(expr: &str, path: &str, vars: &BTreeMap<&'static str, Value>) -> Value {
    let at = format!("path: \"{path}\", value: ");
    let start = expr.find(&at).unwrap_or_else(|| panic!("no {path}")) + at.len();
    let mut r = Reader { s: expr.as_bytes(), i: start, vars };
    r.expr()
}

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/admission");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("pod-create-"))
        .collect();
    out.sort();
    out
}

#[test]
fn the_policys_container_and_volume_are_the_webhooks_for_every_fixture_pod() {
    let mut policy = Policy::default();
    policy.gate.image = "registry.local/guard@sha256:0123".into();
    policy.gate.timeout = std::time::Duration::from_millis(90_500);
    let [map, _] = render(&policy.gate).unwrap();
    let expr = map["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap();
    let var = |n: &str| {
        let e = map["spec"]["variables"].as_array().unwrap().iter().find(|v| v["name"] == n).unwrap();
        serde_json::from_str::<Value>(e["expression"].as_str().unwrap()).unwrap()
    };
    let mut gated = 0;
    for path in fixtures() {
        let req = parse_review(&std::fs::read(&path).unwrap()).unwrap();
        let d = mutate(&req, &ClusterView::new(Source::Direct), &policy);
        let Some(patch) = d.patch.as_ref() else { continue };
        let mut pod: Value = (**req.object.as_ref().unwrap()).clone();
        let before = pod.clone();
        json_patch::patch(&mut pod, patch).unwrap();
        let container = pod["spec"]["initContainers"].as_array().unwrap().last().unwrap().clone();
        let volume = pod["spec"]["volumes"].as_array().unwrap().last().unwrap().clone();
        // The pod's own parts, as the policy's variables hold them on the API server.
        let sa: Vec<Value> = before["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| {
                c["volumeMounts"]
                    .as_array()?
                    .iter()
                    .find(|m| m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount")
            })
            .map(|m| m["name"].clone())
            .collect();
        let vars = BTreeMap::from([
            ("image", var("image")),
            ("timeout", var("timeout")),
            ("networks", container["args"][2].clone()),
            ("serviceAccountMounts", Value::Array(sa)),
        ]);
        assert_eq!(vars["image"], json!("registry.local/guard@sha256:0123"));
        assert_eq!(vars["timeout"], json!("1m30s500ms"));
        assert_eq!(patch_value(expr, "/spec/initContainers/-", &vars), container, "{}", path.display());
        assert_eq!(patch_value(expr, "/spec/volumes/-", &vars), volume, "{}", path.display());
        // Without a token mount the policy's container has none, as the webhook's.
        let mut none = vars.clone();
        none.insert("serviceAccountMounts", json!([]));
        let c = patch_value(expr, "/spec/initContainers/-", &none);
        assert_eq!(c["volumeMounts"].as_array().unwrap().len(), 1);
        gated += 1;
    }
    assert!(gated >= 3, "only {gated} fixture pods are gated");
}
