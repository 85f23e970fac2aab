//! Whether etcd's *requested* progress notifications can be trusted: upstream's `RequestWatchProgress`
//! storage feature (`staging/src/k8s.io/apiserver/pkg/storage/feature/feature_support_checker.go`).
//!
//! Before etcd 3.4.25 / 3.5.8 (etcd-io/etcd#15220) a `ProgressRequest` was answered at once with the
//! store's current revision on a control channel that overtakes the events still queued for the
//! stream's watchers — always so for a watcher still catching up from an older revision. Before
//! 3.4.31 / 3.5.13 (etcd-io/etcd#17507) such a request could go unanswered. A watch cache that takes
//! such a notification as "every change up to here was delivered" serves consistent lists without
//! acknowledged writes and drops the late events as old (docs/decisions.md §21). Upstream therefore
//! serves consistent lists from its cache only when every etcd endpoint is at 3.4.31+ or 3.5.13+.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

/// How long the version check of one endpoint may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether etcd `version` answers `ProgressRequest`s in order with events (upstream's
/// `endpointSupportsRequestWatchProgress`): 3.4.31+ in 3.4, 3.5.13+ in 3.5, any later minor.
/// A version that does not parse is taken not to, as upstream does.
pub(super) fn version_supports_request_progress(version: &str) -> bool {
    // Semantic version core (`3.6.0-alpha.0` → 3.6.0; upstream's pre-release ordering does not
    // change the answer at these bounds).
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<u64> = core.split('.').map_while(|p| p.parse().ok()).collect();
    let [major, minor, patch] = parts[..] else {
        return false;
    };
    let version = (major, minor, patch);
    // 3.5.0 to 3.5.12 are above 3.4.31 but lack the fix.
    let fixed_in_3_5 = !((3, 5, 0)..(3, 5, 13)).contains(&version);
    version >= (3, 4, 31) && fixed_in_3_5
}

/// Whether every endpoint of `servers` is at a version whose requested progress notifications can be
/// trusted (`Err`: an endpoint could not be asked; the caller asks again later and meanwhile does not
/// trust them, as upstream's checker answers false until it knows).
pub(super) async fn servers_support_request_progress(servers: &[String]) -> Result<bool, String> {
    for server in servers {
        let options = ConnectOptions::new().with_connect_timeout(CHECK_TIMEOUT);
        let status = tokio::time::timeout(CHECK_TIMEOUT, async {
            let mut client = Client::connect([server.as_str()], Some(options)).await?;
            client.status().await
        })
        .await
        .map_err(|_| format!("etcd {server}: status: context deadline exceeded"))?
        .map_err(|err| format!("etcd {server}: status: {err}"))?;
        if !version_supports_request_progress(status.version()) {
            tracing::info!(endpoint = %server, version = status.version(), "RequestWatchProgress feature is not supported by the etcd endpoint: consistent lists are read from etcd");
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::version_supports_request_progress as supports;

    #[test]
    fn follows_upstreams_version_bounds() {
        for version in [
            "3.4.23", "3.4.30", "3.5.0", "3.5.12", "3.3.27", "", "three", "3.5",
        ] {
            assert!(!supports(version), "{version}");
        }
        for version in [
            "3.4.31",
            "3.4.35",
            "3.5.13",
            "3.5.21",
            "3.6.0",
            "3.6.0-alpha.0",
            "4.0.0",
        ] {
            assert!(supports(version), "{version}");
        }
    }
}
