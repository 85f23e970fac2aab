//! nginx as the reference hop of the proxy benches: a TLS→TLS reverse proxy in front of `b` as one is put
//! in front of an apiserver (upstream connections kept alive, no buffering, since watches stream), started
//! from a config written to a temporary directory and stopped on drop. Each bench includes it with
//! `mod nginx;`.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server nginx forwards to and how it authenticates there (the admin's client certificate,
/// the cluster CA to verify the server).
pub struct Upstream<'a> {
    /// `host:port`.
    pub address: String,
    pub client_cert: &'a Path,
    pub client_key: &'a Path,
    pub ca: &'a Path,
}

/// nginx running as a reverse proxy, torn down (SIGTERM, then SIGKILL) on drop.
pub struct Nginx {
    child: Child,
    /// The master's and the workers' process IDs.
    pub pids: Vec<u32>,
    /// Where clients reach it (`https://ip:port`).
    pub url: String,
    _prefix: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: nginx's fast shutdown, the master stops its workers before it exits (a SIGKILL would
        // leave them running).
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `program` in `PATH` (or `/usr/sbin`, where Debian puts nginx).
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The PIDs of `master`'s children (nginx's workers).
fn children(master: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // After the ")" come the state and the parent's PID.
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1));
        if ppid.and_then(|p| p.parse::<u32>().ok()) == Some(master) {
            pids.push(pid);
        }
    }
    pids
}

/// Whether this process runs as root (`Uid:` in `/proc/self/status`, effective ID second).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    })
}

/// The config: a TLS listener (HTTP/2 and HTTP/1.1 by ALPN when `http2`, else HTTP/1.1 only), `proxy_pass`
/// over TLS to the upstream, verifying it and presenting the client certificate.
fn config(prefix: &Path, listen: &str, upstream: &Upstream<'_>, http2: bool) -> String {
    let http2 = if http2 { " http2" } else { "" };
    format!(
        r#"daemon off;
master_process on;
worker_processes auto;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream b {{
        server {address};
        keepalive 64;
    }}
    server {{
        listen {listen} ssl{http2};
        ssl_certificate {dir}/nginx.crt;
        ssl_certificate_key {dir}/nginx.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        http2_max_concurrent_streams 1000;
        keepalive_requests 1000000;
        location / {{
            proxy_pass https://b;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 1h;
            proxy_ssl_protocols TLSv1.2 TLSv1.3;
            proxy_ssl_certificate {client_cert};
            proxy_ssl_certificate_key {client_key};
            proxy_ssl_trusted_certificate {ca};
            proxy_ssl_verify on;
            proxy_ssl_name kubernetes.default.svc;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;
        }}
    }}
}}
"#,
        dir = prefix.display(),
        address = upstream.address,
        client_cert = upstream.client_cert.display(),
        client_key = upstream.client_key.display(),
        ca = upstream.ca.display(),
    )
}

/// Starts nginx in front of `upstream` on 127.0.0.3, serving a certificate of `serving_ca`, and waits
/// until it listens with its workers up; or says why it could not.
pub fn start(
    upstream: &Upstream<'_>,
    serving_ca: &certs::CertificateAuthority,
    http2: bool,
) -> Result<Nginx, String> {
    let binary = on_path("nginx").ok_or("nginx is not on the PATH (apt-get install -y nginx)")?;
    let prefix = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = prefix.path();
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
    let port = std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    serving_ca
        .issue_serving_cert("nginx", &[ip], &[])
        .and_then(|cert| cert.write_to(&dir.join("nginx.crt"), &dir.join("nginx.key")))
        .map_err(|e| e.to_string())?;
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(dir, &format!("{ip}:{port}"), upstream, http2))
        .map_err(|e| e.to_string())?;
    let mut command = Command::new(&binary);
    command.arg("-p").arg(dir).arg("-c").arg(&conf);
    // As root, nginx's workers would run as `nobody`, who may not read the admin key in our directories.
    if running_as_root() {
        command.args(["-g", "user root;"]);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let mut started = Nginx {
        pids: vec![child.id()],
        child,
        url: format!("https://{ip}:{port}"),
        _prefix: prefix,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = started.child.try_wait() {
            let log = std::fs::read_to_string(started._prefix.path().join("error.log")).unwrap_or_default();
            return Err(format!("nginx exited ({status}): {log}"));
        }
        let workers = children(started.child.id());
        if std::net::TcpStream::connect((ip, port)).is_ok() && !workers.is_empty() {
            started.pids.extend(workers);
            return Ok(started);
        }
        if Instant::now() > deadline {
            return Err("nginx did not start listening within 10 s".to_owned());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
