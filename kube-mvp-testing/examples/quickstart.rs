//! What a user's own test does with the fixture: a control plane in the middle of an upgrade, a Job
//! created through the server that does not serve `batch/v1` (its proxy forwards it), read back through
//! the load balancer and with kubectl, and a wait on a condition instead of a sleep.
//!
//! `cargo run -p kube-mvp-testing --example quickstart` (needs the `apiserver-fake` binary: see
//! `kube_mvp_testing::binary::find`). Prints what it saw and exits 0, or names what failed.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams};
use kube_mvp_testing::{ClusterBuilder, eventually};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cluster = ClusterBuilder::new()
        .server("old", |s| s.version("1.36").runtime_config("batch/v1=false"))
        .server("new", |s| s.version("1.36"))
        .start()
        .await?;
    for server in cluster.servers() {
        println!("{} {} at {}", server.name, server.kubernetes_version, server.url);
    }

    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hello"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]}}}
    }))?;
    let via_old: Api<Job> = Api::default_namespaced(cluster.client("old").await?);
    let created = via_old.create(&PostParams::default(), &job).await?;
    println!(
        "created job {} through old (proxied to new)",
        created.metadata.name.unwrap_or_default()
    );

    let balancer = cluster
        .balancer_client()
        .await?
        .ok_or_else(|| anyhow::anyhow!("no balancer"))?;
    let through_lb: Api<Job> = Api::default_namespaced(balancer);
    let names = eventually(
        "the job through the load balancer",
        Duration::from_secs(10),
        || async {
            let list = through_lb.list(&ListParams::default()).await.ok()?;
            let names: Vec<String> = list.items.into_iter().filter_map(|j| j.metadata.name).collect();
            names.contains(&"hello".to_owned()).then_some(names)
        },
    )
    .await?;
    println!("jobs through the load balancer: {names:?}");

    if let Some(kubectl) = cluster.kubectl("new")? {
        let output = kubectl
            .run(&["get", "jobs", "-o", "name"], Duration::from_secs(30))
            .await?;
        anyhow::ensure!(output.success, "kubectl get jobs: {}", output.stderr);
        print!("kubectl get jobs on new: {}", output.stdout);
    }
    cluster.stop().await;
    Ok(())
}
