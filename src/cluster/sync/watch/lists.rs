//! How the watches of one API client read their lists ([`ListWay`]), and the fall-backs they
//! share ([`Lists`]): a way that failed as only it can is left for the next, for good.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// How a kind's list is read, in the order of [`Lists`]'s fall-backs; the default is
/// `serve --lists`'s and the other watches'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum ListWay {
    /// One plain LIST, read object by object as it arrives.
    #[default]
    Plain,
    /// A watch with `sendInitialEvents=true`, up to its end marker.
    Streaming,
    /// Pages (`limit`), of each kind's page size.
    Paged,
}

impl ListWay {
    const ALL: [ListWay; 3] = [ListWay::Plain, ListWay::Streaming, ListWay::Paged];
}

/// How lists are read: shared by the watches of one API client; a way that failed as only it
/// can is left for the next, for good.
#[derive(Clone, Debug)]
pub struct Lists(Arc<AtomicU8>);

impl Lists {
    /// Lists are read `first`'s way, then the next ones' ([`ListWay`]'s order).
    pub fn new(first: ListWay) -> Self {
        Self(Arc::new(AtomicU8::new(first as u8)))
    }

    pub(super) fn way(&self) -> ListWay {
        ListWay::ALL.get(usize::from(self.0.load(Ordering::Relaxed))).copied().unwrap_or(ListWay::Paged)
    }

    /// `from` failed as only that way can: lists are read the next way from now on.
    pub(super) fn fall_back(&self, from: ListWay, why: &dyn std::fmt::Display) {
        let to = ListWay::ALL.get(from as usize + 1).copied().unwrap_or(ListWay::Paged);
        if self.0.compare_exchange(from as u8, to as u8, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            tracing::info!(from = ?from, to = ?to, reason = %why, "lists are read another way from now on");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ListWay, Lists};

    #[test]
    fn each_way_of_listing_falls_back_to_the_next_once_for_all_watches() {
        let lists = Lists::new(ListWay::Plain);
        let shared = lists.clone();
        lists.fall_back(ListWay::Streaming, &"not the way in use: nothing changes");
        assert_eq!(shared.way(), ListWay::Plain);
        lists.fall_back(ListWay::Plain, &"cut off");
        lists.fall_back(ListWay::Plain, &"another kind's list, cut off as well");
        assert_eq!(shared.way(), ListWay::Streaming, "one step, shared");
        shared.fall_back(ListWay::Streaming, &"refused");
        shared.fall_back(ListWay::Paged, &"pages are the last way");
        assert_eq!(lists.way(), ListWay::Paged);
        assert_eq!(Lists::new(ListWay::Streaming).way(), ListWay::Streaming);
    }
}
