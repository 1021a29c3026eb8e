//! Ordered sets of interned names, and the view's secondary indexes built from them. A
//! [`NameSet`] keeps up to [`SMALL`] names in one sorted vector (most index sets are tiny) and
//! a B-tree past that.

use std::collections::{btree_set, BTreeSet};

use super::name::{Name, NameMap};

/// Past this many names a set is kept as a B-tree.
const SMALL: usize = 32;

/// An ordered set of names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameSet {
    Small(Vec<Name>),
    Large(BTreeSet<Name>),
}

impl Default for NameSet {
    fn default() -> Self {
        Self::Small(Vec::new())
    }
}

impl NameSet {
    /// Adds `name`; false when it was already there.
    pub fn insert(&mut self, name: Name) -> bool {
        match self {
            Self::Small(v) => match v.binary_search(&name) {
                Ok(_) => false,
                Err(i) => {
                    if v.len() < SMALL {
                        v.insert(i, name);
                    } else {
                        let mut set: BTreeSet<Name> = std::mem::take(v).into_iter().collect();
                        set.insert(name);
                        *self = Self::Large(set);
                    }
                    true
                }
            },
            Self::Large(s) => s.insert(name),
        }
    }

    /// Removes `name`; false when it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        match self {
            Self::Small(v) => match v.binary_search_by(|n| n.as_str().cmp(name)) {
                Ok(i) => {
                    v.remove(i);
                    true
                }
                Err(_) => false,
            },
            Self::Large(s) => s.remove(name),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        match self {
            Self::Small(v) => v.binary_search_by(|n| n.as_str().cmp(name)).is_ok(),
            Self::Large(s) => s.contains(name),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Small(v) => v.len(),
            Self::Large(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names in order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Self::Small(v) => Iter::Small(v.iter()),
            Self::Large(s) => Iter::Large(s.iter()),
        }
    }
}

/// The names of a [`NameSet`] in order.
pub enum Iter<'a> {
    Small(std::slice::Iter<'a, Name>),
    Large(btree_set::Iter<'a, Name>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Name;
    fn next(&mut self) -> Option<&'a Name> {
        match self {
            Self::Small(i) => i.next(),
            Self::Large(i) => i.next(),
        }
    }
}

impl<'a> IntoIterator for &'a NameSet {
    type Item = &'a Name;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<Name> for NameSet {
    fn from_iter<I: IntoIterator<Item = Name>>(iter: I) -> Self {
        let mut set = Self::default();
        for n in iter {
            set.insert(n);
        }
        set
    }
}

/// A secondary index: key -> the names filed under it.
pub type Index = NameMap<Name, NameSet>;

/// Files `name` under `key`.
pub fn add(index: &mut Index, key: &Name, name: &Name) {
    if let Some(set) = index.get_mut(key.as_str()) {
        set.insert(name.clone());
    } else {
        index.insert(key.clone(), NameSet::Small(vec![name.clone()]));
    }
}

/// Takes `name` from under `key`, dropping the key when nothing is left under it.
pub fn del(index: &mut Index, key: &str, name: &str) {
    if let Some(set) = index.get_mut(key) {
        set.remove(name);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

/// The names filed under `key`, in order.
pub fn iter_index<'a>(index: &'a Index, key: &str) -> impl Iterator<Item = &'a Name> + 'a {
    index.get(key).into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_stays_ordered_across_the_switch_to_a_tree() {
        let mut set = NameSet::default();
        let names: Vec<Name> = (0..100).rev().map(|i| Name::new(&format!("r-{i:03}"))).collect();
        for n in &names {
            assert!(set.insert(n.clone()));
        }
        assert!(!set.insert(names[0].clone()));
        assert!(matches!(set, NameSet::Large(_)));
        assert_eq!(set.len(), 100);
        let got: Vec<&str> = set.iter().map(Name::as_str).collect();
        let mut want: Vec<&str> = names.iter().map(Name::as_str).collect();
        want.sort();
        assert_eq!(got, want);
        assert!(set.remove("r-050") && !set.remove("r-050") && !set.contains("r-050"));
        let mut small: NameSet = ["b", "a", "c"].into_iter().map(Name::new).collect();
        assert_eq!(small.iter().map(Name::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(small.remove("b") && small.contains("a") && small.len() == 2);
    }

    #[test]
    fn an_index_drops_keys_with_nothing_filed() {
        let mut index = Index::default();
        add(&mut index, &Name::new("n1"), &Name::new("r1"));
        add(&mut index, &Name::new("n1"), &Name::new("r2"));
        del(&mut index, "n1", "r1");
        assert_eq!(iter_index(&index, "n1").map(Name::as_str).collect::<Vec<_>>(), ["r2"]);
        del(&mut index, "n1", "r2");
        assert!(index.is_empty());
    }
}
