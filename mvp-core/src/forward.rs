//! Building the request sent to a peer (docs/mvp-behaviour.md §3.2) and cleaning the peer's response.
//!
//! Pure rewriting, no I/O: target URL (`https://<peer>` + path + query re-encoded with
//! sorted keys, as Go's `url.Values.Encode`), hop-by-hop headers, identity headers
//! (client-go's `SetAuthProxyHeaders`) and the loop-prevention header.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Uri, Version};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::decision::PEER_PROXIED_HEADER;
use crate::requestheader::{
    REMOTE_EXTRA_HEADER_PREFIX, REMOTE_GROUP_HEADER, REMOTE_UID_HEADER, REMOTE_USER_HEADER,
    strip_standard_identity_headers,
};
use crate::user::UserInfo;

/// The client's address. The embedding server inserts it into each request's extensions (from its
/// accept loop, which alone knows the connection's peer; `serve_tls`, feature `server`, does); a
/// proxied request then carries it to the peer as `X-Forwarded-For`, appended to the prior hops as
/// Go's `httputil.ReverseProxy` does. Without it the header passes through as the client sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr(pub SocketAddr);

/// Errors while building the outbound request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    /// The target URI could not be built.
    #[error("invalid proxy target: {0}")]
    InvalidUri(#[source] http::Error),
    /// An identity value cannot be sent as an HTTP header value (Go's transport refuses such
    /// requests with the same message).
    #[error("net/http: invalid header field value for {0:?}")]
    InvalidHeaderValue(String),
}

/// Go's `encodePath` escaping: everything but unreserved characters and `$&+,/:;=@`.
const PATH_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b'/')
    .remove(b':')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

/// Go's `url.QueryEscape` set (space is then written as `+`).
const QUERY_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The URI of the proxied request: `https://<endpoint>` + the decoded request path
/// re-escaped (RawPath dropped, as upstream) + the query re-encoded with sorted keys.
pub(crate) fn peer_uri(endpoint: &str, original: &Uri) -> Result<Uri, ForwardError> {
    let decoded = percent_encoding::percent_decode_str(original.path()).decode_utf8_lossy();
    let mut pq = utf8_percent_encode(&decoded, PATH_ESCAPE).to_string();
    if pq.is_empty() {
        pq.push('/');
    }
    let query = canonical_query(original.query().unwrap_or(""));
    if !query.is_empty() {
        pq.push('?');
        pq.push_str(&query);
    }
    Uri::builder()
        .scheme("https")
        .authority(endpoint)
        .path_and_query(pq)
        .build()
        .map_err(ForwardError::InvalidUri)
}

/// Go's `url.ParseQuery(raw)` then `.Encode()`: pairs with `;` or malformed escapes are
/// dropped, keys sorted, values kept in order, `QueryEscape` encoding.
pub(crate) fn canonical_query(raw: &str) -> String {
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pair in raw.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if let (Some(k), Some(v)) = (query_unescape(k), query_unescape(v)) {
            values.entry(k).or_default().push(v);
        }
    }
    let mut out = String::with_capacity(raw.len());
    for (k, vs) in &values {
        let key = query_escape(k);
        for v in vs {
            if !out.is_empty() {
                out.push('&');
            }
            out.push_str(&key);
            out.push('=');
            out.push_str(&query_escape(v));
        }
    }
    out
}

/// Go's `url.QueryUnescape`: `+` is a space, `%XX` must be valid.
fn query_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn query_escape(s: &str) -> String {
    utf8_percent_encode(s, QUERY_ESCAPE)
        .to_string()
        .replace("%20", "+")
}

/// The hop-by-hop headers Go's `httputil.ReverseProxy` removes in both directions.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
];

/// Removes hop-by-hop headers, including every header named in `Connection`.
pub(crate) fn remove_hop_by_hop_headers(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// client-go `SetAuthProxyHeaders`: removes any `X-Remote-*` identity headers, then sets
/// `X-Remote-User`, `X-Remote-Uid` (if non-empty), one `X-Remote-Group` per group and one
/// `X-Remote-Extra-<escaped key>` per extra value.
pub(crate) fn set_identity_headers(headers: &mut HeaderMap, user: &UserInfo) -> Result<(), ForwardError> {
    strip_standard_identity_headers(headers);
    let value = |name: &str, v: &str| {
        HeaderValue::from_str(v).map_err(|_| ForwardError::InvalidHeaderValue(name.to_owned()))
    };
    headers.insert(REMOTE_USER_HEADER, value(REMOTE_USER_HEADER, &user.name)?);
    if !user.uid.is_empty() {
        headers.insert(REMOTE_UID_HEADER, value(REMOTE_UID_HEADER, &user.uid)?);
    }
    for group in &user.groups {
        headers.append(REMOTE_GROUP_HEADER, value(REMOTE_GROUP_HEADER, group)?);
    }
    for (key, values) in &user.extra {
        let name_str = format!("{REMOTE_EXTRA_HEADER_PREFIX}{}", header_key_escape(key));
        let name = HeaderName::from_bytes(name_str.as_bytes())
            .map_err(|_| ForwardError::InvalidHeaderValue(name_str.clone()))?;
        for v in values {
            headers.append(name.clone(), value(&name_str, v)?);
        }
    }
    Ok(())
}

/// client-go `headerKeyEscape`: `%XX` for every byte that is not an RFC 7230 token
/// character, and for `%` itself.
pub(crate) fn header_key_escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key.as_bytes() {
        let token = b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
        if token {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Rewrites request parts in place for sending to the peer at `endpoint` as `user`:
/// target URI, `version = HTTP/1.1` (hyper still negotiates h2 via ALPN), `Host` removed
/// (the client sets it), hop-by-hop, `Authorization`, `Impersonate-*` and incoming identity
/// headers removed, identity headers set, `X-Forwarded-For` appended when the client address
/// is known, and `x-kubernetes-peer-proxied: true` appended. `Audit-ID` is kept.
pub(crate) fn prepare_request(
    parts: &mut http::request::Parts,
    endpoint: &str,
    user: &UserInfo,
) -> Result<(), ForwardError> {
    parts.uri = peer_uri(endpoint, &parts.uri)?;
    parts.version = Version::HTTP_11;
    let headers = &mut parts.headers;
    remove_hop_by_hop_headers(headers);
    headers.remove(header::HOST);
    headers.remove(header::AUTHORIZATION);
    let impersonation: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("impersonate-"))
        .cloned()
        .collect();
    for name in impersonation {
        headers.remove(name);
    }
    set_identity_headers(headers, user)?;
    if let Some(RemoteAddr(addr)) = parts.extensions.get::<RemoteAddr>() {
        append_forwarded_for(headers, addr.ip());
    }
    headers.append(PEER_PROXIED_HEADER, HeaderValue::from_static("true"));
    Ok(())
}

/// Go's ReverseProxy: `X-Forwarded-For: <prior values joined by ", ">, <client ip>`.
fn append_forwarded_for(headers: &mut HeaderMap, ip: std::net::IpAddr) {
    let name = HeaderName::from_static("x-forwarded-for");
    let prior: Vec<String> = headers
        .get_all(&name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    let value = if prior.is_empty() {
        ip.to_string()
    } else {
        format!("{}, {ip}", prior.join(", "))
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_reencoded_with_sorted_keys_like_go() {
        let cases = [
            ("", ""),
            (
                "watch=1&allowWatchBookmarks=true",
                "allowWatchBookmarks=true&watch=1",
            ),
            ("watch", "watch="),
            ("b=2&a=1&b=1", "a=1&b=2&b=1"),
            (
                "labelSelector=app%3Dweb%2Ctier+in+(a)",
                "labelSelector=app%3Dweb%2Ctier+in+%28a%29",
            ),
            ("x=a;b&y=1", "y=1"),
            ("bad=%zz&ok=%41", "ok=A"),
            ("k=~*'", "k=~%2A%27"),
            ("&&a=1&", "a=1"),
        ];
        for (raw, want) in cases {
            assert_eq!(canonical_query(raw), want, "{raw}");
        }
    }

    #[test]
    fn peer_uri_keeps_decoded_path_and_drops_raw_path() {
        let uri: Uri = "/apis/batch/v1/namespaces/a%2Db/jobs?watch=1&b=2"
            .parse()
            .unwrap();
        assert_eq!(
            peer_uri("127.0.0.2:6443", &uri).unwrap().to_string(),
            "https://127.0.0.2:6443/apis/batch/v1/namespaces/a-b/jobs?b=2&watch=1"
        );
        let abs: Uri = "https://source:443/api/v1/pods/a%20b".parse().unwrap();
        assert_eq!(
            peer_uri("[::1]:1", &abs).unwrap().to_string(),
            "https://[::1]:1/api/v1/pods/a%20b"
        );
    }

    #[test]
    fn hop_by_hop_headers_and_connection_named_ones_are_removed() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, X-Custom"),
            ("keep-alive", "timeout=5"),
            ("x-custom", "1"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("proxy-authorization", "x"),
            ("proxy-connection", "x"),
            ("trailer", "x"),
            ("proxy-authenticate", "x"),
            ("accept", "application/json"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        remove_hop_by_hop_headers(&mut h);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), vec!["accept"]);
    }

    #[test]
    fn identity_headers_follow_client_go() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", HeaderValue::from_static("mallory"));
        h.insert("x-remote-uid", HeaderValue::from_static("evil"));
        h.insert("x-remote-extra-foo", HeaderValue::from_static("evil"));
        let mut user = UserInfo::new("alice");
        user.groups = vec!["devs".into(), "system:authenticated".into()];
        user.extra
            .insert("example.com/Scope with%".into(), vec!["a".into(), "b".into()]);
        set_identity_headers(&mut h, &user).unwrap();
        assert_eq!(h["x-remote-user"], "alice");
        assert!(h.get("x-remote-uid").is_none(), "empty uid is not sent");
        assert_eq!(
            h.get_all("x-remote-group").iter().collect::<Vec<_>>(),
            ["devs", "system:authenticated"]
        );
        assert!(h.get("x-remote-extra-foo").is_none());
        assert_eq!(
            h.get_all("x-remote-extra-example.com%2FScope%20with%25")
                .iter()
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        user.uid = "u-1".into();
        set_identity_headers(&mut h, &user).unwrap();
        assert_eq!(h["x-remote-uid"], "u-1");
        assert_eq!(h.get_all("x-remote-group").iter().count(), 2);
    }

    #[test]
    fn prepare_request_rewrites_everything_upstream_does() {
        let req = http::Request::builder()
            .method("GET")
            .version(Version::HTTP_2)
            .uri("https://source:6443/apis/batch/v1/jobs?watch=true")
            .header("host", "source:6443")
            .header("authorization", "Bearer secret")
            .header("impersonate-user", "bob")
            .header("impersonate-extra-x", "y")
            .header("audit-id", "abc")
            .header("x-forwarded-for", "10.0.0.1")
            .header("x-kubernetes-peer-proxied", "TRUE")
            .header("accept", "application/json")
            .extension(RemoteAddr("127.0.0.9:5555".parse().unwrap()))
            .body(())
            .unwrap();
        let (mut parts, ()) = req.into_parts();
        prepare_request(&mut parts, "127.0.0.2:6443", &UserInfo::new("alice")).unwrap();
        assert_eq!(parts.uri, "https://127.0.0.2:6443/apis/batch/v1/jobs?watch=true");
        assert_eq!(parts.version, Version::HTTP_11);
        let h = &parts.headers;
        for gone in ["host", "authorization", "impersonate-user", "impersonate-extra-x"] {
            assert!(h.get(gone).is_none(), "{gone}");
        }
        assert_eq!(h["audit-id"], "abc");
        assert_eq!(h["accept"], "application/json");
        assert_eq!(h["x-remote-user"], "alice");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 127.0.0.9");
        // Appended, not set: the client's value stays first (docs/mvp-behaviour.md §3.1).
        assert_eq!(
            h.get_all("x-kubernetes-peer-proxied").iter().collect::<Vec<_>>(),
            ["TRUE", "true"]
        );
    }

    #[test]
    fn header_key_escape_matches_client_go() {
        assert_eq!(header_key_escape("scopes"), "scopes");
        assert_eq!(header_key_escape("a/b%c d"), "a%2Fb%25c%20d");
        assert_eq!(header_key_escape("ünï"), "%C3%BCn%C3%AF");
    }
}
