//! `longhorn.io/v1beta2` Volume.

use super::super::objects::Volume;
use super::super::resource::{longhorn, ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for Volume {
    const RESOURCE: Resource = longhorn(Self::KIND, "Volume", "volumes", "volumes.longhorn.io", ConfirmRead::Volumes);
}
