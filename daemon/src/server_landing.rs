//! The landing page at `/`: what this daemon is (version, revision, kernel), every endpoint it
//! serves with one line each, and which probes are attached.

use std::{fmt::Write as _, sync::Arc};

use axum::{Router, extract::State, response::Html, routing::get};

use crate::probes::{AttachStatus, ProbeReport};

/// One HTTP endpoint and what it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The path, also the link (with a query string where a bare path would say little).
    pub path: &'static str,
    pub link: &'static str,
    pub what: &'static str,
}

/// `/metrics`, which every server has.
pub const METRICS: Endpoint = Endpoint {
    path: "/metrics",
    link: "/metrics",
    what: "Prometheus metrics (text format 0.0.4; gzip when the scraper asks for it)",
};

/// `/stalls`, the flight recorder.
pub const STALLS: Endpoint = Endpoint {
    path: "/stalls",
    link: "/stalls?since=600",
    what: "recent stall events as JSON; filters: since (seconds or RFC 3339), device, \
           min (a bare number is ms), pid, comm",
};

/// `/top/processes`, the per-process table of `wbscope top`.
pub const PROCESSES: Endpoint = Endpoint {
    path: crate::families::top_processes::PATH,
    link: crate::families::top_processes::PATH,
    what: "processes by time spent in sync calls, dirty throttling and writeback waits, as JSON \
           (what wbscope top shows)",
};

/// What the page shows.
#[derive(Clone, Debug, Default)]
pub struct Landing {
    pub kernel: String,
    pub endpoints: Vec<Endpoint>,
    pub probes: Vec<ProbeReport>,
}

/// The `/` route.
pub fn router(landing: Landing) -> Router {
    let page: Arc<str> = landing.render().into();
    Router::new().route("/", get(serve)).with_state(page)
}

async fn serve(State(page): State<Arc<str>>) -> Html<String> {
    Html(page.to_string())
}

/// `&`, `<`, `>` and `"` as HTML entities (kernel answers may contain them).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Landing {
    /// Counts of attached, skipped (the kernel cannot support them, or another probe does their
    /// work), disabled and failed probes.
    pub fn counts(&self) -> [usize; 4] {
        let mut counts = [0; 4];
        for report in &self.probes {
            counts[match report.status {
                AttachStatus::Attached => 0,
                // Counted with the skipped: not attached, and not a failure.
                AttachStatus::Skipped(_) | AttachStatus::Replaced(_) => 1,
                AttachStatus::Disabled => 2,
                AttachStatus::Failed(_) => 3,
            }] += 1;
        }
        counts
    }

    /// The HTML page.
    pub fn render(&self) -> String {
        let mut html = String::from(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>wbscope</title></head>\
             <body>",
        );
        let _ = write!(
            html,
            "<h1>wbscope {}</h1><p>Linux writeback observability: why did this fsync stall? \
             Flusher work, sync-call latency, dirty throttling and block latency, measured with \
             eBPF.</p><p>Version {} (revision {}), kernel {}.</p>",
            crate::build_info::VERSION,
            crate::build_info::VERSION,
            crate::build_info::REVISION,
            escape(if self.kernel.is_empty() {
                "unknown"
            } else {
                &self.kernel
            })
        );
        html.push_str("<h2>Endpoints</h2><ul>");
        for e in &self.endpoints {
            let _ = write!(
                html,
                "<li><a href=\"{}\">{}</a>: {}</li>",
                escape(e.link),
                e.path,
                escape(e.what)
            );
        }
        html.push_str("<li><a href=\"/\">/</a>: this page</li></ul>");
        let [attached, skipped, disabled, failed] = self.counts();
        let _ = write!(
            html,
            "<h2>Probes</h2><p>{attached} of {} attached; {skipped} skipped (this kernel cannot \
             support them, or another probe does their work here), {disabled} disabled by config, {failed} failed. \
             <code>wbscope check</code> on the host explains each.</p>",
            self.probes.len()
        );
        let not_attached: Vec<&ProbeReport> = self
            .probes
            .iter()
            .filter(|r| !r.status.is_attached())
            .collect();
        if !not_attached.is_empty() {
            html.push_str("<ul>");
            for report in not_attached {
                let why = match &report.status {
                    AttachStatus::Skipped(why) => format!("skipped: {why}"),
                    AttachStatus::Replaced(why) => format!("not needed: {why}"),
                    AttachStatus::Disabled => "disabled by config".to_owned(),
                    AttachStatus::Failed(why) => {
                        format!("FAILED: {}", why.lines().next().unwrap_or_default())
                    }
                    AttachStatus::Attached => String::new(),
                };
                let _ = write!(
                    html,
                    "<li>{} ({}): {}</li>",
                    report.spec.program,
                    escape(&report.hook),
                    escape(&why)
                );
            }
            html.push_str("</ul>");
        }
        html.push_str("</body></html>\n");
        html
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::ProbeSpec;

    fn report(program: &'static str, status: AttachStatus) -> ProbeReport {
        ProbeReport {
            family: "f",
            spec: ProbeSpec::tracepoint(program, "c", "e"),
            hook: "tracepoint c/e".into(),
            status,
            fentry_not_used: None,
        }
    }

    #[test]
    fn lists_every_endpoint_the_version_and_the_probes() {
        let landing = Landing {
            kernel: "6.1.0-test".into(),
            endpoints: vec![METRICS, STALLS, PROCESSES],
            probes: vec![
                report("a", AttachStatus::Attached),
                report("b", AttachStatus::Skipped("no <wbc> type".into())),
                report("c", AttachStatus::Disabled),
                report("d", AttachStatus::Failed("verifier\nline 2".into())),
            ],
        };
        let html = landing.render();
        for e in [METRICS, STALLS, PROCESSES] {
            assert!(
                html.contains(&format!("<a href=\"{}\">{}</a>: ", e.link, e.path)),
                "{html}"
            );
        }
        assert!(html.contains(crate::build_info::VERSION));
        assert!(html.contains(crate::build_info::REVISION));
        assert!(html.contains("6.1.0-test"));
        assert!(html.contains("1 of 4 attached; 1 skipped"), "{html}");
        assert!(
            html.contains("b (tracepoint c/e): skipped: no &lt;wbc&gt; type"),
            "{html}"
        );
        assert!(
            html.contains("d (tracepoint c/e): FAILED: verifier</li>"),
            "{html}"
        );
        assert!(!html.contains("<li>a "), "{html}");
    }
}
