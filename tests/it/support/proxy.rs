//! A TCP proxy on 127.0.0.1:0 in front of several API servers, as a Service with several
//! endpoints (`kubernetes.default.svc`) is: each new connection goes to the target of the
//! moment ([`Proxy::point_to`]); open connections stay where they went.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// A running proxy; its task ends when it is dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Forwards each new connection to `target` until [`Proxy::point_to`] says otherwise.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(Mutex::new(target));
        let to = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backend = *to.lock().unwrap();
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, target, task }
    }

    /// New connections go to `target` from now on.
    pub fn point_to(&self, target: SocketAddr) {
        *self.target.lock().unwrap() = target;
    }
}
