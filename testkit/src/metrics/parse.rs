//! A parser for the Prometheus text exposition format (version 0.0.4), strict enough that
//! a malformed line from the daemon fails the test instead of silently disappearing.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// One sample line: `name{labels} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The full sample name, including any `_bucket`/`_sum`/`_count` suffix.
    pub name: String,
    /// Label pairs with escapes resolved.
    pub labels: BTreeMap<String, String>,
    /// The value; `+Inf`, `-Inf` and `NaN` are accepted.
    pub value: f64,
    /// The optional timestamp, in milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
}

/// What `# HELP` and `# TYPE` lines declared about a metric family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The family name, e.g. `wbscope_fsync_seconds` (without `_bucket` etc.).
    pub name: String,
    /// The declared type: counter, gauge, histogram, summary or untyped.
    pub kind: Option<String>,
    /// The help text with escapes resolved.
    pub help: Option<String>,
}

/// A parsed scrape: every sample in order, plus the declared families.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    samples: Vec<Sample>,
    families: Vec<Family>,
}

/// The types `# TYPE` may declare.
const KINDS: [&str; 5] = ["counter", "gauge", "histogram", "summary", "untyped"];

impl Scrape {
    /// Parses exposition text. Blank lines and comments other than HELP/TYPE are skipped;
    /// any other malformed line is an error naming its 1-based line number.
    pub fn parse(text: &str) -> Result<Scrape> {
        let mut scrape = Scrape::default();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let fail = |reason: String| Error::Parse {
                line: index + 1,
                reason,
            };
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                scrape.parse_comment(comment.trim_start()).map_err(fail)?;
            } else {
                scrape.samples.push(parse_sample(line).map_err(fail)?);
            }
        }
        Ok(scrape)
    }

    /// The value of the samples called exactly `name` whose labels include every pair in
    /// `labels` (a subset match). When several samples match, their values are SUMMED —
    /// e.g. `value("x_total", &[])` totals all series of `x_total`. `None` if none match.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels)
            .map(|s| s.value)
            .reduce(|a, b| a + b)
    }

    /// Like [`Scrape::value`], but 0 when nothing matches, for counters that appear lazily.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or(0.0)
    }

    /// Every sample called exactly `name`, as (labels, value), in exposition order.
    pub fn samples(&self, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        self.matching(name, &[])
            .map(|s| (s.labels.clone(), s.value))
            .collect()
    }

    /// All samples, in exposition order.
    pub fn all_samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The series labelled `device="<device>"`, counted per family (`_bucket`, `_sum` and
    /// `_count` lines count under their histogram's name): what one device costs a
    /// Prometheus that scrapes this exposition.
    pub fn series_of_device(&self, device: &str) -> BTreeMap<String, usize> {
        let mut by_family = BTreeMap::new();
        for sample in &self.samples {
            if sample.labels.get("device").map(String::as_str) == Some(device) {
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| sample.name.strip_suffix(suffix))
                    .filter(|base| {
                        self.family(base)
                            .is_some_and(|f| f.kind.as_deref() == Some("histogram"))
                    })
                    .unwrap_or(&sample.name)
                    .to_owned();
                *by_family.entry(family).or_insert(0) += 1;
            }
        }
        by_family
    }

    /// Families declared by `# HELP`/`# TYPE`, in order of first mention.
    pub fn families(&self) -> &[Family] {
        &self.families
    }

    /// The declared family called `name`, if any.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Samples named `name` carrying all of `labels`.
    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|have| have == v))
        })
    }

    /// Records `HELP`/`TYPE`; other comments are free text and ignored.
    fn parse_comment(&mut self, comment: &str) -> std::result::Result<(), String> {
        let (keyword, rest) = comment.split_once(' ').unwrap_or((comment, ""));
        if keyword != "HELP" && keyword != "TYPE" {
            return Ok(());
        }
        let rest = rest.trim_start();
        let (name, value) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
        if !is_metric_name(name) {
            return Err(format!("# {keyword} has invalid metric name {name:?}"));
        }
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name: name.to_owned(),
                    kind: None,
                    help: None,
                });
                self.families.len() - 1
            }
        };
        let family = &mut self.families[index];
        if keyword == "HELP" {
            family.help = Some(unescape(value.trim_start(), false)?);
        } else {
            let kind = value.trim();
            if !KINDS.contains(&kind) {
                return Err(format!("# TYPE {name} has unknown type {kind:?}"));
            }
            family.kind = Some(kind.to_owned());
        }
        Ok(())
    }
}

/// Parses one sample line (already trimmed, not a comment).
fn parse_sample(line: &str) -> std::result::Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("invalid metric name in {line:?}"));
    }
    let mut rest = line[name_end..].trim_start();
    let mut labels = BTreeMap::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = parse_labels(after_brace, &mut labels)?;
    }
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .ok_or_else(|| format!("sample {name} has no value"))?;
    let value = parse_value(value)?;
    let timestamp_ms = fields
        .next()
        .map(|t| t.parse::<i64>().map_err(|_| format!("bad timestamp {t:?}")))
        .transpose()?;
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected trailing {extra:?}"));
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses `a="x",b="y"}` (the opening brace already consumed) into `labels` and returns
/// what follows the closing brace. A trailing comma before `}` is allowed, as in the spec.
fn parse_labels<'a>(
    mut rest: &'a str,
    labels: &mut BTreeMap<String, String>,
) -> std::result::Result<&'a str, String> {
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let key_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or("unterminated label set")?;
        let key = &rest[..key_end];
        if key.is_empty() || key.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("invalid label name near {rest:?}"));
        }
        rest = rest[key_end..].trim_start();
        rest = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("expected '=' after label {key}"))?
            .trim_start();
        rest = rest
            .strip_prefix('"')
            .ok_or_else(|| format!("expected '\"' to open label {key}"))?;
        let close = closing_quote(rest).ok_or_else(|| format!("unterminated value of {key}"))?;
        let value = unescape(&rest[..close], true)?;
        if labels.insert(key.to_owned(), value).is_some() {
            return Err(format!("duplicate label {key}"));
        }
        rest = rest[close + 1..].trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(format!("expected ',' or '}}' after label {key}"));
        }
    }
}

/// Byte index of the first `"` not preceded by an escaping backslash.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// Resolves `\\` and `\n` (and `\"` inside label values, where `quotes` is set).
fn unescape(s: &str, quotes: bool) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quotes => out.push('"'),
            // HELP text may contain other backslashes verbatim; label values may not.
            Some(other) if !quotes => {
                out.push('\\');
                out.push(other);
            }
            other => return Err(format!("invalid escape \\{}", other.unwrap_or(' '))),
        }
    }
    Ok(out)
}

/// A float, or one of the spellings the format uses for infinities and NaN.
fn parse_value(text: &str) -> std::result::Result<f64, String> {
    match text {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text.parse().map_err(|_| format!("bad value {text:?}")),
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}
