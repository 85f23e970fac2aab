//! kube-apiserver's audit log (`--audit-log-path` with `--audit-policy-file`): one `audit.k8s.io/v1`
//! `Event` per request and stage, as a JSON line, with the user, the `userAgent`, the object
//! reference and the `responseStatus` (code, and a `Status` error's reason, message and details).
//!
//! It is how a user finds out what *their* program's requests got during an upgrade (`upgrade --exec`
//! reads the servers' audit logs by user agent), and how an operator would on a real cluster.
//!
//! What the fake does as upstream: both flags are needed (a path without a policy records nothing);
//! `-` is standard output; the policy is `audit.k8s.io/v1` `Policy` (refused with upstream's
//! `LoadPolicyFromFile` messages otherwise), its first matching rule sets the level (`None`, `Metadata`, `Request`, `RequestResponse`), a policy without rules is
//! refused, rules match on `users`, `userGroups`, `verbs`, `resources` (`group`, `resources` with
//! `*`, `resource/subresource`, `*/subresource` and `resource/*`, `resourceNames`), `namespaces` and
//! `nonResourceURLs` (a trailing `*` is a prefix); `omitStages` of the policy and of the rule are
//! left out. What it does differently (docs/decisions.md): every level records what `Metadata`
//! records (no request or response bodies), a long-running request (a watch) is logged at
//! `ResponseStarted` only, and a request that fails authentication is not logged.
//!
//! The filter of the chain, [`audit_request`], is kube-apiserver's `WithAuditInit` and `WithAudit` in
//! one: the audit ID of a request and its event. It runs inside request classification, so a request
//! answered 401 or 500 there carries no audit ID, and outside authorization, so a 403 carries one
//! and is audited with its status.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, header};
use mvp_core::{RequestInfo, UserInfo};
use serde::Deserialize;
use serde_json::{Value, json};

use super::authentication::ConnectionInfo;
use super::{ServerContext, request_info};

/// kube-apiserver's audit ID header.
pub(super) const AUDIT_ID_HEADER: &str = "audit-id";

/// Why an audit policy or log could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The policy file cannot be read (upstream's wording, Go's error text for the usual causes).
    #[error("failed to read file path {:?}: open {}: {}", .path.display().to_string(), .path.display(), go_io_error(.source))]
    Read {
        /// `--audit-policy-file`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The policy does not parse.
    #[error("failed decoding: {message}: from file {}", .path.display())]
    Decode {
        /// `--audit-policy-file`.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Not an `audit.k8s.io/v1` `Policy` (upstream prints the group/version/kind it found).
    #[error("unknown group version field {api_version}, Kind={kind} in policy: from file {}", .path.display())]
    NotAPolicy {
        /// `--audit-policy-file`.
        path: PathBuf,
        /// The file's `apiVersion`.
        api_version: String,
        /// The file's `kind`.
        kind: String,
    },
    /// Upstream's wording for a policy without rules.
    #[error("loaded illegal policy with 0 rules: from file {}", .0.display())]
    NoRules(PathBuf),
    /// The log file cannot be opened for appending.
    #[error("failed to open audit log {path}")]
    Open {
        /// `--audit-log-path`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// An audit level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub(crate) enum Level {
    /// Not logged.
    None,
    /// Request metadata (user, verb, resource, user agent, response status).
    Metadata,
    /// Metadata and request body (the fake logs metadata).
    Request,
    /// Metadata, request and response bodies (the fake logs metadata).
    RequestResponse,
}

/// An audit stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// Once the response headers are sent (long-running requests).
    ResponseStarted,
    /// Once the response is complete.
    ResponseComplete,
    /// A panic.
    Panic,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Self::RequestReceived => "RequestReceived",
            Self::ResponseStarted => "ResponseStarted",
            Self::ResponseComplete => "ResponseComplete",
            Self::Panic => "Panic",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyRule {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPolicy {
    api_version: String,
    kind: String,
    #[serde(default)]
    rules: Vec<PolicyRule>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
}

/// A loaded audit policy.
#[derive(Debug, Clone)]
pub(crate) struct AuditPolicy {
    rules: Vec<PolicyRule>,
    omit_stages: Vec<Stage>,
}

impl AuditPolicy {
    /// Reads and checks `--audit-policy-file`.
    pub(crate) fn load(path: &Path) -> Result<Self, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Checks the policy `text` read from `path` (named in errors).
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Self, AuditError> {
        let decode = |message: String| AuditError::Decode {
            path: path.to_owned(),
            message,
        };
        let raw: RawPolicy = serde_saphyr::from_str(text)
            .map_err(|e| decode(e.to_string().lines().collect::<Vec<_>>().join("; ")))?;
        if raw.api_version != "audit.k8s.io/v1" || raw.kind != "Policy" {
            return Err(AuditError::NotAPolicy {
                path: path.to_owned(),
                api_version: raw.api_version,
                kind: raw.kind,
            });
        }
        if raw.rules.is_empty() {
            return Err(AuditError::NoRules(path.to_owned()));
        }
        Ok(Self {
            rules: raw.rules,
            omit_stages: raw.omit_stages,
        })
    }

    /// The level of the first rule that matches, and the stages to leave out (`None` when no rule
    /// matches: not logged).
    fn evaluate(&self, user: &UserInfo, info: &RequestInfo) -> Option<(Level, Vec<Stage>)> {
        let rule = self.rules.iter().find(|rule| rule.matches(user, info))?;
        let mut omit = self.omit_stages.clone();
        omit.extend(rule.omit_stages.iter().copied());
        Some((rule.level, omit))
    }
}

impl PolicyRule {
    /// Upstream's `ruleMatches`.
    fn matches(&self, user: &UserInfo, info: &RequestInfo) -> bool {
        if !self.users.is_empty() && !self.users.contains(&user.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !user.groups.iter().any(|g| self.user_groups.contains(g)) {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.contains(&info.verb) {
            return false;
        }
        if self.namespaces.is_empty() && self.resources.is_empty() && self.non_resource_urls.is_empty() {
            return true;
        }
        if info.is_resource_request {
            self.matches_resource(info)
        } else {
            self.non_resource_urls
                .iter()
                .any(|pattern| match pattern.strip_suffix('*') {
                    Some(prefix) => info.path.starts_with(prefix),
                    None => info.path == *pattern,
                })
        }
    }

    fn matches_resource(&self, info: &RequestInfo) -> bool {
        if self.namespaces.is_empty() && self.resources.is_empty() {
            return false; // only nonResourceURLs: a resource request does not match
        }
        if !self.namespaces.is_empty() && !self.namespaces.contains(&info.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        self.resources.iter().any(|gr| {
            gr.group == info.api_group
                && (gr.resources.is_empty()
                    || (gr.resource_names.is_empty() || gr.resource_names.contains(&info.name))
                        && gr.resources.iter().any(|r| {
                            r == &combined
                                || r == "*"
                                || r.strip_prefix("*/").is_some_and(|sub| {
                                    !info.subresource.is_empty() && sub == info.subresource
                                })
                                || r.strip_suffix("/*") == Some(info.resource.as_str())
                        }))
        })
    }
}

/// Where events go: a file (appended to) or standard output.
#[derive(Debug)]
enum Sink {
    File(Mutex<std::fs::File>),
    Stdout,
}

/// A server's audit backend: its policy and its log.
#[derive(Debug)]
pub(crate) struct AuditLog {
    policy: AuditPolicy,
    sink: Sink,
}

/// What the audit filter knows of one request when it is received.
#[derive(Debug)]
pub(crate) struct AuditedRequest {
    level: Level,
    omit: Vec<Stage>,
    event: Value,
}

impl AuditLog {
    /// Opens `--audit-log-path` (`-`: standard output) for appending, with `policy`.
    pub(crate) fn open(path: &Path, policy: AuditPolicy) -> Result<Self, AuditError> {
        let sink = if path == Path::new("-") {
            Sink::Stdout
        } else {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                let _ = std::fs::create_dir_all(dir);
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| AuditError::Open {
                    path: path.to_owned(),
                    source,
                })?;
            Sink::File(Mutex::new(file))
        };
        Ok(Self { policy, sink })
    }

    /// Starts the event of a request (and writes its `RequestReceived` stage unless omitted);
    /// `None` when the policy does not log it.
    pub(crate) fn begin(
        &self,
        user: &UserInfo,
        info: &RequestInfo,
        audit_id: &str,
        uri: &str,
        user_agent: Option<&str>,
        source_ip: Option<std::net::IpAddr>,
    ) -> Option<AuditedRequest> {
        let (level, omit) = self.policy.evaluate(user, info)?;
        if level == Level::None {
            return None;
        }
        let now = now();
        let mut event = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": audit_id,
            "stage": Stage::RequestReceived.name(),
            "requestURI": uri,
            "verb": info.verb,
            "user": user_json(user),
            "sourceIPs": source_ip.map(|ip| vec![ip.to_string()]).unwrap_or_default(),
        });
        if let Some(agent) = user_agent {
            event["userAgent"] = json!(agent);
        }
        if info.is_resource_request {
            let mut object = serde_json::Map::new();
            for (key, value) in [
                ("resource", &info.resource),
                ("namespace", &info.namespace),
                ("name", &info.name),
                ("apiGroup", &info.api_group),
                ("apiVersion", &info.api_version),
                ("subresource", &info.subresource),
            ] {
                if !value.is_empty() {
                    object.insert(key.to_owned(), json!(value));
                }
            }
            event["objectRef"] = Value::Object(object);
        }
        event["requestReceivedTimestamp"] = json!(now);
        event["stageTimestamp"] = json!(now);
        let request = AuditedRequest { level, omit, event };
        if !request.omit.contains(&Stage::RequestReceived) {
            self.write(&request.event);
        }
        Some(request)
    }

    /// Writes the event of a request once its response is known: `ResponseComplete`, or
    /// `ResponseStarted` for a long-running one. `status` is the `Status` of an error response.
    pub(crate) fn finish(
        &self,
        mut request: AuditedRequest,
        long_running: bool,
        code: u16,
        status: Option<&crate::api::status::Status>,
        annotations: Option<&crate::api::rest::admission::AuditAnnotations>,
    ) {
        let stage = if long_running {
            Stage::ResponseStarted
        } else {
            Stage::ResponseComplete
        };
        if request.omit.contains(&stage) || request.level == Level::None {
            return;
        }
        let response_status = match status.map(serde_json::to_value) {
            Some(Ok(Value::Object(mut status))) => {
                status.remove("kind");
                status.remove("apiVersion");
                status.insert("code".to_owned(), json!(code));
                Value::Object(status)
            }
            _ => json!({"metadata": {}, "code": code}),
        };
        request.event["stage"] = json!(stage.name());
        let annotations = annotations
            .map(|a| a.at_level(request.level >= Level::Request))
            .unwrap_or_default();
        if !annotations.is_empty() {
            request.event["annotations"] = json!(annotations);
        }
        request.event["responseStatus"] = response_status;
        request.event["stageTimestamp"] = json!(now());
        self.write(&request.event);
    }

    fn write(&self, event: &Value) {
        let mut line = event.to_string();
        line.push('\n');
        // An audit line that cannot be written is dropped, as upstream's log backend does after
        // logging the failure; the request is served regardless.
        let result = match &self.sink {
            Sink::File(file) => file
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .write_all(line.as_bytes()),
            Sink::Stdout => std::io::stdout().lock().write_all(line.as_bytes()),
        };
        if let Err(err) = result {
            tracing::warn!(error = %err, "failed to write an audit event");
        }
    }
}

/// The filter: keeps the caller's `Audit-ID` or mints one, as kube-apiserver does, on the request
/// (the stages inside, the request log and the MVP proxy above all, read it there: a proxied request
/// carries the source server's audit ID) and on the response; with an audit log, it begins the event
/// before anything inside answers and finishes it with the response's status.
pub(super) async fn audit_request<S: ServerContext>(
    State(state): State<Arc<S>>,
    mut req: Request,
    next: Next,
) -> Response {
    let audit_id = match req.headers().get(AUDIT_ID_HEADER) {
        Some(id) if !id.is_empty() => id.clone(),
        _ => HeaderValue::try_from(uuid::Uuid::new_v4().to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
    };
    req.headers_mut().insert(AUDIT_ID_HEADER, audit_id.clone());
    let Some(info) = req.extensions().get::<RequestInfo>() else {
        return request_info::missing();
    };
    let long_running = info.is_long_running();
    let audited = state
        .audit()
        .and_then(|audit| begin_event(audit, &req, info, &audit_id));
    let mut response = next.run(req).await;
    response.headers_mut().insert(AUDIT_ID_HEADER, audit_id);
    if let (Some(audit), Some(audited)) = (state.audit(), audited) {
        audit.finish(
            audited,
            long_running,
            response.status().as_u16(),
            response.extensions().get::<crate::api::status::Status>(),
            response
                .extensions()
                .get::<crate::api::rest::admission::AuditAnnotations>(),
        );
    }
    response
}

/// [`AuditLog::begin`] for `req`: its user (`system:anonymous` on the public paths authentication lets
/// through), URI, user agent and source address.
fn begin_event(
    audit: &AuditLog,
    req: &Request,
    info: &RequestInfo,
    audit_id: &HeaderValue,
) -> Option<AuditedRequest> {
    let anonymous;
    let user = match req.extensions().get::<UserInfo>() {
        Some(user) => user,
        None => {
            anonymous = UserInfo {
                name: "system:anonymous".to_owned(),
                groups: vec!["system:unauthenticated".to_owned()],
                ..UserInfo::default()
            };
            &anonymous
        }
    };
    let source_ip = req
        .extensions()
        .get::<ConnectionInfo>()
        .and_then(|c| c.remote_addr)
        .map(|a| a.ip());
    audit.begin(
        user,
        info,
        &String::from_utf8_lossy(audit_id.as_bytes()),
        &req.uri()
            .path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default(),
        req.headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
        source_ip,
    )
}

/// Go's text for the usual reasons a file cannot be opened.
fn go_io_error(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => err.to_string(),
    }
}

fn user_json(user: &UserInfo) -> Value {
    let mut value = json!({"username": user.name});
    if !user.uid.is_empty() {
        value["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        value["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        value["extra"] = json!(user.extra);
    }
    value
}

fn now() -> String {
    crate::controllers::identity::micro_time(time::OffsetDateTime::now_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, uri: &str) -> RequestInfo {
        let method: http::Method = method.parse().unwrap();
        RequestInfo::from_parts(&method, &uri.parse().unwrap()).unwrap()
    }

    fn policy(text: &str) -> Result<AuditPolicy, AuditError> {
        AuditPolicy::parse(Path::new("policy.yaml"), text)
    }

    #[test]
    fn the_first_matching_rule_sets_the_level() {
        let policy = policy(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
             - level: None\n  users: [\"system:apiserver\"]\n\
             - level: None\n  nonResourceURLs: [\"/readyz\", \"/healthz*\"]\n\
             - level: Request\n  resources: [{group: batch, resources: [\"jobs\"]}]\n\
             - level: Metadata\n",
        )
        .unwrap();
        let admin = UserInfo {
            name: "admin".to_owned(),
            groups: vec!["system:masters".to_owned()],
            ..UserInfo::default()
        };
        let peer = UserInfo {
            name: "system:apiserver".to_owned(),
            ..UserInfo::default()
        };
        let level = |user: &UserInfo, method: &str, uri: &str| {
            policy.evaluate(user, &info(method, uri)).map(|(level, _)| level)
        };
        assert_eq!(level(&peer, "GET", "/api/v1/pods"), Some(Level::None));
        assert_eq!(level(&admin, "GET", "/readyz"), Some(Level::None));
        assert_eq!(level(&admin, "GET", "/healthz/etcd"), Some(Level::None));
        assert_eq!(
            level(&admin, "GET", "/apis/batch/v1/namespaces/default/jobs"),
            Some(Level::Request)
        );
        assert_eq!(level(&admin, "GET", "/api/v1/pods"), Some(Level::Metadata));
        let (_, omit) = policy.evaluate(&admin, &info("GET", "/api")).unwrap();
        assert_eq!(omit, vec![Stage::RequestReceived]);
    }

    #[test]
    fn bad_policies_are_one_line_errors() {
        let err = policy("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "loaded illegal policy with 0 rules: from file policy.yaml"
        );
        let err = policy("apiVersion: v1\nkind: ConfigMap\nrules: [{level: Metadata}]\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown group version field v1, Kind=ConfigMap in policy: from file policy.yaml"
        );
        let err = AuditPolicy::load(Path::new("/nonexistent/policy.yaml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to read file path \"/nonexistent/policy.yaml\": open /nonexistent/policy.yaml: no such file or directory"
        );
        let err = policy("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n").unwrap_err();
        assert!(err.to_string().starts_with("failed decoding: "), "{err}");
        assert!(!err.to_string().contains('\n'), "{err}");
    }
}
