//! `longhorn-guard gate --api off` as a real process over real files that change while it waits:
//! the downward-API annotations file (kubelet format) and a stand-in for /sys/class/net.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::Duration;

use serde_json::{json, Value};

const STATUS: &str = "k8s.v1.cni.cncf.io/network-status";
const LEGACY: &str = "k8s.v1.cni.cncf.io/networks-status";
const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const REQUEST: &str = r#"[{"namespace": "kube-system", "name": "storage-net", "interface": "lhnet1"}]"#;

struct Pod {
    dir: tempfile::TempDir,
}

impl Pod {
    /// A pod directory with the annotations file (only the request annotation) and an empty
    /// /sys/class/net stand-in.
    fn new() -> Self {
        let pod = Self { dir: tempfile::tempdir().unwrap() };
        std::fs::create_dir(pod.net()).unwrap();
        pod.write_annotations(&[(NETWORKS, REQUEST)]);
        pod
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("annotations")
    }

    fn net(&self) -> PathBuf {
        self.dir.path().join("net")
    }

    fn add_interface(&self, name: &str) {
        std::fs::create_dir(self.net().join(name)).unwrap();
    }

    /// Writes the file the way the kubelet does: sorted `key=%q` lines, replaced atomically.
    fn write_annotations(&self, pairs: &[(&str, &str)]) {
        let mut pairs = pairs.to_vec();
        pairs.sort();
        let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", go_quote(v))).collect();
        let tmp = self.dir.path().join(".annotations.tmp");
        std::fs::write(&tmp, text.join("\n")).unwrap();
        std::fs::rename(&tmp, self.file()).unwrap();
    }

    fn spawn(&self, networks: &str, timeout: &str) -> Child {
        gate_command(&[
            "--networks",
            networks,
            "--timeout",
            timeout,
            "--poll-interval",
            "100ms",
            "--annotations-file",
            self.file().to_str().unwrap(),
            "--sys-class-net",
            self.net().to_str().unwrap(),
            "--api",
            "off",
        ])
        .spawn()
        .unwrap()
    }
}

fn gate_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_longhorn-guard"));
    cmd.arg("gate")
        .args(args)
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .env_remove("LONGHORN_GUARD_GATE_NETWORKS")
        .env_remove("LONGHORN_GUARD_GATE_TIMEOUT")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Go's `%q` for the characters these tests use.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Multus' pretty-printed status: each element indented by 4 spaces, joined with ",".
fn multus_status(entries: &[Value]) -> String {
    let parts: Vec<String> = entries
        .iter()
        .map(|e| {
            let mut buf = Vec::new();
            let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
            serde::Serialize::serialize(e, &mut ser).unwrap();
            String::from_utf8(buf).unwrap()
        })
        .collect();
    format!("[{}]", parts.join(","))
}

fn default_net() -> Value {
    json!({"name": "k8s-pod-network", "ips": ["10.52.2.9"], "default": true, "dns": {}})
}

fn storage_net(name: &str, ips: Value) -> Value {
    json!({"name": name, "interface": "lhnet1", "ips": ips, "mac": "02:59:e5:d4:ae:ea", "dns": {}})
}

fn finish(child: Child) -> (i32, String) {
    let Output { status, stderr, .. } = child.wait_with_output().unwrap();
    (status.code().unwrap_or(-1), String::from_utf8_lossy(&stderr).into_owned())
}

fn still_waiting(child: &mut Child) {
    assert!(child.try_wait().unwrap().is_none(), "the gate exited before the network was ready");
}

#[test]
fn annotation_appearing_after_a_delay_succeeds_with_the_ip() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    let mut child = pod.spawn("kube-system/storage-net@lhnet1", "20s");
    sleep(Duration::from_millis(600));
    still_waiting(&mut child);
    let status =
        multus_status(&[default_net(), storage_net("kube-system/storage-net", json!(["192.168.100.12"]))]);
    pod.write_annotations(&[(NETWORKS, REQUEST), (STATUS, &status)]);
    let (code, log) = finish(child);
    assert_eq!(code, 0, "{log}");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one log line: {log}");
    assert!(
        lines[0].contains(&format!(
            "storage network ready: kube-system/storage-net on lhnet1 with IP 192.168.100.12 (from {STATUS}, read from {})",
            pod.file().display()
        )),
        "{log}"
    );
}

#[test]
fn the_real_multus_value_from_the_fixture_is_accepted() {
    let fixture =
        format!("{}/../shared/fixtures/longhorn/multus-network-status-good.json", env!("CARGO_MANIFEST_DIR"));
    let f: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    pod.write_annotations(&[(NETWORKS, REQUEST), (STATUS, f["rawAnnotationString"].as_str().unwrap())]);
    let child = pod.spawn(
        r#"[{"namespace": "harvester-system", "name": "storagenetwork-svrwv", "interface": "lhnet1"}]"#,
        "5s",
    );
    let (code, log) = finish(child);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("harvester-system/storagenetwork-svrwv on lhnet1 with IP 192.168.100.12"), "{log}");
}

#[test]
fn annotation_never_appearing_fails_at_the_timeout_with_the_reason() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    let mut child = pod.spawn("kube-system/storage-net@lhnet1", "2s");
    sleep(Duration::from_millis(500));
    still_waiting(&mut child);
    let (code, log) = finish(child);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!(
            "storage network kube-system/storage-net@lhnet1 not ready after 2s: annotation {STATUS} is absent (and legacy {LEGACY} too)"
        )),
        "{log}"
    );
    assert!(
        log.contains("Longhorn uses the pod IP for this node's replicas")
            && log.contains("rebuilds towards this node stall at 0%"),
        "{log}"
    );
    assert!(
        log.contains(
            "Failing the pod; Longhorn recreates it, and the new pod gets the network once Multus is ready"
        ),
        "{log}"
    );
}

#[test]
fn sigterm_stops_a_waiting_gate_at_once() {
    // As PID 1 of its container the gate gets no default signal handling: it must handle
    // SIGTERM itself, or a pod deleted while it waits takes its whole grace period.
    let pod = Pod::new();
    let mut child = pod.spawn("kube-system/storage-net@lhnet1", "60s");
    sleep(Duration::from_millis(500));
    still_waiting(&mut child);
    let started = std::time::Instant::now();
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let (code, log) = finish(child);
    assert_eq!(code, 1, "{log}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(log.contains("asked to stop before the storage network was ready"), "{log}");
}

#[test]
fn legacy_key_only_succeeds() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    let status =
        multus_status(&[default_net(), storage_net("kube-system/storage-net", json!(["192.168.100.7"]))]);
    let mut child = pod.spawn("kube-system/storage-net@lhnet1", "20s");
    sleep(Duration::from_millis(300));
    still_waiting(&mut child);
    pod.write_annotations(&[(NETWORKS, REQUEST), (LEGACY, &status)]);
    let (code, log) = finish(child);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains(&format!("with IP 192.168.100.7 (from {LEGACY}")), "{log}");
}

#[test]
fn malformed_json_is_logged_once_and_times_out() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    pod.write_annotations(&[
        (NETWORKS, REQUEST),
        (STATUS, "[{\"name\": \"kube-system/storage-net\", \"ips\": ["),
    ]);
    let (code, log) = finish(pod.spawn("kube-system/storage-net@lhnet1", "1500ms"));
    assert_eq!(code, 1, "{log}");
    assert_eq!(log.matches("waiting for Multus to rewrite it").count(), 1, "logged once: {log}");
    let last = log.lines().last().unwrap();
    assert!(
        last.contains(&format!(
            "not ready after 1s: annotation {STATUS} is not a JSON list of network statuses: "
        )),
        "{log}"
    );
}

#[test]
fn another_network_listed_but_not_ours_times_out() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    let status = multus_status(&[default_net(), storage_net("kube-system/other-net", json!(["10.9.9.9"]))]);
    pod.write_annotations(&[(NETWORKS, REQUEST), (STATUS, &status)]);
    let (code, log) = finish(pod.spawn("kube-system/storage-net@lhnet1", "1s"));
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!(
            "network kube-system/storage-net is not listed in annotation {STATUS} (listed: k8s-pod-network, kube-system/other-net)"
        )),
        "{log}"
    );
}

#[test]
fn listed_without_ip_times_out() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    let status = multus_status(&[default_net(), storage_net("kube-system/storage-net", json!([]))]);
    pod.write_annotations(&[(NETWORKS, REQUEST), (STATUS, &status)]);
    let (code, log) = finish(pod.spawn("kube-system/storage-net@lhnet1", "1s"));
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!("network kube-system/storage-net is listed in annotation {STATUS} with no IP")),
        "{log}"
    );
}

#[test]
fn missing_interface_times_out_naming_it_and_a_late_interface_succeeds() {
    let status =
        multus_status(&[default_net(), storage_net("kube-system/storage-net", json!(["192.168.100.12"]))]);
    let pod = Pod::new();
    pod.write_annotations(&[(NETWORKS, REQUEST), (STATUS, &status)]);
    let (code, log) = finish(pod.spawn("kube-system/storage-net@lhnet1", "1s"));
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("interface lhnet1 of network kube-system/storage-net does not exist in the pod (/sys/class/net/lhnet1 is missing)"),
        "{log}"
    );

    let mut child = pod.spawn("kube-system/storage-net@lhnet1", "20s");
    sleep(Duration::from_millis(400));
    still_waiting(&mut child);
    pod.add_interface("lhnet1");
    let (code, log) = finish(child);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("on lhnet1 with IP 192.168.100.12"), "{log}");
}

#[test]
fn unreadable_file_times_out_naming_the_file() {
    let pod = Pod::new();
    std::fs::remove_file(pod.file()).unwrap();
    let (code, log) = finish(pod.spawn("kube-system/storage-net@lhnet1", "1s"));
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!(
            "the pod's annotations could not be read (cannot read {}",
            pod.file().display()
        )),
        "{log}"
    );
}

#[test]
fn bad_arguments_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("annotations");
    let f = file.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--networks", "a/b/c", "--api", "off", "--annotations-file", f],
            "is not of the form [namespace/]name[@interface]",
        ),
        (&["--networks", "storage-net", "--api", "off", "--annotations-file", f], "has no namespace"),
        (&["--networks", "", "--api", "off", "--annotations-file", f], "names no network"),
        (&["--networks", "a/b", "--timeout", "0s", "--api", "off"], "must be longer than 0s"),
        (&["--networks", "a/b", "--poll-interval", "soon", "--api", "off"], "invalid duration"),
        (&["--networks", "a/b", "--timeout", "18446744073709551615", "--api", "off"], "must be at most 1h"),
        (&["--networks", "a/b", "--timeout", "2h", "--api", "off"], "must be at most 1h"),
        (&["--networks", "a/b", "--poll-interval", "99999999999h", "--api", "off"], "--poll-interval"),
        (&["--api", "off"], "--networks"),
        (&["--networks", "a/b"], "--api auto needs --pod-name/POD_NAME and --pod-namespace/POD_NAMESPACE"),
    ];
    for (args, want) in cases {
        let out = gate_command(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn networks_from_env_and_namespace_from_pod_namespace() {
    let pod = Pod::new();
    pod.add_interface("lhnet1");
    let status = multus_status(&[storage_net("longhorn-system/storage-net", json!(["192.168.1.5"]))]);
    pod.write_annotations(&[(NETWORKS, REQUEST), (STATUS, &status)]);
    let out = gate_command(&[
        "--api",
        "off",
        "--annotations-file",
        pod.file().to_str().unwrap(),
        "--sys-class-net",
        pod.net().to_str().unwrap(),
    ])
    .env("LONGHORN_GUARD_GATE_NETWORKS", "storage-net@lhnet1")
    .env("POD_NAMESPACE", "longhorn-system")
    .output()
    .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("longhorn-system/storage-net on lhnet1 with IP 192.168.1.5"), "{log}");
}
