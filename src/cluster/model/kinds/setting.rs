//! `longhorn.io/v1beta2` Setting.

use super::super::objects::Setting;
use super::super::resource::{longhorn, ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for Setting {
    // Read whole (a few dozen objects) and kept only for the names in DRAIN_SETTINGS.
    const RESOURCE: Resource =
        longhorn(Self::KIND, "Setting", "settings", "settings.longhorn.io", ConfirmRead::Whole(None));
}
