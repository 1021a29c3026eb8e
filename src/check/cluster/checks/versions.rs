//! Which Multus status annotation each Multus release writes and each Longhorn release reads,
//! from image tags and `current-longhorn-version`. The tables are in docs/check-cluster.md
//! with their sources (multus-cni tags; longhorn-manager `types/setting.go` at each tag).

use std::fmt;

/// A release version, `MAJOR.MINOR.PATCH` (a missing patch reads as 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.0, self.1, self.2)
    }
}

impl Version {
    /// Reads `v1.9.1`, `1.9.1`, `v4.0.2-thick`, `v4.0.2-build20230811`, `v3.9` (anything after
    /// the numbers is ignored); `None` for `latest`, `snapshot-thick`, a digest.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let end = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
        let mut parts = t[..end].split('.').map(str::parse::<u32>);
        let major = parts.next()?.ok()?;
        let minor = parts.next()?.ok()?;
        let patch = parts.next().transpose().ok()?.unwrap_or(0);
        Some(Self(major, minor, patch))
    }

    /// The version in an image's tag (`ghcr.io/k8snetworkplumbingwg/multus-cni:v4.0.2-thick`);
    /// `None` without a tag or with one that names no version.
    pub fn of_image(image: &str) -> Option<Self> {
        let no_digest = image.split('@').next()?;
        let tail = no_digest.rsplit('/').next()?;
        Self::parse(tail.split_once(':')?.1)
    }
}

/// The status annotations a Multus release writes on a pod it attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultusWrites {
    /// Up to v3.4.0: only the legacy `networks-status`.
    LegacyOnly,
    /// v3.4.1 to v3.9.x: `network-status` and the same value under `networks-status`.
    Both,
    /// v4.0.0 and later: only `network-status`.
    NewOnly,
}

pub fn multus_writes(v: Version) -> MultusWrites {
    if v >= Version(4, 0, 0) {
        MultusWrites::NewOnly
    } else if v >= Version(3, 4, 1) {
        MultusWrites::Both
    } else {
        MultusWrites::LegacyOnly
    }
}

/// The status annotations a Longhorn release reads for an instance manager's storage IP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LonghornReads {
    /// v1.3.0 to v1.4.3, v1.5.0 and v1.5.1: only `networks-status` (longhorn/longhorn#6953).
    LegacyOnly,
    /// v1.4.4, v1.5.2, v1.6.0 and later: `network-status`, else `networks-status`.
    NewThenLegacy,
}

pub fn longhorn_reads(v: Version) -> LonghornReads {
    let fixed = v >= Version(1, 6, 0)
        || (v.0, v.1) == (1, 5) && v >= Version(1, 5, 2)
        || (v.0, v.1) == (1, 4) && v >= Version(1, 4, 4)
        || v.0 > 1;
    if fixed {
        LonghornReads::NewThenLegacy
    } else {
        LonghornReads::LegacyOnly
    }
}

/// The first release of `v`'s line that reads `network-status`.
pub fn fixed_in(v: Version) -> &'static str {
    match (v.0, v.1) {
        (1, 5) => "v1.5.2",
        (1, 3) | (1, 4) => "v1.4.4",
        _ => "v1.6.0",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_tags_and_images() {
        assert_eq!(Version::parse("v1.9.1"), Some(Version(1, 9, 1)));
        assert_eq!(Version::parse("1.5"), Some(Version(1, 5, 0)));
        assert_eq!(Version::parse("v4.0.2-thick"), Some(Version(4, 0, 2)));
        assert_eq!(Version::parse("v4.1.0-build20240118"), Some(Version(4, 1, 0)));
        for bad in ["latest", "snapshot-thick", "", "v", "v4", "master-head", "v1..2"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Version::of_image("rancher/hardened-multus-cni:v4.0.2-build20230811"),
            Some(Version(4, 0, 2))
        );
        assert_eq!(Version::of_image("localhost:5000/multus-cni:v3.9.3@sha256:0a"), Some(Version(3, 9, 3)));
        assert_eq!(Version::of_image("localhost:5000/multus-cni"), None);
        assert_eq!(Version::of_image("quay.io/x/multus@sha256:0a1b"), None);
    }

    #[test]
    fn who_writes_and_reads_which_key() {
        use LonghornReads::*;
        for (v, want) in [
            ("v1.3.0", LegacyOnly),
            ("v1.4.3", LegacyOnly),
            ("v1.4.4", NewThenLegacy),
            ("v1.5.0", LegacyOnly),
            ("v1.5.1", LegacyOnly),
            ("v1.5.2", NewThenLegacy),
            ("v1.6.0", NewThenLegacy),
            ("v1.12.1", NewThenLegacy),
            ("v2.0.0", NewThenLegacy),
        ] {
            assert_eq!(longhorn_reads(Version::parse(v).unwrap()), want, "{v}");
        }
        assert_eq!(fixed_in(Version(1, 5, 1)), "v1.5.2");
        assert_eq!(fixed_in(Version(1, 3, 3)), "v1.4.4");
        assert_eq!(multus_writes(Version(3, 4, 0)), MultusWrites::LegacyOnly);
        assert_eq!(multus_writes(Version(3, 4, 1)), MultusWrites::Both);
        assert_eq!(multus_writes(Version(3, 9, 3)), MultusWrites::Both);
        assert_eq!(multus_writes(Version(4, 0, 0)), MultusWrites::NewOnly);
    }
}
