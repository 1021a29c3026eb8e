//! TLS for the server: rustls configuration with a certificate resolver that polls the key pair
//! on disk, swaps in a changed pair that parses and matches, and keeps serving the previous one
//! (logged and counted) otherwise.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate/key pair could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no PEM CERTIFICATE block found")]
    NoCertificate { path: PathBuf },
    #[error("{path}: no PEM private key found")]
    NoKey { path: PathBuf },
    #[error("{path}: not valid PEM: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("{key} does not fit {cert}: {message}")]
    Pair { cert: PathBuf, key: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Paths of the serving certificate (PEM chain, leaf first) and its private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// `tls.crt` and `tls.key` in `dir` (the layout of a Kubernetes TLS Secret volume).
    pub fn in_dir(dir: &Path) -> Self {
        Self { cert: dir.join("tls.crt"), key: dir.join("tls.key") }
    }
}

/// Counts of reload attempts and the served certificate's expiry, for `/metrics`.
#[derive(Debug)]
pub struct ReloadStats {
    /// `result` (`success`, `error`) -> reload attempts, both shown from the start.
    pub reloads: Family<crate::exposition::Labels<1>, Counter>,
    /// `notAfter` of the served leaf certificate, seconds since the Unix epoch (0: unknown).
    pub not_after: AtomicI64,
}

impl Default for ReloadStats {
    fn default() -> Self {
        let reloads = Family::default();
        for result in ["success", "error"] {
            let _ = reloads.get_or_create(&[("result", result)]);
        }
        Self { reloads, not_after: AtomicI64::new(0) }
    }
}

impl ReloadStats {
    /// The count of reload attempts that were `ok`, or of those that failed.
    pub fn counter(&self, ok: bool) -> Counter {
        self.reloads.get_or_create(&[("result", if ok { "success" } else { "error" })]).clone()
    }
}

/// `notAfter` of the first (leaf) certificate of `key`, in seconds since the Unix epoch.
fn leaf_not_after(key: &CertifiedKey) -> Option<i64> {
    let leaf = key.cert.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    Some(cert.validity().not_after.timestamp())
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    /// The bytes of the pair last looked at (loaded or rejected), to skip unchanged files.
    seen: (Vec<u8>, Vec<u8>),
}

/// A [`ResolvesServerCert`] serving the current pair from [`TlsFiles`], reloadable.
#[derive(Debug)]
pub struct ReloadingCert {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    state: RwLock<Loaded>,
    /// The last failure to read the files, so one that persists is reported once.
    read_error: std::sync::Mutex<Option<String>>,
    pub stats: ReloadStats,
}

impl ReloadingCert {
    /// Loads the pair once; an error here is fatal to the caller (nothing to serve yet).
    pub fn load(files: TlsFiles, provider: Arc<CryptoProvider>) -> Result<Self, TlsError> {
        let (cert_bytes, key_bytes) = read_pair(&files)?;
        let key = parse_pair(&files, &cert_bytes, &key_bytes, &provider)?;
        let stats = ReloadStats::default();
        stats.not_after.store(leaf_not_after(&key).unwrap_or(0), Ordering::Relaxed);
        Ok(Self {
            files,
            provider,
            state: RwLock::new(Loaded { key: Arc::new(key), seen: (cert_bytes, key_bytes) }),
            read_error: std::sync::Mutex::new(None),
            stats,
        })
    }

    /// The pair currently served.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.state.read().unwrap_or_else(|p| p.into_inner()).key.clone()
    }

    /// Re-reads the files and swaps the served pair when they changed and parse.
    /// Returns `Ok(true)` after a swap, `Ok(false)` when nothing changed, `Err` when the new
    /// files are unusable (the old pair is kept and the same bytes are not retried) or
    /// cannot be read (reported once while the same failure lasts).
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let pair = {
            let mut last = self.read_error.lock().unwrap_or_else(|p| p.into_inner());
            match read_pair(&self.files) {
                Ok(b) => {
                    *last = None;
                    b
                }
                // Missing during a swap, or really gone: keep serving; count and report it
                // once, not at every interval while it lasts.
                Err(e) if last.as_deref() == Some(e.to_string().as_str()) => return Ok(false),
                Err(e) => {
                    *last = Some(e.to_string());
                    self.stats.counter(false).inc();
                    return Err(e);
                }
            }
        };
        if self.state.read().unwrap_or_else(|p| p.into_inner()).seen == pair {
            return Ok(false);
        }
        let parsed = parse_pair(&self.files, &pair.0, &pair.1, &self.provider);
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        state.seen = pair;
        self.stats.counter(parsed.is_ok()).inc();
        let key = parsed?;
        self.stats.not_after.store(leaf_not_after(&key).unwrap_or(0), Ordering::Relaxed);
        state.key = Arc::new(key);
        Ok(true)
    }

    /// Polls the files every `interval` until `shutdown` resolves, logging each outcome.
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        // A zero period would panic in tokio; the CLI refuses it, this keeps library callers safe.
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tick.tick() => {}
            }
            let this = self.clone();
            match tokio::task::spawn_blocking(move || this.reload_if_changed()).await {
                Ok(Ok(true)) => tracing::info!(
                    cert = %self.files.cert.display(),
                    key = %self.files.key.display(),
                    "reloaded the serving certificate"
                ),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!(
                    error = %e,
                    "cannot reload the serving certificate; still serving the previous one"
                ),
                Err(e) => tracing::warn!(error = %e, "certificate reload task failed"),
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A rustls server configuration: TLS 1.2 and 1.3 only, ALPN `http/1.1`, no client auth,
/// certificates from `resolver`.
pub fn server_config(resolver: Arc<ReloadingCert>) -> Result<rustls::ServerConfig, TlsError> {
    server_config_with(resolver, None)
}

/// [`server_config`], and with `client_ca` only clients presenting a certificate from that CA.
pub fn server_config_with(
    resolver: Arc<ReloadingCert>,
    client_ca: Option<&Path>,
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = resolver.provider.clone();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    // HTTP/1.x only (no h2): a client offering only `http/1.0` (curl --http1.0) is served too.
    config.alpn_protocols = vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()];
    Ok(config)
}

/// The ring crypto provider used throughout.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every CERTIFICATE block of a PEM file, in order; at least one.
fn pem_certs(path: &Path, bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { path: path.to_path_buf(), message: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_path_buf() });
    }
    Ok(certs)
}

/// A verifier admitting only clients whose certificate chains to a CA in the PEM file `path`.
pub fn client_verifier(
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), source })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in pem_certs(path, &bytes)? {
        roots.add(cert).map_err(|e| TlsError::Pem { path: path.to_path_buf(), message: e.to_string() })?;
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsError::Config(format!("{}: {e}", path.display())))
}

fn read_pair(files: &TlsFiles) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |p: &Path| std::fs::read(p).map_err(|source| TlsError::Read { path: p.to_path_buf(), source });
    Ok((read(&files.cert)?, read(&files.key)?))
}

fn parse_pair(
    files: &TlsFiles,
    cert_bytes: &[u8],
    key_bytes: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let certs = pem_certs(&files.cert, cert_bytes)?;
    let key = PrivateKeyDer::from_pem_slice(key_bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey { path: files.key.clone() },
        e => TlsError::Pem { path: files.key.clone(), message: e.to_string() },
    })?;
    CertifiedKey::from_der(certs, key, provider).map_err(|e| TlsError::Pair {
        cert: files.cert.clone(),
        key: files.key.clone(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_old_pair_on_bad_files_and_swaps_on_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        crate::certs::generate(&crate::certs::CertsOptions::new(dir.path())).unwrap();
        let files = TlsFiles::in_dir(dir.path());
        let r = ReloadingCert::load(files.clone(), provider()).unwrap();
        let first = r.current().cert[0].clone();
        // The served leaf's expiry, for /metrics: about a year from now for `certs`' leaf.
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let left = r.stats.not_after.load(Ordering::Relaxed) - now;
        assert!((300 * 86_400..=400 * 86_400).contains(&left), "{left} s left");
        assert!(!r.reload_if_changed().unwrap());

        std::fs::write(&files.cert, b"not a certificate").unwrap();
        assert!(r.reload_if_changed().is_err());
        assert_eq!(r.current().cert[0], first);
        // Same broken bytes: not retried.
        assert!(!r.reload_if_changed().unwrap());

        crate::certs::generate(&crate::certs::CertsOptions::new(dir.path())).unwrap();
        assert!(r.reload_if_changed().unwrap());
        assert_ne!(r.current().cert[0], first);
        assert_eq!(r.stats.counter(true).get(), 1);
        assert_eq!(r.stats.counter(false).get(), 1);

        // A key file that is gone: reported once while it stays gone, the pair keeps serving.
        let serving = r.current().cert[0].clone();
        std::fs::remove_file(&files.key).unwrap();
        assert!(r.reload_if_changed().is_err());
        for _ in 0..3 {
            assert!(!r.reload_if_changed().unwrap());
        }
        assert_eq!(r.stats.counter(false).get(), 2);
        assert_eq!(r.current().cert[0], serving);
        crate::certs::generate(&crate::certs::CertsOptions::new(dir.path())).unwrap();
        assert!(r.reload_if_changed().unwrap());
    }
}
