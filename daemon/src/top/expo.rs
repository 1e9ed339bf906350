//! A small reader of the Prometheus text exposition format, enough for `wbscope top` to read
//! a daemon's `/metrics` (comments skipped, labels unescaped, timestamps ignored).

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A malformed line.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct ParseError {
    pub line: usize,
    pub why: &'static str,
}

/// Parses every sample of `text`.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        samples.push(parse_line(line).map_err(|why| ParseError { line: i + 1, why })?);
    }
    Ok(samples)
}

fn parse_line(line: &str) -> Result<Sample, &'static str> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("no value")?;
    let name = line[..name_end].to_owned();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels)?;
    }
    let value = rest.split_whitespace().next().ok_or("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().map_err(|_| "value is not a number")?,
    };
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// Reads `k="v",…}` and returns what follows the closing brace.
fn parse_labels<'a>(
    mut s: &'a str,
    labels: &mut Vec<(String, String)>,
) -> Result<&'a str, &'static str> {
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let eq = s.find('=').ok_or("label without '='")?;
        let key = s[..eq].trim().to_owned();
        let body = s[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("unterminated label value"),
                },
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value"),
            }
        };
        labels.push((key, value));
        s = &body[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_and_values() {
        let text = "# HELP x y\n# TYPE a counter\na 1\nb{device=\"loop3\",op=\"write\"} 2.5\n\
                    c_bucket{le=\"+Inf\"} 7 1700000000\nd{v=\"q\\\"x\\\\y\"} +Inf\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].name, "a");
        assert_eq!(s[0].value, 1.0);
        assert_eq!(s[1].label("device"), Some("loop3"));
        assert_eq!(s[1].label("op"), Some("write"));
        assert_eq!(s[1].value, 2.5);
        assert_eq!(s[2].label("le"), Some("+Inf"));
        assert_eq!(s[2].value, 7.0);
        assert_eq!(s[3].label("v"), Some("q\"x\\y"));
        assert!(s[3].value.is_infinite());
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("a{b=c} 1").is_err());
        assert!(parse("a{b=\"c} 1").is_err());
        assert!(parse("a x").is_err());
        assert_eq!(parse("ok 1\nbad").unwrap_err().line, 2);
    }
}
