//! Watched objects parsed once from the API's JSON straight into their lean types: what a
//! kube watcher yields for [`super::watch`], reduced to the key and the lean object (or why it
//! could not be read).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::{Kind, Meta, Object};

/// One watched object, parsed once from the API's JSON into its lean type `T`. The kube
/// metadata keeps only what the watcher reads (name, namespace, resourceVersion). An object
/// that does not fit the model keeps only its metadata and the parse error, so one odd
/// object never fails its whole list.
#[derive(Clone, Debug)]
pub struct Watched<T> {
    meta: ObjectMeta,
    object: Result<T, String>,
}

/// What is read of an object that does not fit its model.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct MetaOnly {
    metadata: Meta,
}

fn kube_meta(m: &mut Meta) -> ObjectMeta {
    ObjectMeta {
        name: m.name.as_deref().map(str::to_string),
        namespace: m.namespace.as_deref().map(str::to_string),
        resource_version: m.resource_version.take().map(String::from),
        ..ObjectMeta::default()
    }
}

/// Reads the object as raw JSON text first, so that an object that does not fit still yields
/// its name. The API server writes a watch event's `type` before its `object` (Go struct field
/// order), which lets serde hand the object over unbuffered; an event with `object` first
/// cannot be read this way: the watch reports an error and goes on past it, so the kind's
/// watcher starts over with a list ([`super::watch::loses_events`]) and the kind stays stale
/// (allows confirmed by reads) until that list is in: never a silent allow.
impl<'de, T: Kind> Deserialize<'de> for Watched<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: Box<RawValue> = Deserialize::deserialize(d)?;
        match serde_json::from_str::<T>(raw.get()) {
            Ok(mut t) => Ok(Self { meta: kube_meta(t.meta_mut()), object: Ok(t) }),
            Err(e) => {
                let mut m: MetaOnly = serde_json::from_str(raw.get()).unwrap_or_default();
                Ok(Self { meta: kube_meta(&mut m.metadata), object: Err(e.to_string()) })
            }
        }
    }
}

impl<T> kube::Resource for Watched<T> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// A watched object reduced to what the view applies: its key and its lean object, or the
/// reason it could not be read.
#[derive(Debug)]
pub struct Item {
    pub namespace: Option<String>,
    pub name: String,
    /// The object's `metadata.resourceVersion`: how far its watch has come.
    pub resource_version: Option<String>,
    pub object: Result<Object, String>,
}

impl<T: Kind> From<Watched<T>> for Item {
    fn from(w: Watched<T>) -> Self {
        Self {
            namespace: w.meta.namespace,
            name: w.meta.name.unwrap_or_default(),
            resource_version: w.meta.resource_version,
            object: w.object.map(|o| T::wrap(Box::new(o))),
        }
    }
}
