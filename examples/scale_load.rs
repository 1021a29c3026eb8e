//! Loads, touches and deletes the synthetic Longhorn state of the scale harness
//! (`e2e/scale.sh`) in the cluster KUBECONFIG names, with direct API calls in parallel.
//!
//! ```text
//! cargo run --example scale_load -- load --nodes 10 --volumes 1000 [--concurrency 32]
//! cargo run --example scale_load -- heartbeat [--interval 1s] [--kinds volumes,engines]   # until SIGTERM/Ctrl-C
//! cargo run --example scale_load -- delete [--concurrency 32]
//! cargo run --example scale_load -- lists [--mode paged|plain|streaming]
//! ```
//!
//! `load` creates every object of [`Synthetic`] (status stripped), then writes its status
//! through the status subresource; an object that already exists is an error (run `delete`
//! first). `heartbeat` patches an annotation on one synthetic object of every kind (or of the
//! `--kinds` given) each interval, so those watches of the guard see events and stay current. `delete`
//! removes every object labelled `longhorn-guard-scale=true` (pods with grace period 0).
//! `lists` times LISTs of every kind the guard watches, paged as its watches page them (or
//! `--mode plain`: one plain LIST a kind; `--mode streaming`: a watch with
//! `sendInitialEvents` read to its end marker), each body read and dropped (no decoding beyond
//! the continue token): each kind alone, then all at once; it prints one JSON line (`mode`,
//! `longest_ms`, `longest`, `all_ms`, `bytes`).
//! Exit status: 0 done, 1 an API call failed (the first error on stderr), 2 bad arguments.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use futures::TryStreamExt as _;
use http_body_util::BodyExt as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use longhorn_guard::cluster::readset::{Resource, RESOURCES};
use longhorn_guard::cluster::watch::ListWay;
use longhorn_guard::cluster::LONGHORN_NAMESPACE;
use longhorn_guard::synthetic::{Group, Synthetic, LABEL};
use serde_json::{json, Value};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Parser)]
#[command(about = "Load, touch or delete the scale harness's synthetic Longhorn state")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the synthetic state and write its status.
    Load {
        #[arg(long, default_value_t = 10)]
        nodes: usize,
        #[arg(long, default_value_t = 1_000)]
        volumes: usize,
        /// API calls in flight at once.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=512))]
        concurrency: u16,
    },
    /// Patch one object of every kind each interval, until SIGTERM or Ctrl-C.
    Heartbeat {
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Only these kinds, by plural (`volumes,engines`): the others stay quiet, as the
        /// slowly changing kinds of a busy Longhorn do.
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
    },
    /// Time LISTs of every kind the guard watches (each alone, then all at once).
    Lists {
        /// `paged` (as the guard's fallback pages them), `plain` (one LIST a kind) or
        /// `streaming` (a watch with `sendInitialEvents`, read to its end marker): the ways of
        /// `serve --lists`.
        #[arg(long, value_enum, default_value = "paged")]
        mode: ListWay,
    },
    /// Delete every synthetic object.
    Delete {
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=512))]
        concurrency: u16,
    },
}

fn api(client: &Client, group: Group) -> Api<DynamicObject> {
    let r = group.resource();
    let api_version =
        if r.group.is_empty() { r.version.to_string() } else { format!("{}/{}", r.group, r.version) };
    let ar = ApiResource {
        group: r.group.to_string(),
        version: r.version.to_string(),
        api_version,
        kind: r.kind.to_string(),
        plural: r.plural.to_string(),
    };
    if r.namespaced {
        Api::namespaced_with(client.clone(), LONGHORN_NAMESPACE, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

fn selector() -> ListParams {
    ListParams::default().labels(&format!("{LABEL}=true"))
}

/// Creates one object without its status, then writes the status through the subresource.
async fn create(api: &Api<DynamicObject>, group: Group, mut object: Value) -> Result<(), Error> {
    let status = object.as_object_mut().and_then(|o| o.remove("status"));
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let what = format!("{} {name}", group.resource().plural);
    let typed: DynamicObject = serde_json::from_value(object).map_err(|e| format!("{what}: {e}"))?;
    api.create(&PostParams::default(), &typed).await.map_err(|e| format!("create {what}: {e}"))?;
    if let Some(status) = status.filter(|_| group.has_status()) {
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
            .await
            .map_err(|e| format!("status of {what}: {e}"))?;
    }
    Ok(())
}

async fn load(client: Client, synthetic: Synthetic, concurrency: usize) -> Result<(), Error> {
    let started = Instant::now();
    let mut total = 0;
    for group in Group::ALL {
        let t = Instant::now();
        let api = api(&client, group);
        futures::stream::iter(synthetic.objects(group).map(Ok::<_, Error>))
            .try_for_each_concurrent(concurrency, |object| {
                let api = api.clone();
                async move { create(&api, group, object).await }
            })
            .await?;
        let n = synthetic.count(group);
        total += n;
        eprintln!(
            "scale_load: {n:>6} {:<16} in {:>6.1}s",
            group.resource().plural,
            t.elapsed().as_secs_f64()
        );
    }
    eprintln!("scale_load: {total} objects loaded in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

async fn heartbeat(client: Client, interval: Duration, kinds: &[String]) -> Result<(), Error> {
    let plurals: Vec<&str> = Group::ALL.iter().map(|g| g.resource().plural).collect();
    if let Some(unknown) = kinds.iter().find(|k| !plurals.contains(&k.as_str())) {
        return Err(format!("--kinds: no kind {unknown:?} (one of {})", plurals.join(", ")).into());
    }
    let mut targets = Vec::new();
    for group in
        Group::ALL.into_iter().filter(|g| kinds.is_empty() || kinds.iter().any(|k| k == g.resource().plural))
    {
        let api = api(&client, group);
        let first =
            api.list_metadata(&selector().limit(1)).await.map_err(|e| format!("list {group:?}: {e}"))?;
        match first.items.first().and_then(|o| o.metadata.name.clone()) {
            Some(name) => targets.push((api, name)),
            None => {
                return Err(
                    format!("no synthetic {} to touch: run load first", group.resource().plural).into()
                )
            }
        }
    }
    let mut tick = tokio::time::interval(interval);
    let mut stop = longhorn_guard::signal::Termination::listen();
    for beat in 0u64.. {
        tokio::select! {
            () = stop.recv() => break,
            _ = tick.tick() => {}
        }
        let patch = json!({"metadata": {"annotations": {format!("{LABEL}/heartbeat"): beat.to_string()}}});
        // All kinds at once: a slow API server must not leave one kind's watch without events.
        futures::future::try_join_all(targets.iter().map(|(api, name)| {
            let patch = &patch;
            async move {
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map_err(|e| format!("heartbeat on {name}: {e}"))
            }
        }))
        .await?;
    }
    Ok(())
}

async fn delete(client: Client, concurrency: usize) -> Result<(), Error> {
    let started = Instant::now();
    let mut total = 0;
    for group in Group::ALL.into_iter().rev() {
        let api = api(&client, group);
        let names: Vec<String> = match api.list_metadata(&selector()).await {
            Ok(list) => list.items.into_iter().filter_map(|o| o.metadata.name).collect(),
            // The CRDs (or the namespace) are not there: nothing of ours to delete.
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(format!("list {}: {e}", group.resource().plural).into()),
        };
        total += names.len();
        let params = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        futures::stream::iter(names.into_iter().map(Ok::<_, Error>))
            .try_for_each_concurrent(concurrency, |name| {
                let (api, params) = (api.clone(), params.clone());
                async move {
                    match api.delete(&name, &params).await {
                        Ok(_) => Ok(()),
                        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                        Err(e) => Err(format!("delete {} {name}: {e}", group.resource().plural).into()),
                    }
                }
            })
            .await?;
    }
    eprintln!("scale_load: {total} objects deleted in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Reads every page of `r`'s kind as the guard's watch pages it (or as `mode` says): (bytes
/// read, wall time).
async fn list_kind(client: &Client, r: &Resource, mode: ListWay) -> Result<(usize, Duration), Error> {
    #[derive(serde::Deserialize)]
    struct Page {
        metadata: kube::core::ListMeta,
    }
    let started = Instant::now();
    if mode == ListWay::Streaming {
        return stream_kind(client, r).await.map(|bytes| (bytes, started.elapsed()));
    }
    let (mut bytes, mut token) = (0, None::<String>);
    loop {
        let mut lp = ListParams::default();
        if mode == ListWay::Paged {
            lp = lp.limit(r.kind.page_size());
        }
        lp.continue_token = token.take();
        let req =
            kube::core::Request::new(r.list_path()).list(&lp).map_err(|e| format!("{}: {e}", r.display))?;
        let res = client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(|e| format!("{}: {e}", r.display))?;
        if !res.status().is_success() {
            return Err(format!("list {}: HTTP {}", r.display, res.status()).into());
        }
        let body = res.into_body().collect().await.map_err(|e| format!("{}: {e}", r.display))?.to_bytes();
        bytes += body.len();
        let page: Page = serde_json::from_slice(&body).map_err(|e| format!("{}: {e}", r.display))?;
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok((bytes, started.elapsed()));
        }
    }
}

/// Reads `r`'s kind as a streaming list (a watch with `sendInitialEvents`) up to the BOOKMARK
/// that ends its initial events: the bytes read.
async fn stream_kind(client: &Client, r: &Resource) -> Result<usize, Error> {
    let wp = kube::api::WatchParams { timeout: Some(120), ..kube::api::WatchParams::streaming_lists() };
    let req =
        kube::core::Request::new(r.list_path()).watch(&wp, "").map_err(|e| format!("{}: {e}", r.display))?;
    let res =
        client.send(req.map(kube::client::Body::from)).await.map_err(|e| format!("{}: {e}", r.display))?;
    if !res.status().is_success() {
        return Err(format!("watch {}: HTTP {}", r.display, res.status()).into());
    }
    let mut body = res.into_body();
    let (mut bytes, mut line) = (0, Vec::new());
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("{}: {e}", r.display))?;
        let Ok(data) = frame.into_data() else { continue };
        bytes += data.len();
        for part in data.split_inclusive(|&b| b == b'\n') {
            line.extend_from_slice(part);
            if line.last() == Some(&b'\n') {
                let text = String::from_utf8_lossy(&line);
                if text.starts_with("{\"type\":\"BOOKMARK\"") && text.contains("k8s.io/initial-events-end") {
                    return Ok(bytes);
                }
                line.clear();
            }
        }
    }
    Err(format!("watch {}: ended before its initial events did", r.display).into())
}

async fn lists(client: Client, mode: ListWay) -> Result<(), Error> {
    let mut longest = (Duration::ZERO, "");
    let mut total = 0;
    for r in &RESOURCES {
        let (bytes, took) = list_kind(&client, r, mode).await?;
        total += bytes;
        if took > longest.0 {
            longest = (took, r.display);
        }
    }
    let started = Instant::now();
    futures::future::try_join_all(RESOURCES.iter().map(|r| list_kind(&client, r, mode))).await?;
    let all = started.elapsed();
    let ms = |d: Duration| d.as_millis();
    println!(
        "{}",
        json!({"mode": format!("{mode:?}").to_lowercase(), "longest_ms": ms(longest.0), "longest": longest.1, "all_ms": ms(all), "bytes": total})
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("scale_load: no Kubernetes client from KUBECONFIG: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Load { nodes, volumes, concurrency } => match Synthetic::new(nodes, volumes) {
            Ok(synthetic) => load(client, synthetic, concurrency.into()).await,
            Err(e) => {
                eprintln!("scale_load: {e}");
                return ExitCode::from(2);
            }
        },
        Command::Heartbeat { interval, kinds } => heartbeat(client, interval, &kinds).await,
        Command::Lists { mode } => lists(client, mode).await,
        Command::Delete { concurrency } => delete(client, concurrency.into()).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_load: {e}");
            ExitCode::from(1)
        }
    }
}
