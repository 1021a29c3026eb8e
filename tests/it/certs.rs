//! `longhorn-guard certs`: files, modes, SANs, CA reuse and rotation.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::*;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");

fn certs(args: &[&str]) -> std::process::Output {
    Command::new(BIN).arg("certs").args(args).output().unwrap()
}

fn der(path: &Path) -> Vec<u8> {
    let pem = std::fs::read(path).unwrap();
    let (_, p) = parse_x509_pem(&pem).unwrap();
    p.contents
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn writes_a_ca_and_a_serving_certificate_with_every_san() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested/certs");
    let o = certs(&[
        "--out",
        out.to_str().unwrap(),
        "--service",
        "guard",
        "--namespace",
        "storage",
        "--ip",
        "10.1.2.3",
        "--ip",
        "fd00::1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("created a new CA"));
    for f in ["ca.crt", "ca.key", "tls.crt", "tls.key"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert_eq!(mode(&out.join("ca.key")), 0o600);
    assert_eq!(mode(&out.join("tls.key")), 0o600);
    // No temporary files left behind.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 4);

    let ca_der = der(&out.join("ca.crt"));
    let (_, ca) = parse_x509_certificate(&ca_der).unwrap();
    assert!(ca.is_ca());
    let leaf_der = der(&out.join("tls.crt"));
    let (_, leaf) = parse_x509_certificate(&leaf_der).unwrap();
    assert!(!leaf.is_ca());
    assert_eq!(leaf.issuer(), ca.subject());
    assert!(leaf.verify_signature(Some(ca.public_key())).is_ok());

    let ca_days = (ca.validity().not_after.timestamp() - ca.validity().not_before.timestamp()) / 86400;
    let leaf_days = (leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp()) / 86400;
    assert!((3649..=3651).contains(&ca_days), "CA valid {ca_days} days");
    assert!((364..=366).contains(&leaf_days), "serving certificate valid {leaf_days} days");

    let san = leaf.subject_alternative_name().unwrap().unwrap();
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for n in &san.value.general_names {
        match n {
            GeneralName::DNSName(d) => dns.push(d.to_string()),
            GeneralName::IPAddress(b) => ips.push(b.to_vec()),
            _ => {}
        }
    }
    assert_eq!(
        dns,
        ["guard", "guard.storage", "guard.storage.svc", "guard.storage.svc.cluster.local", "localhost"]
    );
    assert!(ips.contains(&vec![127, 0, 0, 1]));
    assert!(ips.contains(&vec![10, 1, 2, 3]));
    let v6: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
    assert!(ips.contains(&v6.octets().to_vec()));
}

#[test]
fn rerun_keeps_the_ca_and_reissues_the_serving_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    assert!(certs(&["--out", out]).status.success());
    let ca1 = std::fs::read(dir.path().join("ca.crt")).unwrap();
    let cakey1 = std::fs::read(dir.path().join("ca.key")).unwrap();
    let leaf1 = der(&dir.path().join("tls.crt"));
    let key1 = std::fs::read(dir.path().join("tls.key")).unwrap();

    let o = certs(&["--out", out, "--ip", "192.168.7.7"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("kept the existing CA"));
    assert_eq!(std::fs::read(dir.path().join("ca.crt")).unwrap(), ca1);
    assert_eq!(std::fs::read(dir.path().join("ca.key")).unwrap(), cakey1);
    let leaf2 = der(&dir.path().join("tls.crt"));
    assert_ne!(leaf2, leaf1);
    assert_ne!(std::fs::read(dir.path().join("tls.key")).unwrap(), key1);
    let (_, leaf) = parse_x509_certificate(&leaf2).unwrap();
    let ca_der = der(&dir.path().join("ca.crt"));
    let (_, ca) = parse_x509_certificate(&ca_der).unwrap();
    assert!(leaf.verify_signature(Some(ca.public_key())).is_ok(), "re-issued leaf not signed by the kept CA");
    assert_eq!(mode(&dir.path().join("tls.key")), 0o600);

    let o = certs(&["--out", out, "--rotate-ca"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("created a new CA"));
    assert_ne!(std::fs::read(dir.path().join("ca.crt")).unwrap(), ca1);
    assert_ne!(std::fs::read(dir.path().join("ca.key")).unwrap(), cakey1);
    assert_eq!(mode(&dir.path().join("ca.key")), 0o600);
    let ca2_der = der(&dir.path().join("ca.crt"));
    let (_, ca2) = parse_x509_certificate(&ca2_der).unwrap();
    let leaf3 = der(&dir.path().join("tls.crt"));
    let (_, leaf) = parse_x509_certificate(&leaf3).unwrap();
    assert!(leaf.verify_signature(Some(ca2.public_key())).is_ok());
}

#[test]
fn broken_or_half_ca_is_a_clear_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    assert!(certs(&["--out", out]).status.success());
    std::fs::write(dir.path().join("ca.key"), "garbage").unwrap();
    let o = certs(&["--out", out]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}", dir.path().join("ca.key").display())), "{err}");
    assert!(err.contains("--rotate-ca"), "{err}");

    std::fs::remove_file(dir.path().join("ca.key")).unwrap();
    let o = certs(&["--out", out]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ca.crt exists but") && err.contains("ca.key does not"), "{err}");
    // --rotate-ca recovers.
    assert!(certs(&["--out", out, "--rotate-ca"]).status.success());

    // The key of another CA beside this CA's certificate: its serving certificates would not
    // verify against the caBundle.
    let other = tempfile::tempdir().unwrap();
    assert!(certs(&["--out", other.path().to_str().unwrap()]).status.success());
    let tls_before = std::fs::read(dir.path().join("tls.crt")).unwrap();
    std::fs::copy(other.path().join("ca.key"), dir.path().join("ca.key")).unwrap();
    let o = certs(&["--out", out]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("it is not the key of the CA certificate"), "{err}");
    assert!(err.contains("--rotate-ca"), "{err}");
    assert_eq!(std::fs::read(dir.path().join("tls.crt")).unwrap(), tls_before, "nothing written");
    assert!(certs(&["--out", out, "--rotate-ca"]).status.success());

    // Names that cannot be a Service or Namespace: no certificate is written for them.
    for args in [
        &["--service", ""][..],
        &["--service", "bad name!"],
        &["--service=-guard"],
        &["--namespace", "Guard"],
        &["--namespace", &"n".repeat(64)],
    ] {
        let o = certs(&[&["--out", out][..], args].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("is not a Kubernetes"), "{args:?}: {err}");
    }

    // An unwritable target names the path.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let o = certs(&["--out", file.join("sub").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot create the directory"));
}

#[test]
fn an_expired_short_lived_or_non_ca_certificate_is_not_kept_as_the_ca() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let write = |dir: &Path, is_ca: bool, not_after: ::time::OffsetDateTime| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = if is_ca { IsCa::Ca(BasicConstraints::Unconstrained) } else { IsCa::NoCa };
        params.not_before = ::time::OffsetDateTime::from_unix_timestamp(1_577_836_800).unwrap();
        params.not_after = not_after;
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("ca.key"), key.serialize_pem()).unwrap();
    };
    let soon = ::time::OffsetDateTime::now_utc() + ::time::Duration::days(30);
    let far = ::time::OffsetDateTime::now_utc() + ::time::Duration::days(3000);
    for (is_ca, not_after, want) in [
        (
            true,
            ::time::OffsetDateTime::from_unix_timestamp(1_609_459_200).unwrap(),
            "it expired at 2021-01-01T00:00:00Z",
        ),
        (true, soon, "before the serving certificate it would sign (365 days)"),
        (false, far, "it is not a CA certificate"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), is_ca, not_after);
        let out = dir.path().to_str().unwrap();
        let o = certs(&["--out", out]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{want}: {err}");
        assert!(err.contains("ca.crt: not a usable CA certificate: ") && err.contains(want), "{err}");
        assert!(err.contains("--rotate-ca"), "{err}");
        assert!(!dir.path().join("tls.crt").exists(), "nothing written");
        assert!(certs(&["--out", out, "--rotate-ca"]).status.success());
    }
    // A CA that outlives the serving certificate is kept.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), true, far);
    let before = std::fs::read(dir.path().join("ca.crt")).unwrap();
    assert!(certs(&["--out", dir.path().to_str().unwrap()]).status.success());
    assert_eq!(std::fs::read(dir.path().join("ca.crt")).unwrap(), before);
}
