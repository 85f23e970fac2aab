//! The examples' peers: the workspace's fake kube-apiserver, started as its demo cluster (`a`
//! lacks `batch/v1`, `b` serves it) in a temporary directory, exactly as a user would start it.
//! Each example uses part of it.
#![allow(dead_code)]

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// One server of the demo, from its `cluster.json`.
pub struct DemoServer {
    /// `a` or `b`.
    pub name: String,
    /// `https://host:port`.
    pub url: String,
}

impl DemoServer {
    /// `host:port`, as a peer endpoint.
    pub fn host_port(&self) -> &str {
        self.url.trim_start_matches("https://")
    }
}

/// A running demo cluster; dropping it stops the servers.
pub struct Demo {
    child: Child,
    dir: tempfile::TempDir,
    /// The servers, as `cluster.json` lists them.
    pub servers: Vec<DemoServer>,
    client: HttpsClient,
    token: String,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake's binary: `$APISERVER_FAKE`, else beside this example's target directory.
fn binary() -> Result<PathBuf, Box<dyn Error>> {
    if let Some(path) = std::env::var_os("APISERVER_FAKE") {
        return Ok(PathBuf::from(path));
    }
    // <target>/<profile>/examples/<example>  →  <target>/<profile>/apiserver-fake
    let exe = std::env::current_exe()?;
    let profile_dir = exe.parent().and_then(Path::parent).ok_or("no target directory")?;
    let path = profile_dir.join("apiserver-fake");
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} does not exist: build the fake first (`cargo build -p apiserver-fake`) or set APISERVER_FAKE",
            path.display()
        )
        .into())
    }
}

impl Demo {
    /// Starts `apiserver-fake cluster` and waits for its `cluster.json` (written once every
    /// server is ready and every proxy knows its peers).
    pub async fn start() -> Result<Self, Box<dyn Error>> {
        let dir = tempfile::tempdir()?;
        let child = Command::new(binary()?)
            .arg("cluster")
            .arg("--dir")
            .arg(dir.path())
            .args(["--port", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let manifest = dir.path().join("cluster.json");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut demo = Self {
            child,
            dir,
            servers: Vec::new(),
            client: https_client(&[])?,
            token: String::new(),
        };
        while !manifest.exists() {
            if let Some(status) = demo.child.try_wait()? {
                return Err(format!("apiserver-fake cluster exited with {status}").into());
            }
            if Instant::now() > deadline {
                return Err("the demo cluster did not start within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest)?)?;
        for server in manifest["servers"].as_array().into_iter().flatten() {
            demo.servers.push(DemoServer {
                name: server["name"].as_str().unwrap_or_default().to_owned(),
                url: server["url"].as_str().unwrap_or_default().to_owned(),
            });
        }
        let ca = CertificateDer::from_pem_file(demo.path("ca.crt"))?;
        demo.client = https_client(&[ca])?;
        demo.token = std::fs::read_to_string(demo.path("token"))?.trim().to_owned();
        Ok(demo)
    }

    /// A file of the demo's directory (its PKI is kubeadm's layout: `ca.crt`,
    /// `front-proxy-client.crt`, `front-proxy-client.key`, ...).
    pub fn path(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }

    /// The server named `name`.
    pub fn server(&self, name: &str) -> Result<&DemoServer, Box<dyn Error>> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("the demo has no server {name}").into())
    }

    /// `GET path` on the server `name` as the demo's admin (bearer token).
    pub async fn get(&self, name: &str, path: &str) -> Result<(StatusCode, Bytes), Box<dyn Error>> {
        let request = Request::get(format!("{}{path}", self.server(name)?.url))
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .body(Empty::new())?;
        let response = self.client.request(request).await?;
        let status = response.status();
        Ok((status, response.into_body().collect().await?.to_bytes()))
    }
}

fn https_client(roots: &[CertificateDer<'static>]) -> Result<HttpsClient, Box<dyn Error>> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root.clone())?;
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(store)
            .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// The identity the examples' stand-in for authentication gives every caller: the demo's admin,
/// which the fakes authorize for everything. The filter forwards it to the peer.
pub fn admin() -> mvp_core::UserInfo {
    let mut admin = mvp_core::UserInfo::new("kubernetes-admin");
    admin.groups = vec!["system:masters".to_owned(), "system:authenticated".to_owned()];
    admin
}

/// Serves `app` over plain HTTP on 127.0.0.1 (a free port) with hyper-util, in the background.
pub async fn serve<S, B>(app: S) -> Result<std::net::SocketAddr, Box<dyn Error>>
where
    S: tower::Service<
            Request<hyper::body::Incoming>,
            Response = http::Response<B>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let svc = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// `GET path` on an example's own plain-HTTP server: the status and the body as text. Gives up
/// after 10 s, so that a check never hangs.
pub async fn get_plain(
    addr: std::net::SocketAddr,
    path: &str,
) -> Result<(StatusCode, String), Box<dyn Error>> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = Request::get(format!("http://{addr}{path}")).body(Empty::new())?;
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .map_err(|_| format!("GET {path}: no answer within 10 s"))??;
    let status = response.status();
    let body = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .map_err(|_| format!("GET {path}: body not complete within 10 s"))??
        .to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    println!("GET {path} → {status}\n{body}");
    Ok((status, body))
}

/// `--once`: whether a Job list came back from the peer through the example's server and a local
/// answer for `v1 pods` (recognised by `local_marker`); an error saying what differed otherwise.
pub async fn check_answers(addr: std::net::SocketAddr, local_marker: &str) -> Result<(), Box<dyn Error>> {
    let (jobs_status, jobs) = get_plain(addr, "/apis/batch/v1/namespaces/default/jobs").await?;
    let (pods_status, pods) = get_plain(addr, "/api/v1/namespaces/default/pods").await?;
    if jobs_status != StatusCode::OK || !jobs.contains("\"kind\":\"JobList\"") {
        return Err("batch/v1 jobs were not proxied to the peer (see above)".into());
    }
    if pods_status != StatusCode::OK || !pods.contains(local_marker) {
        return Err("v1 pods were not served locally (see above)".into());
    }
    Ok(())
}

/// `GET url` over TLS presenting the demo's admin client certificate (`admin.crt`: CN `admin`,
/// O `system:masters`), trusting the demo's CA: the status and the body as text. Gives up after
/// 10 s, so that a check never hangs.
pub async fn get_with_admin_certificate(
    demo: &Demo,
    url: &str,
) -> Result<(StatusCode, String), Box<dyn Error>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(demo.path("ca.crt"))?)?;
    let chain = CertificateDer::pem_file_iter(demo.path("admin.crt"))?.collect::<Result<Vec<_>, _>>()?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(demo.path("admin.key"))?;
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .enable_http2()
        .build();
    let client: HttpsClient = Client::builder(TokioExecutor::new()).build(connector);
    let request = Request::get(url).body(Empty::new())?;
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .map_err(|_| format!("GET {url}: no answer within 10 s"))??;
    let status = response.status();
    let body = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .map_err(|_| format!("GET {url}: body not complete within 10 s"))??
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
