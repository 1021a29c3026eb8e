//! A time Longhorn writes as RFC 3339 text, kept as whole seconds in 8 bytes (not interned:
//! each replica has its own times). `failedAt` stays text: it is printed as written.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;

/// An RFC 3339 time to the second, empty, or set but unreadable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp(i64);

const EMPTY: i64 = i64::MIN;
const UNREADABLE: i64 = i64::MIN + 1;

impl Default for Stamp {
    fn default() -> Self {
        Self(EMPTY)
    }
}

impl Stamp {
    /// `text` as Longhorn writes it: `""` is empty; text that is not RFC 3339 is set but has no
    /// time (it still counts as set, as Longhorn compares these fields with `""`).
    pub fn parse(text: &str) -> Self {
        if text.is_empty() {
            return Self(EMPTY);
        }
        match time::OffsetDateTime::parse(text, &Rfc3339) {
            Ok(t) => Self(t.unix_timestamp().max(UNREADABLE + 1)),
            Err(_) => Self(UNREADABLE),
        }
    }

    /// True when the field was `""` (or absent, or `null`).
    pub fn is_empty(&self) -> bool {
        self.0 == EMPTY
    }

    /// The time, to the second; `None` when empty or unreadable.
    pub fn time(&self) -> Option<SystemTime> {
        match self.0 {
            EMPTY | UNREADABLE => None,
            s if s >= 0 => UNIX_EPOCH.checked_add(Duration::from_secs(s as u64)),
            s => UNIX_EPOCH.checked_sub(Duration::from_secs(s.unsigned_abs())),
        }
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self.0 {
            EMPTY => return Ok(()),
            UNREADABLE => None,
            s => time::OffsetDateTime::from_unix_timestamp(s).ok().and_then(|t| t.format(&Rfc3339).ok()),
        };
        f.write_str(text.as_deref().unwrap_or("(not an RFC 3339 time)"))
    }
}

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stamp({self})")
    }
}

impl<'de> Deserialize<'de> for Stamp {
    /// A string, as for every text field of the view ([`super::Name`]): any other value makes
    /// the object unreadable, as it is to Longhorn's Go decoder.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::name::from_json_string(d, "an RFC 3339 time as a string", Stamp::parse)
    }
}

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_to_the_second_and_empty_and_unreadable_are_told_apart() {
        let t = Stamp::parse("2026-11-30T10:00:07.9Z");
        assert!(!t.is_empty());
        assert_eq!(t.to_string(), "2026-11-30T10:00:07Z");
        let secs = t.time().unwrap().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_796_032_807);
        assert_eq!(Stamp::parse("2026-11-30T11:00:07+01:00"), t);
        assert!(Stamp::parse("").is_empty() && Stamp::default().is_empty());
        let odd = Stamp::parse("yesterday");
        assert!(!odd.is_empty() && odd.time().is_none());
        assert_eq!(
            Stamp::parse("1969-12-31T23:59:59Z").time(),
            UNIX_EPOCH.checked_sub(Duration::from_secs(1))
        );
        assert_eq!(std::mem::size_of::<Stamp>(), 8);
    }

    #[test]
    fn reads_strings_only_like_every_text_field() {
        let read = |json: &str| serde_json::from_str::<Stamp>(json);
        assert!(read(r#""""#).unwrap().is_empty());
        assert_eq!(read(r#""2026-11-30T10:00:07Z""#).unwrap().to_string(), "2026-11-30T10:00:07Z");
        for other in ["7", "true", "[]", "{}", "null"] {
            assert!(read(other).is_err(), "{other}");
        }
        let t = read(r#""2026-11-30T10:00:07Z""#).unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), r#""2026-11-30T10:00:07Z""#);
    }
}
