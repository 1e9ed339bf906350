//! Renders a [`Dashboard`] into Grafana's dashboard JSON model (schemaVersion 39): rows and
//! panels laid out on the 24-column grid with unique ids, every panel and target bound to the
//! `datasource` variable, and the `datasource`, `instance` and `device` variables.

use serde_json::{Value, json};

use crate::model::{Dashboard, DrillDown, Panel, Selection, Viz};

/// The schema version of the JSON model we write (Grafana 10.4 / 11).
pub const SCHEMA_VERSION: u64 = 39;
/// Height of every panel, in grid units.
const PANEL_HEIGHT: u64 = 8;
/// Grafana's grid width.
pub const GRID_WIDTH: u64 = 24;

/// The datasource reference every panel and target uses: the `datasource` variable.
pub fn datasource_ref() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// The dashboard as Grafana JSON.
pub fn render(d: &Dashboard) -> Value {
    let mut panels = Vec::new();
    let mut id = 0;
    let mut y = 0;
    for row in &d.rows {
        id += 1;
        panels.push(json!({
            "collapsed": false,
            "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
            "id": id,
            "panels": [],
            "title": row.title,
            "type": "row",
        }));
        y += 1;
        let mut x = 0;
        for panel in &row.panels {
            let w = u64::from(panel.width);
            if x + w > GRID_WIDTH {
                x = 0;
                y += PANEL_HEIGHT;
            }
            id += 1;
            let grid = json!({"h": PANEL_HEIGHT, "w": w, "x": x, "y": y});
            let mut rendered = render_panel(panel, id, grid);
            if let Some(link) = d.drill_down.and_then(|to| data_link(panel, to)) {
                rendered["fieldConfig"]["defaults"]["links"] = json!([link]);
            }
            panels.push(rendered);
            x += w;
        }
        y += PANEL_HEIGHT;
    }
    json!({
        "annotations": {"list": [{
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": true,
            "hide": true,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        }]},
        "description": d.description,
        "editable": true,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": null,
        "links": [{
            "asDropdown": false,
            "icon": "external link",
            "includeVars": true,
            "keepTime": true,
            "tags": ["wbscope"],
            "targetBlank": false,
            "title": "wbscope dashboards",
            "type": "dashboards",
        }],
        "panels": panels,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["wbscope", "writeback", "storage"],
        "templating": {"list": variables(d.selection)},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": d.title,
        "uid": d.uid,
        "version": 1,
        "weekStart": "",
    })
}

/// The data link from a panel to `to`: for the clicked series' host, and its device, when
/// every query's series carry them (the legends name what the series carry); otherwise for the
/// host and device selected on this dashboard (fleet heatmaps sum over hosts). `job`,
/// `cluster`, the data source and the time range carry over as selected.
pub fn data_link(p: &Panel, to: DrillDown) -> Option<Value> {
    let all = |label: &str| {
        let template = format!("{{{{{label}}}}}");
        !p.queries.is_empty() && p.queries.iter().all(|q| q.legend.contains(&template))
    };
    let (instance, device) = match (all("instance"), all("device")) {
        (true, true) => (
            "var-instance=${__field.labels.instance}",
            "var-device=${__field.labels.device}",
        ),
        (true, false) => (
            "var-instance=${__field.labels.instance}",
            "${device:queryparam}",
        ),
        _ => ("${instance:queryparam}", "${device:queryparam}"),
    };
    let title = match (all("instance"), all("device")) {
        (true, true) => format!(
            "{} for ${{__field.labels.instance}} ${{__field.labels.device}}",
            to.title
        ),
        (true, false) => format!("{} for ${{__field.labels.instance}}", to.title),
        _ => format!("{} for the selected host and device", to.title),
    };
    Some(json!({
        "targetBlank": false,
        "title": title,
        "url": format!(
            "/d/{}?${{datasource:queryparam}}&${{job:queryparam}}&${{cluster:queryparam}}\
             &{instance}&{device}&${{__url_time_range}}",
            to.uid
        ),
    }))
}

fn render_panel(p: &Panel, id: u64, grid: Value) -> Value {
    let instant = matches!(p.viz, Viz::Table | Viz::StatusTable { .. } | Viz::Stat);
    let targets: Vec<Value> = p
        .queries
        .iter()
        .zip(b'A'..)
        .map(|(q, letter)| {
            let format = match p.viz {
                Viz::Heatmap => "heatmap",
                Viz::Table | Viz::StatusTable { .. } => "table",
                Viz::TimeSeries { .. } | Viz::Stat => "time_series",
            };
            json!({
                "datasource": datasource_ref(),
                "editorMode": "code",
                "expr": q.expr,
                "format": format,
                "instant": instant,
                "legendFormat": q.legend,
                "range": !instant,
                "refId": char::from(letter).to_string(),
            })
        })
        .collect();
    let (kind, field_config, options) = match p.viz {
        Viz::TimeSeries { mark } => ("timeseries", series_fields(p.unit, mark), series_options()),
        Viz::Heatmap => ("heatmap", heatmap_fields(), heatmap_options(p.unit)),
        Viz::Stat => ("stat", stat_fields(p.unit), stat_options()),
        Viz::Table => ("table", table_fields(p.unit, None), table_options()),
        Viz::StatusTable { zero, one } => (
            "table",
            table_fields(p.unit, Some((zero, one))),
            table_options(),
        ),
    };
    let mut panel = json!({
        "datasource": datasource_ref(),
        "description": p.description,
        "fieldConfig": field_config,
        "gridPos": grid,
        "id": id,
        "options": options,
        "targets": targets,
        "title": p.title,
        "type": kind,
    });
    if kind == "table" {
        panel["transformations"] = json!([{
            "id": "organize",
            "options": {
                "excludeByName": {"Time": true, "__name__": true, "job": true},
                "indexByName": {},
                "renameByName": {},
            },
        }]);
    }
    panel
}

fn series_fields(unit: &str, mark: Option<f64>) -> Value {
    let mut steps = vec![json!({"color": "green", "value": null})];
    if let Some(mark) = mark {
        steps.push(json!({"color": "red", "value": mark}));
    }
    let line = if mark.is_some() { "line" } else { "off" };
    json!({
        "defaults": {
            "color": {"mode": "palette-classic"},
            "custom": {
                "drawStyle": "line",
                "fillOpacity": 10,
                "lineWidth": 1,
                "showPoints": "never",
                "spanNulls": false,
                "thresholdsStyle": {"mode": line},
            },
            "min": 0,
            "thresholds": {"mode": "absolute", "steps": steps},
            "unit": unit,
        },
        "overrides": [],
    })
}

fn series_options() -> Value {
    json!({
        "legend": {
            "calcs": ["mean", "max", "lastNotNull"],
            "displayMode": "table",
            "placement": "bottom",
            "showLegend": true,
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    })
}

fn heatmap_fields() -> Value {
    json!({
        "defaults": {
            "custom": {
                "hideFrom": {"legend": false, "tooltip": false, "viz": false},
                "scaleDistribution": {"type": "linear"},
            },
        },
        "overrides": [],
    })
}

fn heatmap_options(unit: &str) -> Value {
    json!({
        "calculate": false,
        "cellGap": 1,
        "color": {
            "exponent": 0.5,
            "fill": "dark-orange",
            "mode": "scheme",
            "reverse": false,
            "scale": "exponential",
            "scheme": "Oranges",
            "steps": 64,
        },
        "exemplars": {"color": "rgba(255,0,255,0.7)"},
        "filterValues": {"le": 1e-9},
        "legend": {"show": true},
        "rowsFrame": {"layout": "auto"},
        "showValue": "never",
        "tooltip": {"mode": "single", "showColorScale": false, "yHistogram": true},
        "yAxis": {"axisPlacement": "left", "reverse": false, "unit": unit},
    })
}

fn stat_fields(unit: &str) -> Value {
    json!({
        "defaults": {
            "color": {"mode": "thresholds"},
            "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": null}]},
            "unit": unit,
        },
        "overrides": [],
    })
}

fn stat_options() -> Value {
    json!({
        "colorMode": "value",
        "graphMode": "none",
        "justifyMode": "auto",
        "orientation": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": false},
        "showPercentChange": false,
        "textMode": "value_and_name",
        "wideLayout": true,
    })
}

fn table_fields(unit: &str, states: Option<(&str, &str)>) -> Value {
    let mut defaults = json!({
        "custom": {"align": "auto", "cellOptions": {"type": "auto"}},
        "unit": unit,
    });
    if let Some((zero, one)) = states {
        defaults["custom"]["cellOptions"] = json!({"type": "color-background"});
        defaults["mappings"] = json!([{
            "type": "value",
            "options": {
                "0": {"color": "red", "index": 0, "text": zero},
                "1": {"color": "green", "index": 1, "text": one},
            },
        }]);
    }
    json!({"defaults": defaults, "overrides": []})
}

fn table_options() -> Value {
    json!({
        "cellHeight": "sm",
        "footer": {"fields": "", "reducer": ["sum"], "show": false},
        "showHeader": true,
    })
}

/// The `datasource`, `instance` and `device` template variables.
fn variables(selection: Selection) -> Vec<Value> {
    let (multi, op) = match selection {
        Selection::Multi => (true, "=~"),
        Selection::Single => (false, "="),
    };
    let query_var = |name: &str, label: &str, query: String, multi: bool| {
        let mut v = json!({
            "current": {},
            "datasource": datasource_ref(),
            "definition": query,
            "hide": 0,
            "includeAll": multi,
            "label": label,
            "multi": multi,
            "name": name,
            "options": [],
            "query": {
                "qryType": 1,
                "query": query,
                "refId": "PrometheusVariableQueryEditor-VariableQuery",
            },
            "refresh": 2,
            "regex": "",
            "skipUrlSync": false,
            "sort": 1,
            "type": "query",
        });
        if multi {
            // "All" as a regex, not the list of values: it also matches series without the
            // label (fleets without a `cluster` label) and stays short in the URL.
            v["allValue"] = json!(".*");
        }
        v
    };
    vec![
        json!({
            "current": {},
            "hide": 0,
            "includeAll": false,
            "label": "Data source",
            "multi": false,
            "name": "datasource",
            "options": [],
            "query": "prometheus",
            "refresh": 1,
            "regex": "",
            "skipUrlSync": false,
            "type": "datasource",
        }),
        // Job and cluster are multi-value on every dashboard, so links between the dashboards
        // carry them over as they are.
        query_var(
            "job",
            "Job",
            "label_values(wbscope_build_info, job)".to_owned(),
            true,
        ),
        query_var(
            "cluster",
            "Cluster",
            "label_values(wbscope_build_info{job=~\"$job\"}, cluster)".to_owned(),
            true,
        ),
        query_var(
            "instance",
            "Host",
            "label_values(wbscope_build_info{job=~\"$job\",cluster=~\"$cluster\"}, instance)"
                .to_owned(),
            multi,
        ),
        // Every wbscope series with a device: block devices, filesystems' devices, and `all`
        // for sync(2).
        query_var(
            "device",
            "Device",
            format!(
                "label_values({{__name__=~\"wbscope_.+\",job=~\"$job\",cluster=~\"$cluster\",\
                 instance{op}\"$instance\",device!=\"\"}}, device)"
            ),
            multi,
        ),
    ]
}
