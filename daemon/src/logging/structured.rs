//! Structured log lines, as the Prometheus exporters print them: logfmt
//! (`ts=… level=info msg="…" key=value`) or one JSON object per line with the same keys.

use std::fmt::{self, Write as _};

use tracing::{Event, Subscriber, field::Field};
use tracing_subscriber::{
    field::Visit,
    fmt::{FmtContext, FormatEvent, FormatFields, format::Writer},
    registry::LookupSpan,
};

/// logfmt or JSON lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structured {
    Logfmt,
    Json,
}

/// An event's message and other fields, in order.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field.name(), format!("{value:?}"));
    }
}

impl Fields {
    fn push(&mut self, name: &'static str, value: String) {
        match name {
            "message" => self.message = value,
            // The `log` bridge's own bookkeeping; the target is reported as `caller`.
            n if n.starts_with("log.") => {}
            n => self.rest.push((n, value)),
        }
    }
}

/// A logfmt value: bare when it is a plain word, else quoted with `"`, `\` and newlines escaped.
fn logfmt_value(out: &mut String, value: &str) {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| !c.is_whitespace() && c != '"' && c != '=' && c != '\\' && !c.is_control());
    if plain {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Structured {
    /// The line for one event (without the newline).
    fn line(self, ts: &str, level: &str, caller: &str, fields: &Fields) -> String {
        let pairs = [
            ("ts", ts),
            ("level", level),
            ("caller", caller),
            ("msg", fields.message.as_str()),
        ]
        .into_iter()
        .chain(fields.rest.iter().map(|(k, v)| (*k, v.as_str())));
        match self {
            Structured::Logfmt => {
                let mut out = String::new();
                for (i, (key, value)) in pairs.enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    let _ = write!(out, "{key}=");
                    logfmt_value(&mut out, value);
                }
                out
            }
            Structured::Json => {
                let object: serde_json::Map<String, serde_json::Value> = pairs
                    .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
                    .collect();
                serde_json::Value::Object(object).to_string()
            }
        }
    }
}

impl<S, N> FormatEvent<S, N> for Structured
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let ts = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let meta = event.metadata();
        let level = meta.level().as_str().to_ascii_lowercase();
        writeln!(writer, "{}", self.line(&ts, &level, meta.target(), &fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(message: &str, rest: &[(&'static str, &str)]) -> Fields {
        Fields {
            message: message.to_owned(),
            rest: rest.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        }
    }

    #[test]
    fn logfmt_quotes_only_what_needs_it() {
        let line = Structured::Logfmt.line(
            "2026-01-01T00:00:00Z",
            "info",
            "wbscope::daemon",
            &fields(
                "listening on 0.0.0.0:19617",
                &[("probes", "36"), ("why", "a \"b\"")],
            ),
        );
        assert_eq!(
            line,
            "ts=2026-01-01T00:00:00Z level=info caller=wbscope::daemon \
             msg=\"listening on 0.0.0.0:19617\" probes=36 why=\"a \\\"b\\\"\""
        );
    }

    #[test]
    fn json_is_one_object_with_the_same_keys() {
        let line = Structured::Json.line("t", "warn", "c", &fields("x\ny", &[("n", "1")]));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["msg"], "x\ny");
        assert_eq!(v["n"], "1");
        assert_eq!(v["ts"], "t");
        assert!(!line.contains('\n'));
    }
}
