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
