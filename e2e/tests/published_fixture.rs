//! The e2e suite using the published fixture `kube-mvp-testing` as a user's crate does: only its public
//! API, kube-rs and kubectl, against clusters of the built `apiserver-fake` binary (found in this
//! workspace's target directory; `cargo test --workspace` builds it). A control plane in the middle of an
//! upgrade serves a Job through the server without `batch/v1` and through the load balancer; on server
//! processes on etcd, a stalled server (SIGSTOP) leaves the balancer answering.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube_mvp_testing::{ClusterBuilder, Run, Store, eventually};

/// How long a test waits for what normally takes milliseconds.
const SETTLE: Duration = Duration::from_secs(15);

fn job(name: &str) -> Job {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("a Job")
}

async fn job_names(jobs: &Api<Job>) -> kube::Result<Vec<String>> {
    let list = jobs.list(&ListParams::default()).await?;
    Ok(list.items.into_iter().filter_map(|j| j.metadata.name).collect())
}

#[tokio::test]
async fn a_mid_upgrade_control_plane_serves_jobs_through_every_server_and_the_balancer() {
    let cluster = ClusterBuilder::new()
        .server("old", |s| {
            s.version("1.35")
                .feature_gate("UnknownVersionInteroperabilityProxy", true)
                .runtime_config("batch/v1=false")
        })
        .server("new", |s| s.version("1.36"))
        .controller_manager(false)
        .start()
        .await
        .expect("cluster starts");
    for (name, minor) in [("old", "35"), ("new", "36")] {
        let version = cluster
            .client(name)
            .await
            .expect("client")
            .apiserver_version()
            .await
            .expect("/version");
        assert_eq!(version.minor, minor, "{name}");
    }

    let via_old: Api<Job> = Api::default_namespaced(cluster.client("old").await.expect("client"));
    via_old
        .create(&PostParams::default(), &job("hello"))
        .await
        .expect("old proxies the create to new");
    assert_eq!(
        job_names(&via_old).await.expect("old proxies the list"),
        ["hello"]
    );

    // Every connection through the balancer lands on one server or the other; each answers the same.
    let lb = cluster.balancer().expect("the embedded balancer");
    assert_eq!(lb.kind, "embedded");
    for _ in 0..4 {
        let through: Api<Job> = Api::default_namespaced(
            cluster
                .balancer_client()
                .await
                .expect("client")
                .expect("a balancer"),
        );
        assert_eq!(
            job_names(&through).await.expect("list through the balancer"),
            ["hello"]
        );
    }
    if let Some(kubectl) = cluster.balancer_kubectl() {
        let output = kubectl
            .run(&["get", "jobs", "-o", "name"], SETTLE)
            .await
            .expect("kubectl runs");
        assert!(output.success, "{output:?}");
        assert_eq!(output.stdout, "job.batch/hello\n");
    }
}

/// Whether the binary the fixture finds was built with the `etcd` feature and `etcd` is on PATH; if
/// not, says why the test is skipped (a failure under `KUBE_MVP_REQUIRE_ETCD=1`, as CI sets it).
fn etcd_processes_possible() -> bool {
    let why = match kube_mvp_testing::binary::find() {
        Err(e) => e.to_string(),
        Ok(binary) => {
            let version = std::process::Command::new(&binary)
                .arg("--version")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let etcd = std::process::Command::new("etcd")
                .arg("--version")
                .output()
                .is_ok();
            match (version.contains("etcd"), etcd) {
                (true, true) => return true,
                (false, _) => format!("{} was built without the etcd feature", binary.display()),
                (true, false) => "no etcd on PATH".to_owned(),
            }
        }
    };
    assert!(
        std::env::var("KUBE_MVP_REQUIRE_ETCD").as_deref() != Ok("1"),
        "KUBE_MVP_REQUIRE_ETCD=1 but server processes on etcd cannot run: {why}"
    );
    eprintln!("skipped: {why}");
    false
}

#[tokio::test]
async fn a_stalled_server_process_leaves_the_balancer_answering() {
    if !etcd_processes_possible() {
        return;
    }
    let cluster = ClusterBuilder::new()
        .server("a", |s| s.version("1.36"))
        .server("b", |s| s.version("1.36"))
        .store(Store::Etcd)
        .run(Run::Processes)
        .controller_manager(false)
        .start()
        .await
        .expect("cluster starts");
    let b = cluster.server("b").expect("b");
    assert!(b.pid.is_some(), "a process server has its pid in cluster.json");
    let maps = |client| Api::<ConfigMap>::default_namespaced(client);

    // b answers before the fault, so its silence below is the fault's doing.
    let b_client = cluster.client("b").await.expect("client");
    maps(b_client.clone())
        .list(&ListParams::default())
        .await
        .expect("b answers");
    cluster.pause("b").expect("SIGSTOP to b");
    // The attempt is made and b does not answer within its deadline: it is stalled.
    let stalled = tokio::time::timeout(
        Duration::from_secs(2),
        maps(b_client).list(&ListParams::default()),
    )
    .await;
    assert!(stalled.is_err(), "a stalled server answers nothing: {stalled:?}");
    // The balancer takes b out after two failed health checks; from then on every connection is answered.
    eventually("the balancer to answer three lists in a row", SETTLE, || async {
        for _ in 0..3 {
            let client = cluster.balancer_client().await.ok()??;
            tokio::time::timeout(Duration::from_secs(1), maps(client).list(&ListParams::default()))
                .await
                .ok()?
                .ok()?;
        }
        Some(())
    })
    .await
    .expect("the balancer skips the stalled server");

    cluster.resume("b").expect("SIGCONT to b");
    let b_client = cluster.client("b").await.expect("client");
    eventually("b to answer again", SETTLE, || async {
        maps(b_client.clone()).list(&ListParams::default()).await.ok()
    })
    .await
    .expect("b answers once resumed");
    cluster.stop().await;
}
