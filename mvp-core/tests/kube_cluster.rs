//! `KubeCluster` and the identity lease feeder against the workspace's fake demo cluster, started
//! as its built binary (`cargo build -p apiserver-fake`), and seen from outside with kubectl.

#[path = "../examples/support/demo.rs"]
mod demo;

use std::sync::Arc;
use std::time::Duration;

use kube_mvp_testing::Kubectl;
use mvp_core::cluster::ObjectRef;
use mvp_core::{ClusterApi, ClusterError, IdentityLease, IdentityLeaseTask, KubeCluster};
use serde_json::Value;

/// kubectl's view of the lease `name` in kube-system: `None` when it does not exist.
fn kubectl_lease(demo: &demo::Demo, name: &str) -> Option<Value> {
    let kubeconfig = std::path::PathBuf::from(demo.path("b.kubeconfig"));
    let scratch = kubeconfig.parent().expect("the demo's directory").to_owned();
    let output = Kubectl::new(kube_mvp_testing::kubectl::binary(), kubeconfig, &scratch)
        .run_blocking(&[
            "get",
            "lease",
            "-n",
            "kube-system",
            name,
            "-o",
            "json",
            "--ignore-not-found",
        ])
        .expect("kubectl runs");
    assert!(output.success, "kubectl failed: {}", output.stderr);
    (!output.stdout.is_empty()).then(|| serde_json::from_str(&output.stdout).expect("kubectl prints JSON"))
}

/// Polls kubectl until `done` holds for the lease (or its absence), for at most 20 s.
async fn wait_for_lease(
    demo: &demo::Demo,
    name: &str,
    what: &str,
    done: impl Fn(Option<&Value>) -> bool,
) -> Option<Value> {
    let done = &done;
    kube_mvp_testing::eventually(what, Duration::from_secs(20), move || async move {
        let lease = kubectl_lease(demo, name);
        done(lease.as_ref()).then_some(lease)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; last seen {:?}", kubectl_lease(demo, name)))
}

async fn cluster(demo: &demo::Demo) -> Arc<dyn ClusterApi> {
    let kubeconfig = kube::config::Kubeconfig::read_from(demo.path("cluster.kubeconfig")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Arc::new(KubeCluster::new(kube::Client::try_from(config).unwrap()))
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_lease_is_created_renewed_and_deleted_on_stop_through_kube_rs() {
    // kubectl 1.28 or newer, or the shared harness says why the test is skipped.
    if Kubectl::find().is_none() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let demo = demo::Demo::start().await.unwrap();
    let cluster = cluster(&demo).await;

    let mut lease = IdentityLease::new("feeder-host").peer_advertise_address("127.0.0.9:6443");
    lease.renew_interval = Duration::from_millis(300);
    let (server_id, holder) = (lease.server_id.clone(), lease.holder_identity.clone());
    let task = IdentityLeaseTask::new(cluster.clone(), lease);
    task.initialize().await.unwrap();

    let created = kubectl_lease(&demo, &server_id).expect("the lease exists after initialize");
    assert_eq!(
        created["metadata"]["labels"]["apiserver.kubernetes.io/identity"],
        "kube-apiserver"
    );
    assert_eq!(
        created["metadata"]["labels"]["kubernetes.io/hostname"],
        "feeder-host"
    );
    assert_eq!(
        created["metadata"]["annotations"]["kubernetes.io/peer-advertise-address"],
        "127.0.0.9:6443"
    );
    assert_eq!(created["spec"]["holderIdentity"], holder.as_str());
    assert_eq!(created["spec"]["leaseDurationSeconds"], 3600);

    // Renewed: the renew time moves on, the object (uid) stays.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(task.run(async { stopped.await.unwrap_or_default() }));
    let renewed = wait_for_lease(&demo, &server_id, "a renewal", |lease| {
        lease.is_some_and(|l| l["spec"]["renewTime"] != created["spec"]["renewTime"])
    })
    .await
    .unwrap();
    assert_eq!(renewed["metadata"]["uid"], created["metadata"]["uid"]);

    // The peers' leases are listed by label, this one among them.
    let selector = "apiserver.kubernetes.io/identity=kube-apiserver";
    let listed = cluster
        .list(&ObjectRef::lease("kube-system", ""), selector)
        .await
        .unwrap();
    let names: Vec<&str> = listed
        .iter()
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&server_id.as_str()), "{names:?}");

    // Graceful stop: the lease goes.
    stop.send(()).unwrap();
    running.await.unwrap();
    wait_for_lease(&demo, &server_id, "the deletion", |lease| lease.is_none()).await;

    // A new run of the same host deletes a lease another run left behind (a crash) and writes its own.
    let crashed = IdentityLeaseTask::new(cluster.clone(), IdentityLease::new("feeder-host"));
    crashed.initialize().await.unwrap();
    let stale = kubectl_lease(&demo, &server_id).unwrap();
    let next = IdentityLeaseTask::new(cluster.clone(), IdentityLease::new("feeder-host"));
    next.initialize().await.unwrap();
    let fresh = kubectl_lease(&demo, &server_id).unwrap();
    assert_ne!(fresh["metadata"]["uid"], stale["metadata"]["uid"]);
    assert_eq!(
        fresh["spec"]["holderIdentity"],
        next.lease().holder_identity.as_str()
    );

    // Peer endpoint records live in storage, out of an API client's reach.
    let record = serde_json::json!({});
    let err = cluster
        .put_record("/peerserverleases/x", record, Duration::from_secs(15))
        .await
        .unwrap_err();
    assert!(matches!(err, ClusterError::Unsupported(_)), "{err}");
}
