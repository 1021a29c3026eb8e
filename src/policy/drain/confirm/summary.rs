//! Instance managers read as the API server prints them: the Table of the CRD's printer
//! columns (`Name`, `Data Engine`, `State`, `Type`, `Node`), without their instance lists.
//!
//! A decision for node N reads the instance lists (most of the kind's bytes) only for N's own
//! instance managers; of the others the Table carries what it reads, but the image
//! ([`needs_images`]).

use serde::Deserialize;
use serde_json::Value;

use crate::cluster::objects::{InstanceManager, LONGHORN_NAMESPACE};
use crate::cluster::Name;

/// The `Accept` header asking for a Table.
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// The columns read, by their names in Longhorn's CRD.
const COLUMNS: [&str; 5] = ["Name", "Data Engine", "State", "Type", "Node"];

/// Why a Table cannot stand in for the instance managers (the full list is read instead).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SummaryError {
    #[error("the instance-manager table is not JSON of a Table: {0}")]
    Decode(String),
    #[error("the answer is a {kind:?} of {api_version:?}, not a Table of \"meta.k8s.io/v1\"")]
    NotATable { kind: String, api_version: String },
    #[error("the instance-manager table is one page of a longer list (it has a continue token)")]
    Partial,
    #[error("the instance-manager table has no {0:?} column")]
    MissingColumn(&'static str),
    #[error("row {row} of the instance-manager table has a {column:?} cell that is not text")]
    Cell { row: usize, column: &'static str },
    #[error("row {row} of the instance-manager table has {cells} cells for {columns} columns")]
    ShortRow { row: usize, cells: usize, columns: usize },
}

#[derive(Deserialize)]
struct Table {
    #[serde(default)]
    kind: String,
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
    #[serde(rename = "columnDefinitions", default)]
    columns: Vec<Column>,
    #[serde(default)]
    rows: Vec<Row>,
}

#[derive(Deserialize)]
struct Column {
    name: String,
}

#[derive(Deserialize)]
struct Row {
    #[serde(default)]
    cells: Vec<Value>,
}

/// Instance managers from a Table body: name, node, type, data engine and state set; image
/// and instance lists empty. Only a whole `meta.k8s.io/v1` Table stands for every instance
/// manager: one page of a longer one would leave some out, and a replica whose instance manager
/// is missing is then placed by its node.
pub fn parse(body: &str) -> Result<Vec<InstanceManager>, SummaryError> {
    let table: Table = serde_json::from_str(body).map_err(|e| SummaryError::Decode(e.to_string()))?;
    if table.kind != "Table" || table.api_version != "meta.k8s.io/v1" {
        return Err(SummaryError::NotATable { kind: table.kind, api_version: table.api_version });
    }
    if table.metadata.continue_.is_some_and(|t| !t.is_empty()) {
        return Err(SummaryError::Partial);
    }
    let mut at = [0; COLUMNS.len()];
    for (i, name) in COLUMNS.iter().enumerate() {
        at[i] =
            table.columns.iter().position(|c| c.name == *name).ok_or(SummaryError::MissingColumn(name))?;
    }
    let mut out = Vec::with_capacity(table.rows.len());
    for (row, r) in table.rows.iter().enumerate() {
        // The API server prints every cell (null where a path finds nothing): a short row is
        // not its answer.
        if r.cells.len() < table.columns.len() {
            return Err(SummaryError::ShortRow { row, cells: r.cells.len(), columns: table.columns.len() });
        }
        let cell = |i: usize| -> Result<Name, SummaryError> {
            match r.cells.get(at[i]) {
                // A column whose path finds nothing prints as null: the field is unset.
                Some(Value::Null) => Ok(Name::default()),
                Some(Value::String(s)) => Ok(Name::from(s.as_str())),
                None | Some(_) => Err(SummaryError::Cell { row, column: COLUMNS[i] }),
            }
        };
        let mut im = InstanceManager::default();
        let name = cell(0)?;
        if name.is_empty() {
            return Err(SummaryError::Cell { row, column: COLUMNS[0] });
        }
        im.metadata.name = Some(name);
        im.metadata.namespace = Some(Name::from(LONGHORN_NAMESPACE));
        im.spec.data_engine = cell(1)?;
        im.status.current_state = cell(2)?;
        im.spec.type_ = cell(3)?;
        im.spec.node_id = cell(4)?;
        out.push(im);
    }
    Ok(out)
}

/// True when a replica's instance manager may have to be picked by image: some node has more
/// than one instance manager that can run replicas of one data engine (an upgrade leaves old
/// and new side by side). The Table has no image, so the full list is read then.
pub fn needs_images(ims: &[InstanceManager]) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    ims.iter()
        .filter_map(|im| Some((im.spec.node_id.as_str(), im.replica_engine()?)))
        .any(|site| !seen.insert(site))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(columns: &[&str], rows: Value) -> String {
        let defs: Vec<Value> = columns.iter().map(|c| json!({"name": c, "type": "string"})).collect();
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "columnDefinitions": defs, "rows": rows})
            .to_string()
    }

    const ALL: [&str; 6] = ["Name", "Data Engine", "State", "Type", "Node", "Age"];

    #[test]
    fn rows_become_instance_managers_by_column_name() {
        // Columns in another order than Longhorn's still map by name.
        let body = table(
            &["Name", "Node", "Type", "State", "Data Engine", "Age"],
            json!([{"cells": ["im-a", "n1", "aio", "running", "v1", "3d"]},
                   {"cells": ["im-b", "n2", null, "error", null, "1h"]}]),
        );
        let ims = parse(&body).unwrap();
        assert_eq!(ims.len(), 2);
        let a = &ims[0];
        assert_eq!(a.metadata.name.as_deref(), Some("im-a"));
        assert_eq!(a.metadata.namespace.as_deref(), Some(LONGHORN_NAMESPACE));
        assert_eq!((a.spec.node_id.as_str(), a.spec.type_.as_str()), ("n1", "aio"));
        assert_eq!((a.spec.data_engine.as_str(), a.status.current_state.as_str()), ("v1", "running"));
        assert!(a.spec.image.is_empty() && a.status.instance_engines.is_empty());
        let b = &ims[1];
        assert_eq!((b.spec.type_.as_str(), b.spec.data_engine.as_str()), ("", ""));
        assert_eq!(b.status.current_state.as_str(), "error");
    }

    #[test]
    fn a_table_without_a_needed_column_or_with_odd_cells_is_refused() {
        let body = table(&["Name", "State", "Type", "Node"], json!([]));
        assert_eq!(parse(&body).unwrap_err(), SummaryError::MissingColumn("Data Engine"));
        let body = table(&ALL, json!([{"cells": ["im-a", "v1", 3, "aio", "n1", "1d"]}]));
        assert_eq!(parse(&body).unwrap_err(), SummaryError::Cell { row: 0, column: "State" });
        let body = table(&ALL, json!([{"cells": [null, "v1", "running", "aio", "n1", "1d"]}]));
        assert_eq!(parse(&body).unwrap_err(), SummaryError::Cell { row: 0, column: "Name" });
        let body = table(&ALL, json!([{"cells": ["im-a", "v1", "running", "aio"]}]));
        assert_eq!(parse(&body).unwrap_err(), SummaryError::ShortRow { row: 0, cells: 4, columns: 6 });
        assert!(matches!(parse("not json"), Err(SummaryError::Decode(_))));
    }

    #[test]
    fn only_a_whole_table_stands_for_every_instance_manager() {
        let rows = json!([{"cells": ["im-a", "v1", "running", "aio", "n1", "1d"]}]);
        let whole: Value = serde_json::from_str(&table(&ALL, rows)).unwrap();
        assert_eq!(parse(&whole.to_string()).unwrap().len(), 1);
        let mut paged = whole.clone();
        paged["metadata"] = json!({"continue": "page-2", "resourceVersion": "5"});
        assert_eq!(parse(&paged.to_string()).unwrap_err(), SummaryError::Partial);
        // An empty token is the last page, which is the whole list.
        paged["metadata"]["continue"] = json!("");
        assert_eq!(parse(&paged.to_string()).unwrap().len(), 1);
        for (kind, api_version) in
            [("InstanceManagerList", "meta.k8s.io/v1"), ("Table", "meta.k8s.io/v1beta1"), ("", "")]
        {
            let mut other = whole.clone();
            other["kind"] = json!(kind);
            other["apiVersion"] = json!(api_version);
            let want = SummaryError::NotATable { kind: kind.into(), api_version: api_version.into() };
            assert_eq!(parse(&other.to_string()).unwrap_err(), want);
        }
        assert!(matches!(parse("{\"items\": 1}"), Err(SummaryError::NotATable { .. })));
    }

    #[test]
    fn images_are_needed_only_where_two_instance_managers_can_run_one_replica() {
        let im = |node: &str, type_: &str, engine: &str| {
            let mut im = InstanceManager::default();
            im.spec.node_id = node.into();
            im.spec.type_ = type_.into();
            im.spec.data_engine = engine.into();
            im
        };
        assert!(!needs_images(&[im("n1", "aio", "v1"), im("n2", "aio", "v1"), im("n1", "aio", "v2")]));
        assert!(!needs_images(&[im("n1", "aio", "v1"), im("n1", "engine", "v1")]));
        assert!(needs_images(&[im("n1", "aio", "v1"), im("n1", "aio", "")]));
        assert!(needs_images(&[im("n1", "replica", "v1"), im("n1", "aio", "v1")]));
    }
}
