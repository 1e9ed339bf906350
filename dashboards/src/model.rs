//! The dashboards as data: rows of panels, each with its queries, unit and description. The
//! generator renders this into Grafana's dashboard JSON model (see `render`); keeping the
//! definitions here, not in hand-edited JSON, keeps ids, layout and datasources consistent.

/// How Grafana should draw a panel.
#[derive(Debug, Clone, PartialEq)]
pub enum Viz {
    /// Lines over time. `mark` draws a red threshold line at that value (e.g. 0.1 % of RAM).
    TimeSeries { mark: Option<f64> },
    /// A histogram's buckets over time (`format: heatmap` targets, one row per `le`).
    Heatmap,
    /// One big number per query.
    Stat,
    /// An instant table of the series' labels and values.
    Table,
    /// An instant table whose 0/1 values read as `zero` (red) and `one` (green).
    StatusTable {
        zero: &'static str,
        one: &'static str,
    },
}

/// One PromQL query of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The expression, with Grafana variables (`$instance`, `$device`, `$__rate_interval`).
    pub expr: String,
    /// Grafana's legend template, e.g. `{{device}} {{syscall}}`.
    pub legend: String,
}

impl Query {
    /// A query with a legend template.
    pub fn new(expr: impl Into<String>, legend: impl Into<String>) -> Self {
        Self {
            expr: expr.into(),
            legend: legend.into(),
        }
    }
}

/// A panel: what it shows, in which unit, and what it means.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    /// What the panel means and what to look for (Grafana shows it on the panel's (i) icon).
    pub description: String,
    pub viz: Viz,
    /// A Grafana unit id: `bytes`, `Bps`, `s`, `ops`, `reqps`, `percentunit`, `none`.
    pub unit: &'static str,
    pub queries: Vec<Query>,
    /// Width in Grafana's 24-column grid.
    pub width: u32,
}

impl Panel {
    /// A half-width time series panel.
    pub fn series(title: &str, unit: &'static str, description: &str, queries: Vec<Query>) -> Self {
        Self {
            title: title.to_owned(),
            description: description.to_owned(),
            viz: Viz::TimeSeries { mark: None },
            unit,
            queries,
            width: 12,
        }
    }

    /// The same panel drawn as `viz`.
    pub fn as_viz(mut self, viz: Viz) -> Self {
        self.viz = viz;
        self
    }

    /// The same panel `width` columns wide.
    pub fn wide(mut self, width: u32) -> Self {
        self.width = width;
        self
    }
}

/// A titled row of panels.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub title: String,
    pub panels: Vec<Panel>,
}

impl Row {
    /// A row holding `panels`.
    pub fn new(title: &str, panels: Vec<Panel>) -> Self {
        Self {
            title: title.to_owned(),
            panels,
        }
    }
}

/// Whether the `instance` and `device` variables take one value or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Several hosts and devices at once, with an "All" option (fleet overview).
    Multi,
    /// Exactly one host and one device (an investigation).
    Single,
}

/// Where every panel of a dashboard links to: the dashboard with `uid`, for the host (and the
/// device, when the panel's series have one) of the series clicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrillDown {
    pub uid: &'static str,
    pub title: &'static str,
}

/// A whole dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct Dashboard {
    /// Stable uid, so links and provisioning survive re-imports.
    pub uid: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub selection: Selection,
    pub rows: Vec<Row>,
    /// A data link on every panel whose series name a host.
    pub drill_down: Option<DrillDown>,
}
