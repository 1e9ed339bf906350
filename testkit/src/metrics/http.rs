//! A minimal HTTP/1.1 client for scraping `/metrics`, on std::net alone so the fixtures
//! pull in no HTTP stack.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Upper bound for connecting and for the whole exchange.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// A response larger than this is surely a bug (or not our daemon); stop reading.
const MAX_RESPONSE: usize = 64 << 20;

/// GETs `http://addr/metrics` and returns the body; see [`http_get`].
pub fn scrape(addr: SocketAddr) -> Result<String> {
    http_get(addr, "/metrics")
}

/// GETs `path` from `addr` with `Connection: close`, within [`SCRAPE_TIMEOUT`] overall,
/// and returns the body as text. Handles `Content-Length`, chunked and close-delimited
/// bodies. Any status other than 200 is an error carrying the start of the body.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    let deadline = Instant::now() + SCRAPE_TIMEOUT;
    let net = |what: &str| {
        let what = format!("{what} {addr}");
        move |e: std::io::Error| Error::Http(format!("{what}: {e}"))
    };
    let mut stream = TcpStream::connect_timeout(&addr, SCRAPE_TIMEOUT).map_err(net("connect"))?;
    stream
        .set_write_timeout(Some(SCRAPE_TIMEOUT))
        .map_err(net("configure"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\
         User-Agent: wbscope-testkit\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(net("send to"))?;

    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        // Re-arm the read timeout with what is left, so a trickling server cannot stretch
        // the exchange past the deadline one read at a time.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Http(format!(
                "{addr}: timed out after {SCRAPE_TIMEOUT:?}"
            )));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(net("configure"))?;
        let n = stream.read(&mut buf).map_err(net("read from"))?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if raw.len() > MAX_RESPONSE {
            return Err(Error::Http(format!(
                "{addr}: response over {MAX_RESPONSE} bytes"
            )));
        }
    }
    parse_response(&raw)
}

/// Splits a complete response into status, headers and decoded body.
fn parse_response(raw: &[u8]) -> Result<String> {
    let split = find(raw, b"\r\n\r\n")
        .ok_or_else(|| Error::Http("response has no end of headers".into()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();

    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if key.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        } else if key.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| Error::Http(format!("bad Content-Length {value:?}")))?,
            );
        }
    }
    let decoded;
    if chunked {
        decoded = dechunk(body)?;
        body = &decoded;
    } else if let Some(length) = length {
        body = body.get(..length).ok_or_else(|| {
            Error::Http(format!("body truncated: {} of {length} bytes", body.len()))
        })?;
    }
    let text = String::from_utf8_lossy(body).into_owned();
    if status != "200" {
        let excerpt: String = text.chars().take(200).collect();
        return Err(Error::Http(format!("{status_line}: {excerpt}")));
    }
    Ok(text)
}

/// Decodes a chunked body; trailers after the last chunk are ignored.
fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let bad = |why: &str| Error::Http(format!("bad chunked body: {why}"));
    let mut out = Vec::new();
    loop {
        let line_end = find(data, b"\r\n").ok_or_else(|| bad("missing size line"))?;
        let size_line = String::from_utf8_lossy(&data[..line_end]);
        // Chunk extensions (";name=value") carry nothing we need.
        let size_hex = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| bad("size not hex"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = data.get(..size).ok_or_else(|| bad("chunk truncated"))?;
        out.extend_from_slice(chunk);
        data = data[size..]
            .strip_prefix(b"\r\n")
            .ok_or_else(|| bad("chunk not followed by CRLF"))?;
    }
}

/// Position of the first occurrence of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// Serves one canned response on a loopback port and returns its address.
    fn serve_once(response: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while find(&req, b"\r\n\r\n").is_none() {
                let n = conn.read(&mut buf).unwrap();
                req.extend_from_slice(&buf[..n]);
            }
            assert!(req.starts_with(b"GET /metrics HTTP/1.1\r\n"));
            conn.write_all(response.as_bytes()).unwrap();
        });
        addr
    }

    #[test]
    fn content_length_body() {
        let addr = serve_once("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\na 1\n\n");
        assert_eq!(scrape(addr).unwrap(), "a 1\n\n");
    }

    #[test]
    fn chunked_body() {
        let addr = serve_once(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\na 1\n\r\n4\r\nb 2\n\r\n0\r\n\r\n",
        );
        assert_eq!(scrape(addr).unwrap(), "a 1\nb 2\n");
    }

    #[test]
    fn close_delimited_body() {
        let addr = serve_once("HTTP/1.0 200 OK\r\n\r\nc 3\n");
        assert_eq!(scrape(addr).unwrap(), "c 3\n");
    }

    #[test]
    fn non_200_is_error() {
        let addr = serve_once("HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
        let err = scrape(addr).unwrap_err().to_string();
        assert!(err.contains("404") && err.contains("nope"), "{err}");
    }
}
