//! The private etcd the etcd-backed tests share, and what they do when there is none.

/// Set to `1` (CI does) to make a missing etcd or a build without the `etcd` feature a failure.
pub const REQUIRE_ETCD: &str = "KUBE_MVP_REQUIRE_ETCD";

/// Says that a test is skipped and why, or fails it when [`REQUIRE_ETCD`] is set.
pub fn skip(why: &str) {
    assert!(
        std::env::var(REQUIRE_ETCD).as_deref() != Ok("1"),
        "{REQUIRE_ETCD}=1 but the etcd tests cannot run: {why}"
    );
    eprintln!("skipped: {why} (set {REQUIRE_ETCD}=1 to make this a failure)");
}

/// Whether an `etcd` binary is on `PATH`; if not, [`skip`]s (or fails the test under [`REQUIRE_ETCD`]).
pub fn etcd_on_path() -> bool {
    let installed = apiserver_fake::cluster::etcd_process::etcd_installed();
    if !installed {
        skip("no etcd binary on PATH (Debian: apt-get install -y etcd-server)");
    }
    installed
}

/// The process-wide etcd of a test binary.
#[derive(Debug)]
pub struct PrivateEtcd {
    /// Its client URL.
    pub url: String,
}

/// The shared private etcd, or `None` (after [`skip`]) when it cannot be started.
pub fn private_etcd() -> Option<PrivateEtcd> {
    match apiserver_fake::cluster::etcd_process::EtcdProcess::shared() {
        Ok(etcd) => Some(PrivateEtcd {
            url: etcd.client_url().to_owned(),
        }),
        Err(why) => {
            skip(&why);
            None
        }
    }
}

/// An admin client (system:masters, through the cluster's CA and admin certificate) of server `name`
/// of a [`ProcessCluster`](apiserver_fake::cluster::process::ProcessCluster); panics on an unknown name.
#[cfg(feature = "etcd")]
pub fn process_admin(
    cluster: &apiserver_fake::cluster::process::ProcessCluster,
    name: &str,
) -> super::TestClient {
    let dir = cluster.dir();
    super::TestClient::new(
        &cluster.url(name).unwrap_or_else(|e| panic!("{e}")),
        &dir.join("ca.crt"),
        Some((&dir.join("admin.crt"), &dir.join("admin.key"))),
    )
}

/// One server, `b` (1.36 with `flags`, on 127.0.0.2), of the built binary as a process of its own on
/// `etcd`, its files in `dir/cluster`, started and ready; and an admin client of it ([`process_admin`]).
#[cfg(feature = "etcd")]
pub async fn one_server_process(
    dir: &std::path::Path,
    flags: &[&str],
    etcd: apiserver_fake::cluster::process::EtcdBackend,
) -> (
    apiserver_fake::cluster::process::ProcessCluster,
    std::sync::Arc<super::TestClient>,
) {
    let cluster = apiserver_fake::cluster::process::ProcessCluster::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_apiserver-fake")),
        Some(dir.join("cluster")),
        vec![super::member("b", 2, "1.36", flags)],
        0,
        etcd,
        "/registry",
    )
    .await
    .expect("the cluster starts");
    let client = std::sync::Arc::new(process_admin(&cluster, "b"));
    (cluster, client)
}
