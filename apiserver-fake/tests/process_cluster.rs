//! `apiserver-fake cluster --etcd` as a user runs it: every server its own process on a private etcd.
//! Driven from outside through what a script sees (`cluster.json`, pids, `etcdctl`, exit codes):
//! the first request is proxied, records are real etcd leases, no acknowledged write is lost when
//! every process is killed during a write load, and Ctrl-C stops every process it started.
//!
//! Needs the `etcd` feature and `etcd`/`etcdctl` on `PATH`; otherwise it says it is skipped (and fails
//! when `KUBE_MVP_REQUIRE_ETCD=1`, as CI sets it).

mod support;

#[cfg(not(feature = "etcd"))]
#[test]
fn process_clusters_are_skipped_without_the_feature() {
    support::etcd::skip("apiserver-fake was built without the `etcd` feature");
}

#[cfg(feature = "etcd")]
mod with_etcd {
    use std::collections::BTreeSet;
    use std::process::Command;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use http::StatusCode;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use serde_json::Value;

    use crate::support::demo::{Demo, admin, server};
    use crate::support::{JOBS, job};

    fn etcd_available() -> bool {
        if apiserver_fake::cluster::etcd_process::etcd_installed() {
            return true;
        }
        crate::support::etcd::skip("no etcd binary on PATH (Debian: apt-get install -y etcd-server)");
        false
    }

    fn pid_of(s: &Value) -> i32 {
        s["pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .expect("pid")
    }

    fn alive(pid: i32) -> bool {
        // A zombie still answers signal 0; its state in /proc says it is gone.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')))
    }

    /// Polls every 20 ms until process `pid` is gone; panics naming `what` after `within`.
    fn wait_gone(what: &str, pid: i32, within: Duration) {
        kube_mvp_testing::eventually_blocking(what, within, Duration::from_millis(20), || {
            (!alive(pid)).then_some(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }

    fn etcdctl(endpoint: &str, args: &[&str]) -> String {
        let output = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoint}"))
            .args(args)
            .output()
            .expect("etcdctl runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn servers_are_processes_on_etcd_and_the_first_request_is_proxied() {
        if !etcd_available() {
            return;
        }
        for round in 0..3 {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut demo = Demo::start(dir.path(), &["--etcd"]);
            let manifest = demo.wait_for_manifest(dir.path());
            let (a, b) = (server(&manifest, "a"), server(&manifest, "b"));
            // `a` has batch/v1 disabled: a 201 can only come from `b`, through the proxy.
            let created = admin(dir.path(), a)
                .post(JOBS, &job(&format!("first-{round}")))
                .await;
            assert_eq!(
                created.status,
                StatusCode::CREATED,
                "round {round}: {}",
                created.text()
            );

            let pids: BTreeSet<i32> = [pid_of(a), pid_of(b)].into();
            assert_eq!(pids.len(), 2, "one process per server: {manifest}");
            assert!(!pids.contains(&(demo.child.id() as i32)));
            assert!(pids.iter().all(|pid| alive(*pid)));

            let etcd = manifest["etcd"].as_str().expect("etcd URL");
            let raw = etcdctl(
                etcd,
                &["get", "--prefix", "/registry/peerserverleases/", "-w", "json"],
            );
            let raw: Value = serde_json::from_str(raw.trim()).unwrap();
            let records = raw["kvs"].as_array().expect("records");
            assert_eq!(records.len(), 2, "one endpoint record per server: {raw}");
            assert!(records.iter().all(|kv| kv["lease"].as_i64().unwrap_or(0) != 0));
            drop(demo);
        }
    }

    /// Kills every process (servers and the cluster command, which takes its etcd along) while
    /// writers create ConfigMaps through both servers; a second start on the same directory must
    /// return every write that was acknowledged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_acknowledged_write_is_lost_when_every_process_is_killed() {
        if !etcd_available() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mut demo = Demo::start(dir.path(), &["--etcd"]);
        let manifest = demo.wait_for_manifest(dir.path());
        let created = admin(dir.path(), server(&manifest, "a"))
            .post(JOBS, &job("survivor"))
            .await;
        assert_eq!(created.status, StatusCode::CREATED);

        let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
        let mut writers = Vec::new();
        for (w, name) in ["a", "b", "a", "b"].into_iter().enumerate() {
            let client = admin(dir.path(), server(&manifest, name));
            let acknowledged = acknowledged.clone();
            writers.push(tokio::spawn(async move {
                for i in 0.. {
                    let name = format!("w{w}-{i}");
                    let body =
                        format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#);
                    let reply = tokio::time::timeout(
                        Duration::from_secs(2),
                        client.try_send(
                            http::Method::POST,
                            "/api/v1/namespaces/default/configmaps",
                            &[],
                            Some(&body),
                        ),
                    )
                    .await;
                    match reply {
                        Ok(Ok(reply)) if reply.status == StatusCode::CREATED => {
                            acknowledged.lock().unwrap().push(name);
                        }
                        _ => return,
                    }
                }
            }));
        }
        // Kill once the load is under way (more than 10 writes acknowledged), however slow the machine.
        // Judged once every process is killed (a panic now would leave the servers running).
        let under_way = kube_mvp_testing::eventually(
            "more than 10 writes acknowledged under the load",
            Duration::from_secs(30),
            || async { (acknowledged.lock().unwrap().len() > 10).then_some(()) },
        )
        .await;
        for name in ["a", "b"] {
            kill(Pid::from_raw(pid_of(server(&manifest, name))), Signal::SIGKILL).unwrap();
        }
        demo.child.kill().unwrap();
        demo.child.wait().unwrap();
        for writer in writers {
            writer.await.unwrap();
        }
        let acknowledged = acknowledged.lock().unwrap().clone();
        under_way.unwrap_or_else(|e| panic!("{e}; the load wrote: {}", acknowledged.len()));
        for name in ["a", "b"] {
            let pid = pid_of(server(&manifest, name));
            wait_gone(
                &format!("server {name} (pid {pid}) to die of SIGKILL"),
                pid,
                Duration::from_secs(5),
            );
        }
        drop(demo);
        // A killed cluster cannot remove its manifest; a script restarting it removes the stale one
        // (the new start does too, but a script polling for the file could read it first).
        std::fs::remove_file(dir.path().join("cluster.json")).unwrap();

        let mut again = Demo::start(dir.path(), &["--etcd"]);
        let manifest = again.wait_for_manifest(dir.path());
        let b = admin(dir.path(), server(&manifest, "b"));
        let list = b.get("/api/v1/namespaces/default/configmaps").await;
        assert_eq!(list.status, StatusCode::OK);
        let list: Value = serde_json::from_str(&list.text()).unwrap();
        let stored: BTreeSet<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|item| item["metadata"]["name"].as_str())
            .collect();
        let lost: Vec<&String> = acknowledged
            .iter()
            .filter(|n| !stored.contains(n.as_str()))
            .collect();
        assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
        let job = admin(dir.path(), server(&manifest, "a"))
            .get(&format!("{JOBS}/survivor"))
            .await;
        assert_eq!(
            job.status,
            StatusCode::OK,
            "the Job survives, read through a's proxy: {}",
            job.text()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ctrl_c_stops_every_process_it_started_and_removes_cluster_json() {
        if !etcd_available() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mut demo = Demo::start(dir.path(), &["--etcd"]);
        let manifest = demo.wait_for_manifest(dir.path());
        let pids = [pid_of(server(&manifest, "a")), pid_of(server(&manifest, "b"))];
        let etcd = manifest["etcd"].as_str().unwrap().to_owned();
        kill(Pid::from_raw(demo.child.id() as i32), Signal::SIGINT).unwrap();
        let status = demo.child.wait().unwrap();
        assert!(status.success(), "{status}");
        for pid in pids {
            wait_gone(
                &format!("server {pid} to exit with the cluster"),
                pid,
                Duration::from_secs(5),
            );
        }
        assert!(!dir.path().join("cluster.json").exists());
        let health = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args([
                &format!("--endpoints={etcd}"),
                "--dial-timeout=500ms",
                "endpoint",
                "health",
            ])
            .output()
            .unwrap();
        assert!(!health.status.success(), "the private etcd is stopped too");
    }

    #[test]
    fn unreachable_etcd_is_a_one_line_error_and_a_non_zero_exit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .args([
                "cluster",
                "--port",
                "0",
                "--etcd-servers",
                "http://127.0.0.1:1",
                "--dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(lines[0].starts_with("error: "), "{stderr}");
        assert!(lines[0].contains("etcd"), "{stderr}");
        assert!(!dir.path().join("cluster.json").exists());
    }

    /// One server on an etcd of the test's own, under `--etcd-prefix=/mine`: it touches no key outside
    /// its prefix; when etcd goes away `/readyz` says `[-]etcd failed` and a request gets a 500
    /// Status; when etcd comes back on the same data, so does the server, with its objects.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn losing_etcd_fails_readyz_and_requests_until_it_is_back() {
        if !etcd_available() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("etcd");
        let start_etcd = |port: u16| {
            apiserver_fake::cluster::etcd_process::EtcdProcess::start(
                &data,
                std::net::Ipv4Addr::LOCALHOST,
                port,
                Some(&dir.path().join("etcd.log")),
                true,
            )
            .expect("etcd starts")
        };
        let etcd = start_etcd(0);
        let url = etcd.client_url().to_owned();
        let etcd_port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
        etcdctl(&url, &["put", "/registry/jobs/default/theirs", "{}"]);

        let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
        let pki = certs::Pki::generate(&certs::PkiSpec::new([certs::ServerSpec::new("a", [ip])])).unwrap();
        let paths = pki.write_to(&dir.path().join("pki")).unwrap();
        let port = std::net::TcpListener::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Command::new(env!("CARGO_BIN_EXE_apiserver-fake"))
            .arg("--tls-cert-file")
            .arg(paths.server_cert("a"))
            .arg("--tls-private-key-file")
            .arg(paths.server_key("a"))
            .arg("--client-ca-file")
            .arg(&paths.ca_cert)
            .args(["--bind-address=127.0.0.1", &format!("--secure-port={port}")])
            .args([&format!("--etcd-servers={url}"), "--etcd-prefix=/mine"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let client = crate::support::TestClient::new(
            &format!("https://127.0.0.1:{port}"),
            &paths.ca_cert,
            Some((&paths.admin_cert, &paths.admin_key)),
        );
        let until = |what: &'static str, check: fn(&crate::support::Reply) -> bool| {
            let client = &client;
            async move {
                crate::support::eventually(what, Duration::from_secs(20), || async {
                    let reply = client.try_send(http::Method::GET, "/readyz", &[], None).await;
                    reply.ok().filter(check)
                })
                .await
            }
        };
        until("/readyz to answer 200 on etcd", |r| r.status == StatusCode::OK).await;
        let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept"}}"#;
        let created = client.post("/api/v1/namespaces/default/configmaps", cm).await;
        assert_eq!(created.status, StatusCode::CREATED);
        let keys = etcdctl(&url, &["get", "", "--prefix", "--keys-only"]);
        let foreign: Vec<&str> = keys
            .lines()
            .filter(|k| !k.is_empty() && !k.starts_with("/mine/"))
            .collect();
        assert_eq!(
            foreign,
            ["/registry/jobs/default/theirs"],
            "nothing outside /mine"
        );

        drop(etcd);
        let not_ready = until("/readyz to answer 500 once etcd is gone", |r| {
            r.status == StatusCode::INTERNAL_SERVER_ERROR
        })
        .await;
        assert_eq!(
            not_ready.text(),
            "[-]etcd failed: reason withheld\nreadyz check failed\n"
        );
        let failed = client.get("/api/v1/namespaces/default/configmaps/kept").await;
        assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
        let status: Value = serde_json::from_str(&failed.text()).unwrap();
        assert_eq!(
            (status["kind"].as_str(), status["code"].as_i64()),
            (Some("Status"), Some(500))
        );

        let _etcd = start_etcd(etcd_port);
        until("ready again", |r| r.status == StatusCode::OK).await;
        let kept = client.get("/api/v1/namespaces/default/configmaps/kept").await;
        assert_eq!(kept.status, StatusCode::OK, "{}", kept.text());
        let _ = server.kill();
        let _ = server.wait();
    }
}
