//! `longhorn-guard serve` as a child process on 127.0.0.1:0 with fresh certificates and JSON
//! logs, for tests of what only the process does (signals, exit status, log lines).

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

/// A running `serve` and its log events, in order.
pub struct ServeChild {
    pub child: Child,
    pub addr: SocketAddr,
    pub client: Arc<rustls::ClientConfig>,
    pub certs: tempfile::TempDir,
    logs: mpsc::UnboundedReceiver<Value>,
}

impl ServeChild {
    /// Starts `serve --listen 127.0.0.1:0 --state SNAPSHOT --tls-dir CERTS ARGS` with JSON logs
    /// and waits for its "serving" line.
    pub async fn start(args: &[&str]) -> Self {
        super::install_provider();
        let certs = tempfile::tempdir().unwrap();
        longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0", "--state", super::SNAPSHOT])
            .arg("--tls-dir")
            .arg(certs.path())
            .args(args)
            .env_remove("LONGHORN_GUARD_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, logs) = mpsc::unbounded_channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let client = super::client_config(&certs.path().join("ca.crt"));
        let mut s = Self { child, addr: "127.0.0.1:0".parse().unwrap(), client, certs, logs };
        let serving = s.logged("serving admission webhooks over HTTPS").await;
        s.addr = serving["addr"].as_str().unwrap().parse().unwrap();
        s
    }

    /// The next log event whose message is `message` (earlier ones are passed over); fails the
    /// test once the process stopped logging without it.
    pub async fn logged(&mut self, message: &str) -> Value {
        loop {
            match self.logs.recv().await {
                Some(v) if v["message"] == message => return v,
                Some(_) => {}
                None => panic!("serve stopped logging before {message:?}"),
            }
        }
    }

    /// Sends SIGTERM, as the kubelet does.
    pub fn terminate(&self) {
        let kill = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(kill.success());
    }

    /// The exit status, waiting at most [`super::WAIT`] for it.
    pub async fn exit_code(&mut self) -> Option<i32> {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            assert!(t0.elapsed() < super::WAIT, "serve did not exit");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
