//! Kubernetes' `url()` values (`k8s.io/apiserver/pkg/cel/library/urls.go`): `url(s)` parses as Go's
//! `url.ParseRequestURI` (an absolute URL or an absolute path), `isURL(s)`, and the methods
//! `getScheme()`, `getHost()`, `getHostname()`, `getPort()`, `getEscapedPath()` and `getQuery()` (a map of
//! lists, decoded as Go's `url.ParseQuery`). The value is an opaque `net.URL`; equality compares the
//! parsed parts. Deviations: the path is returned as written rather than re-escaped by Go's `EscapedPath`,
//! and a parse error keeps upstream's prefix with a shorter reason.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{Env, ExecutionError, Value};

/// The runtime type name of `url()` values.
const URL_TYPE: &str = "net.URL";

/// A parsed request URI.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Url {
    scheme: String,
    /// `host[:port]` (IPv6 in brackets), without user info.
    host: String,
    path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        URL_TYPE
    }
}

/// `url.ParseRequestURI`: `None` for what it refuses (a relative reference, an empty string, a bad
/// scheme, control characters).
fn parse(text: &str) -> Option<Url> {
    if text.is_empty() || text.chars().any(|c| c.is_control() || c == ' ') {
        return None;
    }
    let (rest, query) = text.split_once('?').unwrap_or((text, ""));
    let query = query.to_owned();
    if rest.starts_with('/') {
        return Some(Url {
            path: rest.to_owned(),
            query,
            ..Url::default()
        });
    }
    let (scheme, rest) = rest.split_once(':')?;
    let mut chars = scheme.chars();
    let valid_scheme = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid_scheme {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let Some(authority_and_path) = rest.strip_prefix("//") else {
        // An opaque URL (`mailto:x`): no host, no path.
        return Some(Url {
            scheme,
            query,
            ..Url::default()
        });
    };
    let (authority, path) = match authority_and_path.find('/') {
        Some(slash) => authority_and_path.split_at(slash),
        None => (authority_and_path, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    Some(Url {
        scheme,
        host: host.to_owned(),
        path: path.to_owned(),
        query,
    })
}

/// Go's `splitHostPort` of `url.URL.Hostname()` / `Port()`.
fn split_host_port(host: &str) -> (&str, &str) {
    if let Some(bracketed) = host.strip_prefix('[') {
        return match bracketed.split_once(']') {
            Some((name, rest)) => (name, rest.strip_prefix(':').unwrap_or("")),
            None => (host, ""),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => (name, port),
        _ => (host, ""),
    }
}

fn value(args: &[CowVal<'_, '_>]) -> Result<Value, ExecutionError> {
    args.first()
        .map(|a| Value::try_from(a.as_ref()))
        .transpose()?
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(value)?))
}

fn url_of(args: &[CowVal<'_, '_>], function: &str) -> Result<Url, ExecutionError> {
    match value(args)? {
        Value::Opaque(opaque) => opaque
            .downcast_ref::<Url>()
            .cloned()
            .ok_or_else(|| ExecutionError::function_error(function, "expected a URL")),
        _ => Err(ExecutionError::function_error(function, "expected a URL")),
    }
}

fn to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match value(&args)? {
        Value::String(text) => match parse(&text) {
            Some(url) => owned(Value::Opaque(Arc::new(url))),
            None => Err(ExecutionError::function_error(
                "url",
                format!(
                    "URL parse error during conversion from string: parse {text:?}: invalid URI for request"
                ),
            )),
        },
        _ => Err(ExecutionError::function_error("url", "expected a string")),
    }
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match value(&args)? {
        Value::String(text) => owned(Value::Bool(parse(&text).is_some())),
        _ => Err(ExecutionError::function_error("isURL", "expected a string")),
    }
}

fn text_method<'b, 'v>(
    args: &[CowVal<'b, 'v>],
    name: &str,
    part: impl Fn(&Url) -> String,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::from(part(&url_of(args, name)?)))
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_method(&args, "getScheme", |u| u.scheme.clone())
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_method(&args, "getHost", |u| u.host.clone())
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_method(&args, "getHostname", |u| split_host_port(&u.host).0.to_owned())
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_method(&args, "getPort", |u| split_host_port(&u.host).1.to_owned())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    text_method(&args, "getEscapedPath", |u| u.path.clone())
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let url = url_of(&args, "getQuery")?;
    let mut query: HashMap<String, Vec<Value>> = HashMap::new();
    for (key, item) in form_urlencoded::parse(url.query.as_bytes()) {
        query
            .entry(key.into_owned())
            .or_default()
            .push(Value::from(item.into_owned()));
    }
    let map: HashMap<String, Value> = query
        .into_iter()
        .map(|(key, items)| (key, Value::List(Arc::new(items))))
        .collect();
    owned(Value::from(map))
}

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Adds `url()`, `isURL()` and the methods to `env`.
pub(crate) fn add_to(env: &mut Env) {
    if let Err(error) = env.add_type(Type::new_opaque_type(URL_TYPE)) {
        tracing::error!(%error, "the URL type could not be added");
    }
    for (name, id, op) in [
        ("url", "string_to_url", to_url as Overload),
        ("isURL", "is_url_string", is_url),
    ] {
        if let Err(error) = env.add_overload(name, id, vec![STRING_TYPE], op) {
            tracing::error!(%error, name, "a URL function could not be added");
        }
    }
    let members: [(&str, &str, Overload); 6] = [
        ("getScheme", "url_get_scheme", get_scheme),
        ("getHost", "url_get_host", get_host),
        ("getHostname", "url_get_hostname", get_hostname),
        ("getPort", "url_get_port", get_port),
        ("getEscapedPath", "url_get_escaped_path", get_escaped_path),
        ("getQuery", "url_get_query", get_query),
    ];
    for (name, id, op) in members {
        if let Err(error) = env.add_member_overload(name, id, Type::new_opaque_type(URL_TYPE), vec![], op) {
            tracing::error!(%error, name, "a URL method could not be added");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, evaluate, value::to_cel};

    fn eval(source: &str) -> Result<cel::Value, String> {
        let expression = compile(source, &["self"]).map_err(|e| e.issues)?;
        evaluate(
            &expression,
            &[(
                "self",
                to_cel(&json!("https://user@example.com:8443/a%20b?x=1&x=2&y=%41")),
            )],
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn urls_parse_as_request_uris() {
        for rule in [
            "url(self).getScheme() == 'https' && url(self).getHost() == 'example.com:8443'",
            "url(self).getHostname() == 'example.com' && url(self).getPort() == '8443'",
            "url(self).getEscapedPath() == '/a%20b' && url(self).getQuery() == {'x': ['1', '2'], 'y': ['A']}",
            "url('https://[::1]:80/').getHostname() == '::1' && url('https://[::1]/').getPort() == ''",
            "url('/healthz').getHost() == '' && url('/healthz').getEscapedPath() == '/healthz'",
            "isURL(self) && !isURL('example.com/x') && !isURL('') && !isURL('1http://x')",
            "url(self) == url(self) && url('https://a') != url('https://b')",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
        let error = eval("url('example.com').getHost() == ''").unwrap_err();
        assert!(
            error.contains("URL parse error during conversion from string: parse \"example.com\": invalid URI for request"),
            "{error}"
        );
    }
}
