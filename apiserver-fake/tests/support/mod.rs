//! A small HTTPS test client and a cluster fixture for the fake's integration tests.
#![allow(dead_code, missing_docs)]

use std::path::Path;

pub mod admission_policy;
pub mod demo;
pub mod etcd;
pub mod https;

use apiserver_fake::cluster::{Cluster, MemberSpec, start_cluster};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;

pub type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// Whether the kubectl of the shared harness ([`kube_mvp_testing::Kubectl::find`]: `$KUBECTL` or the
/// one on `PATH`) is at least 1.28; if not, it has printed why the calling test is skipped.
pub fn kubectl_available() -> bool {
    kube_mvp_testing::Kubectl::find().is_some()
}

/// Whether `curl` runs (the client of the tests that need nghttp2's HTTP/2 or curl's own view of a
/// response); if not, it has printed why the calling test is skipped.
pub fn curl_available() -> bool {
    let found = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        eprintln!("skipped: curl is not installed; this test needs curl (with HTTP/2) as its client");
    }
    found
}

/// `curl -sS -o /dev/null -w '%{http_code} %{http_version}' PROTOCOL --cacert DIR/ca.crt`: a curl
/// (see [`curl_available`]) that prints only the status and HTTP version of its transfer (`000 0` when
/// there was no HTTP answer), trusting the CA of the cluster in `dir`. The caller adds the URL, any
/// method and body, and the admin client certificate with [`curl_as_admin`].
pub fn curl_status(dir: &Path, protocol: &str) -> std::process::Command {
    let mut command = std::process::Command::new("curl");
    command
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{http_version}",
            protocol,
        ])
        .arg("--cacert")
        .arg(dir.join("ca.crt"));
    command
}

/// Adds the client certificate and key of the admin (system:masters) of the cluster in `dir` to a curl
/// `command`.
pub fn curl_as_admin<'a>(
    command: &'a mut std::process::Command,
    dir: &Path,
) -> &'a mut std::process::Command {
    command
        .arg("--cert")
        .arg(dir.join("admin.crt"))
        .arg("--key")
        .arg(dir.join("admin.key"))
}

/// A namespaced CRD `foos.example.com` (kind `Foo`, one served and stored version `v1`, any fields),
/// as a JSON body for `POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions`.
pub const FOO_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "foos.example.com"},
  "spec": {"group": "example.com", "scope": "Namespaced",
    "names": {"plural": "foos", "singular": "foo", "kind": "Foo"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
}"#;

/// Runs `kubectl args…` against `kubeconfig` with the shared harness's runner (a discovery cache beside
/// the kubeconfig, never the user's): whether it succeeded, its stdout and its stderr.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let scratch = kubeconfig.parent().unwrap_or(Path::new("."));
    let output = kube_mvp_testing::Kubectl::new(
        kube_mvp_testing::kubectl::binary(),
        kubeconfig.to_owned(),
        scratch,
    )
    .run_blocking(args)
    .unwrap_or_else(|e| panic!("{e}"));
    (output.success, output.stdout, output.stderr)
}

/// [`kubectl`], which must succeed: its stdout (a failure panics with its stderr).
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(
        ok,
        "kubectl {args:?} through {}: {stdout}{stderr}",
        kubeconfig.display()
    );
    stdout
}

/// Runs [`kubectl`] until it succeeds (polling every 100 ms, for at most 30 s), as after creating a
/// CRD, which is served shortly afterwards: its stdout (a timeout panics with the last stderr).
pub fn kubectl_eventually(kubeconfig: &Path, args: &[&str]) -> String {
    let mut last = String::new();
    let what = format!("kubectl {args:?} to succeed");
    kube_mvp_testing::eventually_blocking(
        &what,
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(100),
        || {
            let (ok, out, err) = kubectl(kubeconfig, args);
            last = err;
            ok.then_some(out)
        },
    )
    .unwrap_or_else(|e| panic!("{e}: {last}"))
}

/// A member on 127.0.0.`octet` with extra flags.
pub fn member(name: &str, octet: u8, version: &str, flags: &[&str]) -> MemberSpec {
    MemberSpec {
        name: name.to_owned(),
        ip: std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, octet)),
        kubernetes_version: version.to_owned(),
        extra_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
        note: String::new(),
        try_command: "get jobs".to_owned(),
        binary: None,
    }
}

/// Starts a cluster on ephemeral ports in a tempdir.
pub async fn cluster(members: Vec<MemberSpec>) -> Cluster {
    let _ = rustls::crypto::ring::default_provider().install_default();
    start_cluster(None, members, 0).await.expect("cluster starts")
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Clone)]
pub struct TestClient {
    pub base: String,
    client: Client<Https, Full<Bytes>>,
}

fn pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .expect("pem")
        .collect::<Result<_, _>>()
        .expect("certs")
}

impl TestClient {
    /// A client of `server` presenting `cert`/`key` (PEM files), or none.
    pub fn new(base: &str, ca: &Path, identity: Option<(&Path, &Path)>) -> Self {
        Self::with_protocols(base, ca, identity, true)
    }

    /// [`Self::new`] speaking HTTP/1.1 only.
    pub fn http1(base: &str, ca: &Path, identity: Option<(&Path, &Path)>) -> Self {
        Self::with_protocols(base, ca, identity, false)
    }

    fn with_protocols(base: &str, ca: &Path, identity: Option<(&Path, &Path)>, http2: bool) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = RootCertStore::empty();
        for cert in pem_certs(ca) {
            roots.add(cert).expect("ca");
        }
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(pem_certs(cert), PrivateKeyDer::from_pem_file(key).expect("key"))
                .expect("client cert"),
            None => builder.with_no_client_auth(),
        };
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1();
        let https = if http2 {
            builder.enable_http2().build()
        } else {
            builder.build()
        };
        Self {
            base: base.to_owned(),
            client: Client::builder(TokioExecutor::new()).build(https),
        }
    }

    /// The admin (system:masters) client of the `index`th server.
    pub fn admin(cluster: &Cluster, index: usize) -> Self {
        let dir = &cluster.dir;
        Self::new(
            &cluster.servers[index].1.url(),
            &dir.join("ca.crt"),
            Some((&dir.join("admin.crt"), &dir.join("admin.key"))),
        )
    }

    /// An anonymous client (no certificate) of the `index`th server.
    pub fn anonymous(cluster: &Cluster, index: usize) -> Self {
        Self::new(&cluster.servers[index].1.url(), &cluster.dir.join("ca.crt"), None)
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Reply {
        self.try_send(method, path, headers, body)
            .await
            .expect("request sent")
    }

    /// [`Self::send`], with transport errors (a server that died mid-request) as `Err`.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Result<Reply, String> {
        let response = self.try_open(method, path, headers, body).await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    pub async fn open(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> http::Response<hyper::body::Incoming> {
        self.try_open(method, path, headers, body)
            .await
            .expect("request sent")
    }

    pub async fn try_open(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Result<http::Response<hyper::body::Incoming>, String> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if body.is_some()
            && !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        {
            request = request.header("content-type", "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default().to_owned())))
            .expect("request");
        self.client.request(request).await.map_err(|e| e.to_string())
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, &[], None).await
    }

    pub async fn post(&self, path: &str, body: &str) -> Reply {
        self.send(Method::POST, path, &[], Some(body)).await
    }
}

/// The shared harness's [`kube_mvp_testing::eventually`], panicking with its message after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: std::time::Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    kube_mvp_testing::eventually(what, timeout, check)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

pub const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

pub fn job(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{name}"}},"spec":{{"template":{{"spec":{{"restartPolicy":"Never","containers":[{{"name":"c","image":"busybox"}}]}}}}}}}}"#
    )
}

/// The default demo pair: `a` (127.0.0.1) without batch/v1, `b` (127.0.0.2) with it.
pub fn seed_members(extra_a: &[&str], extra_b: &[&str]) -> Vec<MemberSpec> {
    let mut a_flags = vec!["--runtime-config=batch/v1=false"];
    a_flags.extend_from_slice(extra_a);
    vec![member("a", 1, "1.36", &a_flags), member("b", 2, "1.36", extra_b)]
}

/// Waits until `client` (talking to the server without batch/v1) gets 200 for the Jobs list, i.e. its
/// proxy knows the peer.
pub async fn wait_for_proxy(client: &TestClient) {
    eventually(
        "the proxy to reach its peer",
        std::time::Duration::from_secs(10),
        || async { (client.get(JOBS).await.status == StatusCode::OK).then_some(()) },
    )
    .await;
}
