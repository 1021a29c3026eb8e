//! Interned strings for the names and values the cluster view repeats ([`Name`]): one shared
//! copy per distinct string, read as a `str`, parsed from and printed as a JSON string. The
//! interner drops the strings nothing else holds whenever it has doubled in size.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How the view's maps keyed by names hash them: foldhash, seeded once per process. Names
/// come from the cluster's objects and are hashed on every lookup, so the hash is built for
/// short strings rather than the standard library's SipHash.
pub type NameHasher = foldhash::fast::RandomState;
/// A hash map keyed by names (or their text), with [`NameHasher`].
pub type NameMap<K, V> = HashMap<K, V, NameHasher>;
/// A hash set of names (or their text), with [`NameHasher`].
pub type NameHashSet<K> = HashSet<K, NameHasher>;

/// An interned, immutable string. It compares, orders and hashes as its text.
#[derive(Clone)]
pub struct Name(Arc<Box<str>>);

/// The interned strings, and the size at which unused ones are next purged.
struct Interner {
    set: NameHashSet<Name>,
    purge_at: usize,
}

/// Purge no more often than this many entries.
const MIN_PURGE: usize = 4096;

static INTERNER: LazyLock<Mutex<Interner>> =
    LazyLock::new(|| Mutex::new(Interner { set: NameHashSet::default(), purge_at: MIN_PURGE }));

static EMPTY: LazyLock<Name> = LazyLock::new(|| Name(Arc::new(Box::from(""))));

impl Interner {
    fn intern(&mut self, s: &str) -> Name {
        if let Some(a) = self.set.get(s) {
            return a.clone();
        }
        let a = Name(Arc::new(Box::from(s)));
        self.set.insert(a.clone());
        if self.set.len() >= self.purge_at {
            self.purge();
        }
        a
    }

    /// Drops the strings only the interner holds (no object, index or message uses them).
    fn purge(&mut self) {
        self.set.retain(|a| Arc::strong_count(&a.0) > 1);
        self.set.shrink_to_fit();
        self.purge_at = (self.set.len() * 2).max(MIN_PURGE);
    }
}

impl Name {
    /// The shared copy of `s`.
    pub fn new(s: &str) -> Self {
        if s.is_empty() {
            return EMPTY.clone();
        }
        let mut interner = INTERNER.lock().unwrap_or_else(|p| p.into_inner());
        interner.intern(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Default for Name {
    fn default() -> Self {
        EMPTY.clone()
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> Self {
        n.as_str().to_string()
    }
}

impl From<&Name> for String {
    fn from(n: &Name) -> Self {
        n.as_str().to_string()
    }
}

/// Lets callers collect names as owned strings.
impl FromIterator<Name> for Vec<String> {
    fn from_iter<I: IntoIterator<Item = Name>>(iter: I) -> Self {
        iter.into_iter().map(String::from).collect()
    }
}

macro_rules! eq_str {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Name {
            fn eq(&self, other: &$t) -> bool {
                self.as_str() == AsRef::<str>::as_ref(other)
            }
        }
        impl PartialEq<Name> for $t {
            fn eq(&self, other: &Name) -> bool {
                AsRef::<str>::as_ref(self) == other.as_str()
            }
        }
    )*};
}
eq_str!(str, &str, String);

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_json_string(d, "a string", Name::new)
    }
}

/// Reads a JSON string straight into a `T` through `from`, without an owned copy; any other
/// value is an error, as Go's decoder refuses it for a string field. The text fields of the
/// view ([`Name`], [`super::Stamp`]) read this way.
pub(super) fn from_json_string<'de, D: Deserializer<'de>, T>(
    d: D,
    expecting: &'static str,
    from: fn(&str) -> T,
) -> Result<T, D::Error> {
    struct Visitor<T> {
        expecting: &'static str,
        from: fn(&str) -> T,
    }
    impl<T> serde::de::Visitor<'_> for Visitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            Ok((self.from)(v))
        }
    }
    d.deserialize_str(Visitor { expecting, from })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_copy_and_read_as_str() {
        let a = Name::new("pvc-0001");
        let b: Name = serde_json::from_str("\"pvc-0001\"").unwrap();
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, "pvc-0001");
        assert_eq!("pvc-0001", a);
        assert_eq!(a, "pvc-0001".to_string());
        assert_eq!(a.len(), 8);
        assert_eq!(format!("{a} {a:?}"), "pvc-0001 \"pvc-0001\"");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"pvc-0001\"");
        assert!(serde_json::from_str::<Name>("3").is_err());
        let set: std::collections::HashSet<Name> = [a.clone()].into();
        assert!(set.contains("pvc-0001"));
        assert_eq!(Name::default(), "");
    }

    #[test]
    fn strings_nothing_uses_are_freed() {
        let kept = Name::new("name-test-kept");
        drop(Name::new("name-test-dropped"));
        let mut interner = INTERNER.lock().unwrap();
        interner.purge();
        assert!(!interner.set.contains("name-test-dropped"));
        assert!(interner.set.contains("name-test-kept"));
        assert_eq!(kept, "name-test-kept");
    }
}
