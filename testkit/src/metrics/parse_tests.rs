//! Unit tests of the exposition parser.

use super::parse::Scrape;
use crate::error::Error;

const HISTOGRAM: &str = r#"
# HELP wbscope_fsync_seconds Time spent in fsync.
# TYPE wbscope_fsync_seconds histogram
wbscope_fsync_seconds_bucket{dev="7:3",le="0.1"} 1
wbscope_fsync_seconds_bucket{dev="7:3",le="1"} 3
wbscope_fsync_seconds_bucket{dev="7:3",le="+Inf"} 4
wbscope_fsync_seconds_sum{dev="7:3"} 2.5
wbscope_fsync_seconds_count{dev="7:3"} 4
wbscope_fsync_seconds_bucket{dev="7:4",le="+Inf"} 2
# a free comment that must be ignored
# TYPE wbscope_ratio gauge
wbscope_ratio NaN 1700000000000
wbscope_neg -Inf
"#;

#[test]
fn histogram_family() {
    let s = Scrape::parse(HISTOGRAM).unwrap();
    let fam = s.family("wbscope_fsync_seconds").unwrap();
    assert_eq!(fam.kind.as_deref(), Some("histogram"));
    assert_eq!(fam.help.as_deref(), Some("Time spent in fsync."));
    assert_eq!(s.families().len(), 2);
    assert_eq!(
        s.value(
            "wbscope_fsync_seconds_bucket",
            &[("dev", "7:3"), ("le", "+Inf")]
        ),
        Some(4.0)
    );
    assert_eq!(s.samples("wbscope_fsync_seconds_bucket").len(), 4);
    assert_eq!(s.value("wbscope_fsync_seconds_sum", &[]), Some(2.5));
    let ratio = &s.all_samples()[6];
    assert!(ratio.value.is_nan());
    assert_eq!(ratio.timestamp_ms, Some(1_700_000_000_000));
    assert_eq!(s.value("wbscope_neg", &[]), Some(f64::NEG_INFINITY));
}

#[test]
fn infinite_values() {
    let s = Scrape::parse("a +Inf\nb Inf\nc 1e3\n").unwrap();
    assert_eq!(s.value("a", &[]), Some(f64::INFINITY));
    assert_eq!(s.value("b", &[]), Some(f64::INFINITY));
    assert_eq!(s.value("c", &[]), Some(1000.0));
}

#[test]
fn escaped_label_values() {
    let text = r#"m{path="C:\\dir",msg="say \"hi\"\nbye",} 1"#;
    let s = Scrape::parse(text).unwrap();
    let (labels, v) = &s.samples("m")[0];
    assert_eq!(labels["path"], "C:\\dir");
    assert_eq!(labels["msg"], "say \"hi\"\nbye");
    assert_eq!(*v, 1.0);
    assert_eq!(s.value("m", &[("msg", "say \"hi\"\nbye")]), Some(1.0));
    // Commas, braces and spaces inside quoted values are data, not syntax.
    let s = Scrape::parse(r#"m{a="x, y}", b = "z"} 2"#).unwrap();
    assert_eq!(s.value("m", &[("a", "x, y}"), ("b", "z")]), Some(2.0));
}

#[test]
fn subset_matching_and_sum() {
    let text = "w_total{dev=\"7:3\",op=\"write\"} 10\n\
                w_total{dev=\"7:3\",op=\"read\"} 5\n\
                w_total{dev=\"7:4\",op=\"write\"} 1\n\
                w_total_other{dev=\"7:3\"} 100\n";
    let s = Scrape::parse(text).unwrap();
    assert_eq!(
        s.value("w_total", &[("dev", "7:3"), ("op", "write")]),
        Some(10.0)
    );
    // Several matches are summed; the name must match exactly (no prefix match).
    assert_eq!(s.value("w_total", &[("dev", "7:3")]), Some(15.0));
    assert_eq!(s.value("w_total", &[]), Some(16.0));
    assert_eq!(s.value("w_total", &[("dev", "9:9")]), None);
    assert_eq!(s.value("w_total", &[("missing", "x")]), None);
    assert_eq!(s.sum("w_total", &[("dev", "9:9")]), 0.0);
    assert_eq!(s.sum("w_total", &[("op", "write")]), 11.0);
    assert_eq!(s.value("w", &[]), None);
}

#[test]
fn malformed_lines_are_errors() {
    for (text, line) in [
        ("ok 1\nbad{a=\"x\" 1\n", 2),
        ("m{a=x} 1", 1),
        ("m 1 2 3", 1),
        ("m notanumber", 1),
        ("m", 1),
        ("m 1 1.5", 1),
        ("1m 1", 1),
        ("m{a=\"1\",a=\"2\"} 1", 1),
        ("m{a=\"\\q\"} 1", 1),
        ("\n\n# TYPE m bogus\n", 3),
        ("# HELP\n", 1),
    ] {
        match Scrape::parse(text) {
            Err(Error::Parse { line: got, .. }) => assert_eq!(got, line, "{text:?}"),
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }
}

#[test]
fn help_escapes_and_crlf() {
    let s = Scrape::parse("# HELP m line\\none \\\\ back\r\nm 1\r\n").unwrap();
    assert_eq!(
        s.family("m").unwrap().help.as_deref(),
        Some("line\none \\ back")
    );
    assert_eq!(s.value("m", &[]), Some(1.0));
}

#[test]
fn series_of_a_device_count_histogram_lines_under_their_family() {
    let text = "# TYPE h histogram\n\
        h_bucket{device=\"a\",le=\"1\"} 1\nh_bucket{device=\"a\",le=\"+Inf\"} 2\n\
        h_sum{device=\"a\"} 3\nh_count{device=\"a\"} 2\nh_count{device=\"b\"} 1\n\
        # TYPE c_count counter\nc_count{device=\"a\"} 1\nc_count{device=\"a\",op=\"x\"} 1\n\
        g 5\n";
    let s = Scrape::parse(text).unwrap();
    let a = s.series_of_device("a");
    assert_eq!(a.get("h"), Some(&4), "{a:?}");
    // Not a histogram: `_count` is part of the name.
    assert_eq!(a.get("c_count"), Some(&2), "{a:?}");
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(s.series_of_device("b").get("h"), Some(&1));
    assert!(s.series_of_device("c").is_empty());
}
