//! The `/metrics` answer: the Prometheus text format, gzip-compressed when the scraper asks for
//! it (`Accept-Encoding: gzip`, as Prometheus always does), which cuts an idle host's ~130 KB
//! exposition to about a tenth on the wire.

use std::{io::Write as _, time::Instant};

use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use flate2::{Compression, write::GzEncoder};
use prometheus::{Encoder, TextEncoder, proto::MetricFamily};

/// Whether an `Accept-Encoding` value accepts gzip: listed (or `*`) without `q=0`.
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or_default();
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
    })
}

/// Gzip at a middle level: most of the size gain of level 9 at a fraction of its CPU.
fn gzip(body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 8), Compression::new(5));
    encoder.write_all(body)?;
    encoder.finish()
}

/// Gathers `registry` and encodes the answer for a request with `headers`.
pub fn metrics_response(families: &[MetricFamily], headers: &HeaderMap) -> Response {
    let started = Instant::now();
    let encoder = TextEncoder::new();
    let mut body = Vec::with_capacity(16 * 1024);
    if let Err(err) = encoder.encode(families, &mut body) {
        tracing::error!("encoding metrics: {err}");
        return (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response();
    }
    let plain_len = body.len();
    let wants_gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(accepts_gzip);
    let content_type = HeaderValue::from_static(prometheus::TEXT_FORMAT);
    // Caches between scraper and daemon must not hand a gzip answer to a client without gzip.
    let vary = (header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if wants_gzip {
        match gzip(&body) {
            Ok(compressed) => {
                tracing::debug!(
                    "served /metrics: {plain_len} bytes, {} gzipped, in {:?}",
                    compressed.len(),
                    started.elapsed()
                );
                return (
                    [
                        (header::CONTENT_TYPE, content_type),
                        (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
                        vary,
                    ],
                    compressed,
                )
                    .into_response();
            }
            // Nothing is lost: the scraper gets the uncompressed answer.
            Err(err) => tracing::warn!("gzip of /metrics failed, serving it plain: {err}"),
        }
    }
    tracing::debug!(
        "served /metrics: {plain_len} bytes in {:?}",
        started.elapsed()
    );
    ([(header::CONTENT_TYPE, content_type), vary], body).into_response()
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use axum::body::to_bytes;
    use prometheus::{IntCounter, Opts, Registry};

    use super::*;

    #[test]
    fn accept_encoding_values() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, GZIP;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip(""));
    }

    fn registry() -> Registry {
        let registry = Registry::new();
        let counter = IntCounter::with_opts(Opts::new("wbscope_test_total", "A test.")).unwrap();
        counter.inc_by(7);
        registry.register(Box::new(counter)).unwrap();
        registry
    }

    async fn body(response: Response) -> Vec<u8> {
        to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn gzip_only_when_asked() {
        let registry = registry();
        let plain = metrics_response(&registry.gather(), &HeaderMap::new());
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(plain.headers()[header::VARY], "Accept-Encoding");
        let plain = String::from_utf8(body(plain).await).unwrap();
        assert!(plain.contains("wbscope_test_total 7"), "{plain}");

        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let zipped = metrics_response(&registry.gather(), &headers);
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(
            zipped.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4"
        );
        let raw = body(zipped).await;
        let mut unzipped = String::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .read_to_string(&mut unzipped)
            .unwrap();
        assert_eq!(unzipped, plain);
    }

    /// Prometheus offers OpenMetrics first; the `prometheus` crate has no OpenMetrics encoder,
    /// so the answer is the 0.0.4 text format that the same header also accepts (and that
    /// Prometheus parses): OpenMetrics would add only `_created` lines and exemplars, which
    /// wbscope does not have.
    #[tokio::test]
    async fn an_openmetrics_scraper_gets_the_text_format_it_also_accepts() {
        let registry = registry();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/openmetrics-text;version=1.0.0;q=0.5,\
                 application/openmetrics-text;version=0.0.1;q=0.4,\
                 text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
            ),
        );
        let answer = metrics_response(&registry.gather(), &headers);
        assert_eq!(
            answer.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4"
        );
        let text = String::from_utf8(body(answer).await).unwrap();
        assert!(text.contains("# TYPE wbscope_test_total counter"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }
}
