//! The fixture's failures and teardown against the built `apiserver-fake` binary (found in this
//! workspace's target directory, or through `$KUBE_MVP_APISERVER_FAKE`). What a cluster serves, as a
//! user's crate sees it, is `e2e/tests/published_fixture.rs` and `examples/quickstart.rs`.

use std::time::Duration;

use kube_mvp_testing::{ClusterBuilder, Error, eventually};

#[tokio::test]
async fn a_cluster_the_binary_refuses_fails_with_its_one_line_reason() {
    let err = ClusterBuilder::new()
        .server("a", |s| s.version("1.36"))
        .server("a", |s| s.version("1.36"))
        .start()
        .await
        .expect_err("a duplicate name is refused");
    let Error::ClusterExited { log, .. } = &err else {
        panic!("not the binary's refusal: {err}");
    };
    assert!(
        log.contains(r#"servers[1].name: duplicate name "a" (also servers[0])"#),
        "{err}"
    );

    let err = ClusterBuilder::new().start().await.expect_err("no servers");
    assert_eq!(
        err.to_string(),
        "invalid cluster: no servers: add one with ClusterBuilder::server"
    );
}

#[tokio::test]
async fn faults_need_server_processes_and_stopping_frees_everything() {
    let cluster = ClusterBuilder::new()
        .server("a", |s| s.version("1.36"))
        .controller_manager(false)
        .start()
        .await
        .expect("cluster starts");
    // The server is there and answers (so the refusal below is about the mode, not the name).
    let a = cluster.client("a").await.expect("client");
    a.apiserver_version().await.expect("a answers");
    let err = cluster
        .kill("a")
        .expect_err("an in-process server has no process");
    assert_eq!(
        err.to_string(),
        "cannot kill server a: it has no process of its own (start the cluster with Run::Processes)"
    );
    assert!(matches!(cluster.pause("zz"), Err(Error::UnknownServer(name)) if name == "zz"));

    let dir = cluster.dir().to_owned();
    assert!(dir.join("cluster.json").is_file());
    cluster.stop().await;
    assert!(
        !dir.exists(),
        "the temporary directory is removed with the cluster"
    );
    // The server stopped with it: its port refuses connections (a client can see that at once).
    let gone = eventually("a to stop answering", Duration::from_secs(10), || async {
        a.apiserver_version().await.err()
    })
    .await
    .expect("a stops");
    assert!(
        matches!(gone, kube::Error::HyperError(_) | kube::Error::Service(_)),
        "{gone:?}"
    );
}
