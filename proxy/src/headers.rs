//! Header handling of a transparent proxy (RFC 9110 §7.6.1).
//!
//! Hop-by-hop headers belong to one connection and are removed in both directions: `Connection`
//! and every header it names, `Keep-Alive`, `Proxy-Connection`, `TE` (except the `trailers`
//! token, which is end-to-end in meaning and kept), `Transfer-Encoding`, `Upgrade`,
//! `Proxy-Authenticate`, `Proxy-Authorization`. Everything else passes untouched, in order.
//! hyper writes its own framing (`Transfer-Encoding`/`Content-Length`) for the next hop.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

const FIXED: [HeaderName; 6] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
];

/// Removes hop-by-hop headers. Returns whether the request had `TE: trailers`, which is then put
/// back (it is the only TE value a proxy may forward).
pub fn strip_hop_by_hop(h: &mut HeaderMap) -> bool {
    // Headers named by Connection are hop-by-hop too. Collected first: the names borrow `h`.
    let mut named: Vec<HeaderName> = Vec::new();
    for v in h.get_all(header::CONNECTION) {
        if let Ok(s) = v.to_str() {
            for tok in s.split(',') {
                if let Ok(n) = HeaderName::from_bytes(tok.trim().as_bytes()) {
                    named.push(n);
                }
            }
        }
    }
    let te_trailers = h.get_all(header::TE).iter().any(|v| {
        v.to_str().is_ok_and(|s| {
            s.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
        })
    });
    for n in named {
        h.remove(n);
    }
    for n in FIXED.iter() {
        h.remove(n);
    }
    h.remove("keep-alive");
    h.remove("proxy-connection");
    if te_trailers {
        h.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    te_trailers
}

/// Bytes the request head takes on the wire (HTTP/1.1 estimate: `name: value\r\n` per header,
/// plus the request line), the quantity `--max-header-bytes` limits.
pub fn head_size(method: &http::Method, uri: &http::Uri, h: &HeaderMap) -> usize {
    let line = method.as_str().len() + uri.path_and_query().map_or(1, |p| p.as_str().len()) + 12;
    line + h
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum::<usize>()
}

/// Header names never copied into a record, even when asked for.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie" | "x-api-key" | "api-key"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_connection_listed_and_fixed_hop_headers() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("keep-alive, x-foo"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-foo", HeaderValue::from_static("1"));
        h.insert("te", HeaderValue::from_static("gzip, trailers"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        h.insert("proxy-authorization", HeaderValue::from_static("x"));
        h.insert("x-session-id", HeaderValue::from_static("s1"));
        h.insert("authorization", HeaderValue::from_static("Bearer k"));
        assert!(strip_hop_by_hop(&mut h));
        let names: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-session-id", "authorization", "te"]);
        assert_eq!(h["te"], "trailers");
    }

    #[test]
    fn secrets_are_recognised_case_insensitively() {
        assert!(is_secret("Authorization"));
        assert!(is_secret("COOKIE"));
        assert!(!is_secret("x-session-id"));
    }
}
