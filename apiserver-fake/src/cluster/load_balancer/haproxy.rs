//! HAProxy (Debian's `haproxy`, found on the `PATH`) in front of the servers, configured as kubeadm's
//! HA guide configures it (`docs/ha-considerations.md` in kubernetes/kubeadm): a TCP frontend, a
//! round-robin TCP backend with `option httpchk GET /readyz`, `http-check expect status 200` and
//! `check check-ssl verify none` on every server, `option redispatch`, `retries 1`, the guide's
//! timeouts. Two departures, both written down in the file: the check timing of
//! [`super::HealthCheck`] (faster than HAProxy's defaults), and `/readyz` rather than the guide's
//! `/healthz` (readiness is what a balancer should follow; kube-apiserver's `/healthz` is deprecated).
//! A stats page on its own port (`/stats`, `/stats;csv`) shows each server's state and sessions.
//!
//! HAProxy runs in the foreground (`-db`) under `sh`, which holds a pipe from this process on its
//! standard input: when this process goes away (even by SIGKILL) the pipe closes and `sh` stops
//! HAProxy, so it never outlives the cluster on its ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, ChildStdin, Command};

use super::{BackendStats, HealthCheck, LB_IP};

/// A running `haproxy`.
#[derive(Debug)]
pub struct HaproxyBalancer {
    child: Child,
    stdin: Option<ChildStdin>,
    local_addr: SocketAddr,
    stats_addr: SocketAddr,
    config: PathBuf,
}

/// The configuration file's text (see the module docs).
pub fn render_config(
    listen: SocketAddr,
    stats: SocketAddr,
    backends: &[(String, SocketAddr)],
    check: HealthCheck,
) -> String {
    let ms = |d: Duration| d.as_millis();
    let mut servers = String::new();
    for (name, addr) in backends {
        servers.push_str(&format!("    server {name} {addr} check check-ssl verify none\n"));
    }
    format!(
        "# Written by `apiserver-fake cluster`: kubeadm's HA guide (haproxy configuration), with /readyz
# and faster health checks than HAProxy's defaults (inter 2s, fall 3, rise 2).
global
    log stdout format raw local0

defaults
    log                     global
    option                  dontlognull
    option                  redispatch
    retries                 1
    timeout queue           20s
    timeout connect         5s
    timeout client          35s
    timeout server          35s
    timeout check           {check_timeout}ms
    default-server          inter {interval}ms fall {fall} rise {rise}

frontend apiserver
    bind {listen}
    mode tcp
    option tcplog
    default_backend apiserverbackend

backend apiserverbackend
    option httpchk GET /readyz
    http-check expect status 200
    mode tcp
    balance roundrobin
{servers}
frontend stats
    bind {stats}
    mode http
    stats enable
    stats uri /stats
    stats refresh 5s
",
        check_timeout = ms(check.timeout),
        interval = ms(check.interval),
        fall = check.fall,
        rise = check.rise,
    )
}

/// Whether an `haproxy` is on the `PATH`.
pub fn available() -> bool {
    std::process::Command::new("haproxy")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl HaproxyBalancer {
    /// Writes `DIR/haproxy.cfg`, starts `haproxy` (its log in `DIR/haproxy.log`) on [`LB_IP`]:`port`
    /// (0: a free port) and waits until every backend is `UP` in its stats (at most 15 s).
    pub async fn start(
        dir: &Path,
        port: u16,
        backends: Vec<(String, SocketAddr)>,
        check: HealthCheck,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            available(),
            "lb: haproxy needs `haproxy` on the PATH (Debian: apt-get install haproxy); or use lb: embedded"
        );
        let free = || crate::cluster::etcd_process::free_port(LB_IP).context("no free port for haproxy");
        let port = if port == 0 { free()? } else { port };
        let local_addr = SocketAddr::new(LB_IP, port);
        let stats_addr = SocketAddr::new(LB_IP, free()?);
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, render_config(local_addr, stats_addr, &backends, check))
            .with_context(|| format!("failed to write {}", config.display()))?;
        let log_path = dir.join("haproxy.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("failed to create {}", log_path.display()))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"haproxy -db -f "$1" & hp=$!; cat >/dev/null; kill "$hp" 2>/dev/null; wait "$hp""#)
            .arg("sh")
            .arg(&config)
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("failed to start haproxy")?;
        let stdin = child.stdin.take();
        let mut balancer = Self {
            child,
            stdin,
            local_addr,
            stats_addr,
            config,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(stats) = balancer.stats().await
                && stats.len() == backends.len()
                && stats.iter().all(|s| s.status == "UP")
            {
                return Ok(balancer);
            }
            if let Some(status) = balancer.child.try_wait()? {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let last = log.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no output");
                anyhow::bail!("haproxy exited ({status}): {last}");
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "haproxy did not see every server up within 15 s (stats: http://{}/stats, log: {})",
                    balancer.stats_addr,
                    log_path.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The frontend's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://ip:port/stats`.
    pub fn stats_url(&self) -> String {
        format!("http://{}/stats", self.stats_addr)
    }

    /// Its configuration file.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// Each server's state, from the stats page's CSV (`svname`, `status`, `stot`, `scur`, `chkfail`).
    pub async fn stats(&self) -> anyhow::Result<Vec<BackendStats>> {
        let csv = fetch_stats_csv(self.stats_addr).await?;
        parse_stats_csv(&csv)
    }

    /// Stops HAProxy: closes the pipe (`sh` then stops it), SIGKILL after 5 s.
    pub async fn shutdown(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// `GET /stats;csv` over plain HTTP/1.0.
async fn fetch_stats_csv(addr: SocketAddr) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /stats;csv HTTP/1.0\r\nHost: haproxy\r\n\r\n")
            .await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        Ok::<_, std::io::Error>(text)
    };
    let text = tokio::time::timeout(Duration::from_secs(2), fetch)
        .await
        .context("haproxy's stats page did not answer")?
        .context("haproxy's stats page did not answer")?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("haproxy's stats page answered no body")?;
    // HAProxy answers even an HTTP/1.0 request with a chunked HTTP/1.1 body.
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return dechunk(body).context("haproxy's stats page sent a malformed chunked body");
    }
    Ok(body.to_owned())
}

/// The payload of a chunked HTTP/1.1 body.
fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// The server rows of the `apiserverbackend` backend in HAProxy's stats CSV.
pub fn parse_stats_csv(csv: &str) -> anyhow::Result<Vec<BackendStats>> {
    let mut lines = csv.lines();
    let header = lines
        .next()
        .and_then(|h| h.strip_prefix("# "))
        .context("haproxy's stats CSV has no header")?;
    let columns: Vec<&str> = header.split(',').collect();
    let column = |name: &str| {
        columns
            .iter()
            .position(|c| *c == name)
            .with_context(|| format!("haproxy's stats CSV has no {name} column"))
    };
    let (px, sv, status, stot, scur, chkfail, addr) = (
        column("pxname")?,
        column("svname")?,
        column("status")?,
        column("stot")?,
        column("scur")?,
        column("chkfail")?,
        column("addr").ok(),
    );
    let mut rows = Vec::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let field = |i: usize| fields.get(i).copied().unwrap_or_default();
        if field(px) != "apiserverbackend" || matches!(field(sv), "FRONTEND" | "BACKEND") {
            continue;
        }
        let number = |i: usize| field(i).parse().unwrap_or(0);
        // `UP 1/2` while rising, `DOWN 1/2` while falling: the state is the first word.
        let state = field(status).split_whitespace().next().unwrap_or_default();
        rows.push(BackendStats {
            name: field(sv).to_owned(),
            addr: addr.map(field).unwrap_or_default().to_owned(),
            status: state.to_owned(),
            connections: number(stot),
            active: number(scur),
            checks_failed: number(chkfail),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_kubeadms_with_readyz_checks_over_tls() {
        let text = render_config(
            "127.0.0.254:6443".parse().unwrap(),
            "127.0.0.254:9000".parse().unwrap(),
            &[
                ("a".to_owned(), "127.0.0.1:6443".parse().unwrap()),
                ("b".to_owned(), "127.0.0.2:6443".parse().unwrap()),
            ],
            HealthCheck::default(),
        );
        for line in [
            "    bind 127.0.0.254:6443\n    mode tcp\n",
            "    option httpchk GET /readyz\n    http-check expect status 200\n    mode tcp\n    balance roundrobin\n",
            "    server a 127.0.0.1:6443 check check-ssl verify none\n",
            "    server b 127.0.0.2:6443 check check-ssl verify none\n",
            "    default-server          inter 1000ms fall 2 rise 1\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
    }

    #[test]
    fn a_chunked_body_is_put_together() {
        assert_eq!(
            dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").as_deref(),
            Some("abcde")
        );
        assert_eq!(dechunk("9\r\nabc"), None);
    }

    #[test]
    fn the_stats_csv_gives_each_servers_state() {
        let csv = "# pxname,svname,qcur,scur,stot,status,chkfail,addr\n\
apiserver,FRONTEND,,2,10,OPEN,,\n\
apiserverbackend,a,0,1,5,UP,0,127.0.0.1:6443\n\
apiserverbackend,b,0,0,4,DOWN 1/2,3,127.0.0.2:6443\n\
apiserverbackend,BACKEND,0,1,9,UP,,\n";
        let rows = parse_stats_csv(csv).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (
                rows[0].name.as_str(),
                rows[0].status.as_str(),
                rows[0].connections
            ),
            ("a", "UP", 5)
        );
        assert_eq!((rows[1].status.as_str(), rows[1].checks_failed), ("DOWN", 3));
    }
}
