//! Confirming drain-relevant state with consistent reads from the API server, for allows
//! that would otherwise rest on watch data older than `drain.maxViewAge`.
//!
//! Every LIST here carries no `resourceVersion`, which makes the API server serve it from
//! etcd with a quorum read: the result is at least as new as any write acknowledged before
//! the request. `longhorn-guard check drain` without `--state` uses the same reads.

use std::collections::BTreeSet;
use std::time::SystemTime;

use futures::future::try_join_all;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use super::{
    ClusterView, Object, ObjectKind, Source, COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE,
};
use crate::admit::Confirmer;
use crate::policy::drain::{engines_reported_by, volume_of_engine_name};

/// Why a confirmation read failed. One line each.
#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    #[error("cannot list {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read {what}: {message}")]
    Decode { what: String, message: String },
}

/// A [`Confirmer`] that reads from the API server through `client`.
pub fn confirmer(client: kube::Client) -> Confirmer {
    std::sync::Arc::new(move |node: String| {
        let client = client.clone();
        Box::pin(async move { read_node_state(&client, &node).await.map_err(|e| e.to_string()) })
    })
}

fn resource(kind: ObjectKind) -> ApiResource {
    let (group, version, k) = match kind {
        ObjectKind::Node => ("", "v1", "Node"),
        ObjectKind::Pod => ("", "v1", "Pod"),
        ObjectKind::StorageClass => ("storage.k8s.io", "v1", "StorageClass"),
        ObjectKind::Volume => ("longhorn.io", "v1beta2", "Volume"),
        ObjectKind::Replica => ("longhorn.io", "v1beta2", "Replica"),
        ObjectKind::Engine => ("longhorn.io", "v1beta2", "Engine"),
        ObjectKind::LonghornNode => ("longhorn.io", "v1beta2", "Node"),
        ObjectKind::Setting => ("longhorn.io", "v1beta2", "Setting"),
        ObjectKind::InstanceManager => ("longhorn.io", "v1beta2", "InstanceManager"),
    };
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, k))
}

/// One consistent LIST of `kind` (namespaced in `longhorn-system` unless it is a core Node),
/// optionally filtered by a label selector, converted to typed objects.
async fn list(
    client: &kube::Client,
    kind: ObjectKind,
    labels: Option<&str>,
    fields: Option<&str>,
) -> Result<Vec<Object>, ConfirmError> {
    let ar = resource(kind);
    let api: Api<DynamicObject> = match kind {
        ObjectKind::Node | ObjectKind::StorageClass => Api::all_with(client.clone(), &ar),
        _ => Api::namespaced_with(client.clone(), LONGHORN_NAMESPACE, &ar),
    };
    let mut lp = ListParams::default();
    if let Some(l) = labels {
        lp = lp.labels(l);
    }
    if let Some(f) = fields {
        lp = lp.fields(f);
    }
    let what = match labels.or(fields) {
        Some(l) => format!("{} ({l})", kind.display()),
        None => kind.display().to_string(),
    };
    let items = api.list(&lp).await.map_err(|source| ConfirmError::Api { what: what.clone(), source })?;
    items
        .items
        .into_iter()
        .map(|item| {
            let value: Value = serde_json::to_value(&item)
                .map_err(|e| ConfirmError::Decode { what: what.clone(), message: e.to_string() })?;
            Object::from_value(kind, value)
                .map_err(|e| ConfirmError::Decode { what: what.clone(), message: e.to_string() })
        })
        .collect()
}

/// Reads everything a drain decision for `node` rests on: the node's replicas and engines,
/// every replica and engine of their volumes, those volumes, all Kubernetes and Longhorn
/// nodes, all instance managers and their pods, and the storage-network setting.
pub async fn read_node_state(client: &kube::Client, node: &str) -> Result<ClusterView, ConfirmError> {
    let by_node = format!("longhornnode={node}");
    let im_pods = format!("{COMPONENT_LABEL}={INSTANCE_MANAGER_COMPONENT}");
    let (replicas_here, engines_here, ims, nodes, lh_nodes, pods, settings) = futures::try_join!(
        list(client, ObjectKind::Replica, Some(&by_node), None),
        list(client, ObjectKind::Engine, Some(&by_node), None),
        list(client, ObjectKind::InstanceManager, None, None),
        list(client, ObjectKind::Node, None, None),
        list(client, ObjectKind::LonghornNode, None, None),
        list(client, ObjectKind::Pod, Some(&im_pods), None),
        list(client, ObjectKind::Setting, None, Some("metadata.name=storage-network")),
    )?;

    let mut volumes: BTreeSet<String> = BTreeSet::new();
    for o in replicas_here.iter().chain(engines_here.iter()) {
        match o {
            Object::Replica(r) => volumes.extend(r.volume().map(str::to_string)),
            Object::Engine(e) => volumes.extend(e.volume().map(str::to_string)),
            _ => {}
        }
    }
    let ims_here = ims.iter().filter_map(|o| match o {
        Object::InstanceManager(im) if im.spec.node_id == node => Some(im),
        _ => None,
    });
    for engine in engines_reported_by(ims_here) {
        volumes.extend(volume_of_engine_name(&engine).map(str::to_string));
    }

    let per_volume = try_join_all(volumes.iter().map(|v| async move {
        let sel = format!("longhornvolume={v}");
        let by_name = format!("metadata.name={v}");
        let (vols, reps, engs) = futures::try_join!(
            list(client, ObjectKind::Volume, None, Some(&by_name)),
            list(client, ObjectKind::Replica, Some(&sel), None),
            list(client, ObjectKind::Engine, Some(&sel), None),
        )?;
        Ok::<_, ConfirmError>(vols.into_iter().chain(reps).chain(engs).collect::<Vec<_>>())
    }))
    .await?;

    let objects = replicas_here
        .into_iter()
        .chain(engines_here)
        .chain(ims)
        .chain(nodes)
        .chain(lh_nodes)
        .chain(pods)
        .chain(settings)
        .chain(per_volume.into_iter().flatten());
    Ok(ClusterView::from_objects(Source::Direct, objects, SystemTime::now()))
}
