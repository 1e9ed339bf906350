//! Reads a dashboard JSON file the way Grafana would and checks it against the dashboard
//! model: ids, grid, datasource variable, targets, units, descriptions, variables. It reads
//! the committed file, not the generator's data, so a hand edit is checked as well.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::render::GRID_WIDTH;

/// Panel types the dashboards may use.
const PANEL_TYPES: &[&str] = &["row", "timeseries", "heatmap", "stat", "table"];
/// Grafana's own variables, which need no definition.
const BUILTIN_VARIABLES: &[&str] = &["__rate_interval", "__interval", "__range", "__range_s"];
/// The datasource uid every panel and target must use.
const DATASOURCE_UID: &str = "${datasource}";

/// A query of a panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub ref_id: String,
    pub expr: String,
}

/// A panel with queries (rows excluded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelInfo {
    pub id: u64,
    pub title: String,
    pub targets: Vec<Target>,
    /// Its data links.
    pub links: Vec<DataLink>,
}

/// A panel's data link to another dashboard, read from its URL `/d/<uid>?…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLink {
    pub url: String,
    /// The dashboard uid the link opens.
    pub uid: String,
    /// `var-<name>=${__field.labels.<label>}` parameters: the variables set from the clicked
    /// series' labels, as (variable, label).
    pub from_labels: Vec<(String, String)>,
}

impl DataLink {
    /// Parses a data link URL; `None` when it is not a link to a dashboard.
    pub fn parse(url: &str) -> Option<DataLink> {
        let rest = url.strip_prefix("/d/")?;
        let (uid, query) = rest.split_once('?').unwrap_or((rest, ""));
        let uid = uid.split('/').next().unwrap_or_default();
        let from_labels = query
            .split('&')
            .filter_map(|param| {
                let (name, value) = param.split_once('=')?;
                let var = name.strip_prefix("var-")?;
                let label = value.strip_prefix("${__field.labels.")?.strip_suffix('}')?;
                Some((var.to_owned(), label.to_owned()))
            })
            .collect();
        Some(DataLink {
            url: url.to_owned(),
            uid: uid.to_owned(),
            from_labels,
        })
    }
}

/// A query variable and the series selector of its `label_values(selector, label)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableInfo {
    pub name: String,
    pub selector: String,
}

/// What the checks found in one dashboard file.
#[derive(Debug, Clone, Default)]
pub struct DashboardInfo {
    pub uid: String,
    pub title: String,
    pub panels: Vec<PanelInfo>,
    pub variables: Vec<VariableInfo>,
    /// Everything that violates the model; empty when the file is fine.
    pub problems: Vec<String>,
}

/// Reads and checks a parsed dashboard.
pub fn inspect(d: &Value) -> DashboardInfo {
    let mut info = DashboardInfo {
        uid: str_at(d, "/uid").to_owned(),
        title: str_at(d, "/title").to_owned(),
        ..DashboardInfo::default()
    };
    let p = &mut info.problems;
    if info.title.is_empty() {
        p.push("no title".into());
    }
    let uid = str_at(d, "/uid");
    if uid.is_empty() || uid.len() > 40 {
        p.push(format!("uid {uid:?} must be 1 to 40 characters"));
    }
    if d["schemaVersion"].as_u64().is_none_or(|v| v < 36) {
        p.push("schemaVersion missing or older than 36".into());
    }
    let variables = d.pointer("/templating/list").and_then(Value::as_array);
    let names: BTreeSet<String> = variables
        .into_iter()
        .flatten()
        .map(|v| str_at(v, "/name").to_owned())
        .collect();
    info.variables = check_variables(variables.map_or(&[][..], Vec::as_slice), p);
    let Some(panels) = d["panels"].as_array() else {
        p.push("no panels array".into());
        return info;
    };
    let mut ids = BTreeSet::new();
    let mut all = Vec::new();
    for panel in panels {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    for panel in all {
        let title = str_at(panel, "/title");
        let id = panel["id"].as_u64();
        match id {
            Some(id) if !ids.insert(id) => p.push(format!("panel id {id} used twice")),
            None => p.push(format!("panel {title:?} has no integer id")),
            Some(_) => {}
        }
        if let Some(found) = check_panel(panel, &names, p) {
            let mut links = Vec::new();
            for link in panel
                .pointer("/fieldConfig/defaults/links")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let url = str_at(link, "/url");
                match DataLink::parse(url) {
                    Some(l) => {
                        for var in variables_in(url) {
                            let known = names.contains(&var)
                                || var.starts_with("__")
                                || BUILTIN_VARIABLES.contains(&var.as_str());
                            if !known {
                                p.push(format!("{title:?}: data link uses undefined ${var}"));
                            }
                        }
                        links.push(l);
                    }
                    None => p.push(format!("{title:?}: data link {url:?} opens no dashboard")),
                }
            }
            info.panels.push(PanelInfo {
                id: id.unwrap_or_default(),
                title: title.to_owned(),
                targets: found,
                links,
            });
        }
    }
    if info.panels.is_empty() {
        p.push("no panel with queries".into());
    }
    info
}

/// Checks one panel; returns its targets unless it is a row.
fn check_panel(
    panel: &Value,
    variables: &BTreeSet<String>,
    p: &mut Vec<String>,
) -> Option<Vec<Target>> {
    let title = str_at(panel, "/title");
    let kind = str_at(panel, "/type");
    let at = format!("panel {title:?}");
    if title.is_empty() {
        p.push(format!("{at}: no title"));
    }
    if !PANEL_TYPES.contains(&kind) {
        p.push(format!("{at}: unexpected type {kind:?}"));
    }
    let grid: Vec<Option<u64>> = ["h", "w", "x", "y"]
        .iter()
        .map(|k| panel["gridPos"][k].as_u64())
        .collect();
    match grid[..] {
        [Some(h), Some(w), Some(x), Some(_)] if h > 0 && w > 0 && x + w <= GRID_WIDTH => {}
        _ => p.push(format!(
            "{at}: gridPos {} is not on the 24-column grid",
            panel["gridPos"]
        )),
    }
    if kind == "row" {
        return None;
    }
    if str_at(panel, "/description").trim().is_empty() {
        p.push(format!("{at}: no description"));
    }
    if !uses_datasource_variable(&panel["datasource"]) {
        p.push(format!("{at}: datasource is not the $datasource variable"));
    }
    let unit = match kind {
        "heatmap" => str_at(panel, "/options/yAxis/unit"),
        _ => str_at(panel, "/fieldConfig/defaults/unit"),
    };
    if unit.is_empty() {
        p.push(format!("{at}: no unit"));
    }
    let targets = panel["targets"].as_array().map_or(&[][..], Vec::as_slice);
    if targets.is_empty() {
        p.push(format!("{at}: no targets"));
    }
    let mut refs = BTreeSet::new();
    let mut found = Vec::new();
    for t in targets {
        let ref_id = str_at(t, "/refId");
        let expr = str_at(t, "/expr");
        if ref_id.is_empty() || !refs.insert(ref_id) {
            p.push(format!("{at}: missing or repeated refId {ref_id:?}"));
        }
        if expr.trim().is_empty() {
            p.push(format!("{at} {ref_id}: empty expr"));
        }
        if !uses_datasource_variable(&t["datasource"]) {
            p.push(format!(
                "{at} {ref_id}: datasource is not the $datasource variable"
            ));
        }
        for var in variables_in(expr) {
            if !variables.contains(&var) && !BUILTIN_VARIABLES.contains(&var.as_str()) {
                p.push(format!("{at} {ref_id}: undefined variable ${var}"));
            }
        }
        found.push(Target {
            ref_id: ref_id.to_owned(),
            expr: expr.to_owned(),
        });
    }
    Some(found)
}

fn check_variables(list: &[Value], p: &mut Vec<String>) -> Vec<VariableInfo> {
    let find = |name: &str| list.iter().find(|v| v["name"] == name);
    match find("datasource") {
        Some(v) if v["type"] == "datasource" && v["query"] == "prometheus" => {}
        _ => p.push("no `datasource` variable of type datasource/prometheus".into()),
    }
    let mut found = Vec::new();
    for name in ["job", "cluster", "instance", "device"] {
        let Some(v) = find(name) else {
            p.push(format!("no `{name}` variable"));
            continue;
        };
        let query = v
            .pointer("/query/query")
            .and_then(Value::as_str)
            .unwrap_or_else(|| str_at(v, "/definition"));
        let selector = label_values_selector(query);
        if v["type"] != "query" || !uses_datasource_variable(&v["datasource"]) {
            p.push(format!("variable `{name}` must be a query on $datasource"));
        }
        match selector {
            Some(selector) => found.push(VariableInfo {
                name: name.to_owned(),
                selector: selector.to_owned(),
            }),
            None => p.push(format!(
                "variable `{name}`: {query:?} is not label_values(selector, label)"
            )),
        }
    }
    found
}

/// The selector of `label_values(selector, label)`.
pub fn label_values_selector(query: &str) -> Option<&str> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (selector, label) = inner.rsplit_once(',')?;
    (!label.trim().is_empty()).then_some(selector.trim())
}

fn uses_datasource_variable(ds: &Value) -> bool {
    ds["type"] == "prometheus" && ds["uid"] == DATASOURCE_UID
}

/// The Grafana variables (`$name`, `${name}`) an expression uses.
pub fn variables_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(pos) = rest.find('$') {
        rest = &rest[pos + 1..];
        let braced = rest.strip_prefix('{');
        let body = braced.unwrap_or(rest);
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_variables() {
        assert_eq!(
            label_values_selector("label_values(up{a=\"b,c\"}, instance)"),
            Some("up{a=\"b,c\"}")
        );
        assert_eq!(label_values_selector("query_result(up)"), None);
        assert_eq!(
            variables_in("rate(x{d=~\"$device\"}[$__rate_interval]) ${instance}"),
            ["device", "__rate_interval", "instance"]
        );
    }

    #[test]
    fn reports_broken_panels() {
        let d = serde_json::json!({
            "title": "t", "uid": "u", "schemaVersion": 39,
            "templating": {"list": []},
            "panels": [
                {"id": 1, "type": "timeseries", "title": "a",
                 "gridPos": {"h": 8, "w": 20, "x": 12, "y": 0},
                 "datasource": {"type": "prometheus", "uid": "prom"},
                 "targets": [{"refId": "A", "expr": "up{x=\"$nope\"}"}]},
                {"id": 1, "type": "row", "title": "r", "gridPos": {"h": 1, "w": 24, "x": 0, "y": 9}}
            ]
        });
        let info = inspect(&d);
        let text = info.problems.join("\n");
        for expected in [
            "id 1 used twice",
            "24-column grid",
            "no description",
            "datasource is not the $datasource variable",
            "no unit",
            "undefined variable $nope",
            "no `datasource` variable",
            "no `device` variable",
        ] {
            assert!(text.contains(expected), "{expected} missing from:\n{text}");
        }
        assert_eq!(info.panels.len(), 1);
    }
}
