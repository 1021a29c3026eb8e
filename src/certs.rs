//! `longhorn-guard certs`: a self-signed CA (`ca.crt`, `ca.key`) and a serving certificate
//! signed by it (`tls.crt`, `tls.key`) in `--out`, made with rcgen; keys mode 0600, every file
//! written through a temporary file and a rename.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, PublicKeyData as _,
};

/// Validity of the CA certificate: 10 years.
pub const CA_VALIDITY_DAYS: i64 = 3650;
/// Validity of the serving certificate: 1 year.
pub const LEAF_VALIDITY_DAYS: i64 = 365;

/// Arguments of `longhorn-guard certs`, and the options of [`generate`].
#[derive(Clone, Debug, clap::Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, ca.key, tls.crt and tls.key into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Service name for the DNS SANs.
    #[arg(long, default_value = "longhorn-guard")]
    pub service: String,
    /// Service namespace for the DNS SANs.
    #[arg(long, default_value = "longhorn-guard")]
    pub namespace: String,
    /// Extra IP SAN (repeatable); 127.0.0.1 is always included.
    #[arg(long = "ip", value_name = "ADDR")]
    pub ips: Vec<std::net::IpAddr>,
    /// Replace an existing CA too (otherwise it is kept and only the serving certificate is re-issued).
    #[arg(long)]
    pub rotate_ca: bool,
}

/// The options of [`generate`].
pub type CertsOptions = CertsArgs;

impl CertsArgs {
    /// Options with the default service and namespace (`longhorn-guard`) writing into `out`.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self {
            out: out.into(),
            service: "longhorn-guard".into(),
            namespace: "longhorn-guard".into(),
            ips: Vec::new(),
            rotate_ca: false,
        }
    }
}

/// Why certificates could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("{path}: cannot create the directory: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: not a usable CA {what}: {message}; fix or remove it, or pass --rotate-ca to replace the CA"
    )]
    BadCa { path: PathBuf, what: &'static str, message: String },
    #[error("{present} exists but {missing} does not; restore it, or pass --rotate-ca to replace the CA")]
    HalfCa { present: PathBuf, missing: PathBuf },
    #[error("invalid subject alternative name {name:?}: {message}")]
    BadName { name: String, message: String },
    #[error("--{flag} {value:?} is not a Kubernetes {flag} name: 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit")]
    BadLabel { flag: &'static str, value: String },
    #[error("cannot generate the {what}: {message}")]
    Generate { what: &'static str, message: String },
}

/// What [`generate`] wrote.
#[derive(Clone, Debug)]
pub struct Generated {
    pub ca_cert: PathBuf,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    /// True when an existing CA was kept, false when a new one was created.
    pub ca_reused: bool,
    /// The serving certificate's subject alternative names, in order.
    pub sans: Vec<String>,
}

/// The subject alternative names of the serving certificate for these options.
pub fn subject_alt_names(opts: &CertsOptions) -> Vec<String> {
    let (s, ns) = (&opts.service, &opts.namespace);
    let mut names = vec![
        s.clone(),
        format!("{s}.{ns}"),
        format!("{s}.{ns}.svc"),
        format!("{s}.{ns}.svc.cluster.local"),
        "localhost".to_string(),
        IpAddr::V4(Ipv4Addr::LOCALHOST).to_string(),
    ];
    for ip in &opts.ips {
        let ip = ip.to_string();
        if !names.contains(&ip) {
            names.push(ip);
        }
    }
    names
}

/// Writes (or re-issues) the CA and serving certificate into `opts.out`.
pub fn generate(opts: &CertsOptions) -> Result<Generated, CertsError> {
    for (flag, value) in [("service", &opts.service), ("namespace", &opts.namespace)] {
        if !is_dns_label(value) {
            return Err(CertsError::BadLabel { flag, value: value.clone() });
        }
    }
    let dir = &opts.out;
    std::fs::create_dir_all(dir).map_err(|source| CertsError::CreateDir { path: dir.clone(), source })?;
    let ca_cert_path = dir.join("ca.crt");
    let ca_key_path = dir.join("ca.key");
    let tls_cert_path = dir.join("tls.crt");
    let tls_key_path = dir.join("tls.key");

    let existing = if opts.rotate_ca { None } else { load_ca(&ca_cert_path, &ca_key_path)? };
    let ca_reused = existing.is_some();
    let (ca_pem, ca_key) = match existing {
        Some(found) => found,
        None => {
            let key = KeyPair::generate().map_err(|e| gen_err("CA key", e))?;
            let cert = ca_params().self_signed(&key).map_err(|e| gen_err("CA certificate", e))?;
            (cert.pem(), key)
        }
    };
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, &ca_key)
        .map_err(|e| bad_ca(&ca_cert_path, "certificate", e.to_string()))?;

    let sans = subject_alt_names(opts);
    let mut params = CertificateParams::new(sans.clone())
        .map_err(|e| CertsError::BadName { name: sans.join(","), message: e.to_string() })?;
    params.distinguished_name = dn(&format!("{}.{}.svc", opts.service, opts.namespace));
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(LEAF_VALIDITY_DAYS);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let leaf_key = KeyPair::generate().map_err(|e| gen_err("serving key", e))?;
    let leaf = params.signed_by(&leaf_key, &issuer).map_err(|e| gen_err("serving certificate", e))?;

    if !ca_reused {
        write_atomic(&ca_key_path, ca_key.serialize_pem().as_bytes(), 0o600)?;
        write_atomic(&ca_cert_path, ca_pem.as_bytes(), 0o644)?;
    }
    // Key first, then certificate: a reloading server only swaps once the pair matches.
    write_atomic(&tls_key_path, leaf_key.serialize_pem().as_bytes(), 0o600)?;
    write_atomic(&tls_cert_path, leaf.pem().as_bytes(), 0o644)?;

    Ok(Generated { ca_cert: ca_cert_path, tls_cert: tls_cert_path, tls_key: tls_key_path, ca_reused, sans })
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = dn("longhorn-guard CA");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(CA_VALIDITY_DAYS);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "longhorn-guard");
    dn.push(DnType::CommonName, common_name);
    dn
}

/// The existing CA (PEM certificate and key), `None` when neither file exists.
fn load_ca(cert: &Path, key: &Path) -> Result<Option<(String, KeyPair)>, CertsError> {
    match (cert.exists(), key.exists()) {
        (false, false) => return Ok(None),
        (true, false) => return Err(CertsError::HalfCa { present: cert.into(), missing: key.into() }),
        (false, true) => return Err(CertsError::HalfCa { present: key.into(), missing: cert.into() }),
        (true, true) => {}
    }
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|source| CertsError::Read { path: p.to_path_buf(), source })
    };
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    let key_pair = KeyPair::from_pem(&key_pem).map_err(|e| bad_ca(key, "key", e.to_string()))?;
    // Parse now so a broken certificate is reported against its own path.
    Issuer::from_ca_cert_pem(&cert_pem, &key_pair).map_err(|e| bad_ca(cert, "certificate", e.to_string()))?;
    check_ca(&cert_pem, &key_pair, (cert, key), time::OffsetDateTime::now_utc())?;
    Ok(Some((cert_pem, key_pair)))
}

/// Why the CA certificate `pem` (at `cert`) cannot sign a serving certificate issued `now`: its
/// key (at `key`) is not `key_pair` (its certificates would not verify), it is not a CA, or it
/// expires before that certificate would ([`LEAF_VALIDITY_DAYS`]).
fn check_ca(
    pem: &str,
    key_pair: &KeyPair,
    paths: (&Path, &Path),
    now: time::OffsetDateTime,
) -> Result<(), CertsError> {
    use rustls::pki_types::pem::PemObject as _;
    let (cert, key) = paths;
    let unusable = |message: String| bad_ca(cert, "certificate", message);
    let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).ok();
    let parsed = der.as_deref().and_then(|der| x509_parser::parse_x509_certificate(der).ok());
    let spki = key_pair.subject_public_key_info();
    let Some((_, ca)) = parsed.filter(|(_, c)| c.tbs_certificate.subject_pki.raw == spki) else {
        let message = format!("it is not the key of the CA certificate {}", cert.display());
        return Err(bad_ca(key, "key", message));
    };
    if !matches!(ca.basic_constraints(), Ok(Some(bc)) if bc.value.ca) {
        return Err(unusable("it is not a CA certificate (no basicConstraints CA:TRUE)".into()));
    }
    let not_after = ca.validity().not_after.to_datetime();
    let when = not_after
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| not_after.to_string());
    if not_after <= now {
        return Err(unusable(format!("it expired at {when}")));
    }
    if not_after < now + time::Duration::days(LEAF_VALIDITY_DAYS) {
        return Err(unusable(format!(
            "it expires at {when}, before the serving certificate it would sign ({LEAF_VALIDITY_DAYS} days)"
        )));
    }
    Ok(())
}

/// An RFC 1123 label, as Service and Namespace names are: what the DNS names of the
/// serving certificate are built from.
fn is_dns_label(s: &str) -> bool {
    let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    (1..=63).contains(&b.len()) && ok(b[0]) && ok(b[b.len() - 1]) && b.iter().all(|c| ok(*c) || *c == b'-')
}

/// Writes `bytes` to `path` through a temporary file in the same directory (created with
/// `mode`) and a rename, so readers see either the old or the new content.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertsError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |source| CertsError::Write { path: path.to_path_buf(), source };
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

fn bad_ca(path: &Path, what: &'static str, message: String) -> CertsError {
    CertsError::BadCa { path: path.to_path_buf(), what, message }
}

fn gen_err(what: &'static str, e: rcgen::Error) -> CertsError {
    CertsError::Generate { what, message: e.to_string() }
}

/// The CLI edge: exit 0 on success, 1 on any error (reason on stderr).
pub fn run(args: CertsArgs) -> ExitCode {
    let done = generate(&args).map_err(|e| e.to_string()).and_then(|g| {
        let ca = if g.ca_reused { "kept the existing CA" } else { "created a new CA" };
        crate::output::stdout(&format!(
            "{}: {ca}; issued a serving certificate for {}\n  CA certificate (caBundle): {}\n  serving certificate:       {}\n  serving key:               {}\n",
            args.out.display(),
            g.sans.join(", "),
            g.ca_cert.display(),
            g.tls_cert.display(),
            g.tls_key.display()
        ))
        .map_err(|e| format!("the certificates are written, but {e}"))
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::stderr_line!("longhorn-guard certs: {e}");
            ExitCode::from(1)
        }
    }
}
