//! A real kube-apiserver as a member of a cluster of fakes (`binary:` in `cluster --config`).
//!
//! The fakes store what kube-apiserver stores, where it stores it (docs/storage.md), and publish their
//! identity leases and peer endpoint records in upstream's shapes, so a real server on the cluster's etcd
//! finds them as peers and they find it. This module is what differs for such a member:
//! - **which binary**: a path (relative to the config file), or a bare name looked up in
//!   `$KUBEBUILDER_ASSETS` (envtest's layout: `kube-apiserver`, `etcd`, `kubectl` in one folder) and then
//!   on `PATH`;
//! - **its version**, read from `BINARY --version` (`Kubernetes v1.36.2`), not chosen: a developer's own
//!   build may be a minor the fakes do not emulate;
//! - **its command line**: the cluster's PKI, requestheader, service-account and peer flags as the fakes get
//!   them, without the fakes' own (`--kubernetes-version`, `--hostname`);
//! - **its hostname**: kube-apiserver names its identity lease after the host name, so every real member
//!   runs in a UTS namespace of its own whose host name is the member's name (when the cluster may create
//!   one, as root may; otherwise it keeps the machine's name, which a second real member would share).

use std::path::{Path, PathBuf};

use crate::server::config::ServerFlags;

/// The binary a member names, resolved, with the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeApiserverBinary {
    /// The executable.
    pub path: PathBuf,
    /// `major.minor` as the binary reports it (`1.36`).
    pub version: String,
    /// The minor, for what depends on it (how the proxy resolves peers).
    pub minor: u32,
}

/// Why a member's binary cannot be used; the config file names the key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BinaryError {
    /// Nothing executable at the path, in `$KUBEBUILDER_ASSETS` or on `PATH`.
    #[error("{0}")]
    NotFound(String),
    /// The binary did not run, or did not print a Kubernetes version.
    #[error("{0}")]
    NoVersion(String),
}

impl KubeApiserverBinary {
    /// Resolves `name` (see the module docs; `base` is the config file's directory) and asks the binary
    /// its version.
    pub fn resolve(name: &str, base: &Path) -> Result<Self, BinaryError> {
        let path = locate(name, base)?;
        let output = std::process::Command::new(&path)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| BinaryError::NoVersion(format!("{}: {e}", path.display())))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let (version, minor) = parse_version(&text).ok_or_else(|| {
            let first = text.lines().next().unwrap_or("no output");
            BinaryError::NoVersion(format!(
                "{} --version printed {first:?}, not `Kubernetes vMAJOR.MINOR.PATCH`",
                path.display()
            ))
        })?;
        Ok(Self { path, version, minor })
    }
}

/// `Kubernetes v1.36.2` (or a development build's `v1.37.0-alpha.1.20+abc`) → (`1.36`, 36).
pub fn parse_version(text: &str) -> Option<(String, u32)> {
    let word = text
        .split_whitespace()
        .find(|w| w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))?;
    let mut parts = word[1..].split('.');
    let major: u32 = parts.next()?.parse().ok()?;
    let minor_text: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    let minor: u32 = minor_text.parse().ok()?;
    Some((format!("{major}.{minor}"), minor))
}

fn locate(name: &str, base: &Path) -> Result<PathBuf, BinaryError> {
    if name.is_empty() {
        return Err(BinaryError::NotFound("names no binary".to_owned()));
    }
    if name.contains('/') {
        let path = base.join(name);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(BinaryError::NotFound(format!(
                "{} is not an executable file",
                path.display()
            )))
        };
    }
    let mut searched = Vec::new();
    if let Some(assets) = std::env::var_os("KUBEBUILDER_ASSETS") {
        let path = PathBuf::from(assets).join(name);
        if is_executable(&path) {
            return Ok(path);
        }
        searched.push("$KUBEBUILDER_ASSETS");
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let path = dir.join(name);
            if is_executable(&path) {
                return Ok(path);
            }
        }
        searched.push("PATH");
    }
    Err(BinaryError::NotFound(format!(
        "{name:?} is not in {} (name a path, or set KUBEBUILDER_ASSETS to envtest's binaries)",
        if searched.is_empty() {
            "PATH".to_owned()
        } else {
            searched.join(" or ")
        }
    )))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The command line of a real member from the fakes' (`fake_flags`, as `cluster::member_flags` writes
/// them): the fakes' own flags ([`ServerFlags::fake_only_flags`]: the version, host name, lease timings
/// and the proxy's mode, which a real server takes from its build and defaults) dropped, the advertise address set to the member's address (upstream
/// would pick the host's first interface, which no peer on loopback reaches), and the peer CA when the
/// proxy's gate is on.
pub fn kube_apiserver_args(fake_flags: Vec<String>, ip: std::net::IpAddr, peer_ca: &Path) -> Vec<String> {
    let name = |flag: &str| flag.split('=').next().unwrap_or_default().to_owned();
    let fake_only = ServerFlags::fake_only_flags();
    let mut args: Vec<String> = fake_flags
        .into_iter()
        .filter(|flag| !fake_only.contains(&name(flag)))
        .collect();
    if !args.iter().any(|a| name(a) == "--advertise-address") {
        args.push(format!("--advertise-address={ip}"));
    }
    let gate_on = args.iter().any(|a| {
        a.strip_prefix("--feature-gates=").is_some_and(|gates| {
            gates
                .split(',')
                .any(|g| g.trim() == "UnknownVersionInteroperabilityProxy=true")
        })
    });
    if gate_on && !args.iter().any(|a| name(a) == "--peer-ca-file") {
        args.push(format!("--peer-ca-file={}", peer_ca.display()));
    }
    args
}

/// `apiserver-fake exec-member`: what the cluster runs for a real member. In a UTS namespace named
/// `hostname` when the process may make one (best effort: without privilege the member keeps the
/// machine's name), with SIGTERM on its parent's death (the fakes are tied to the cluster by a pipe on
/// stdin, which a real kube-apiserver does not watch), it replaces itself with `binary args`, so the
/// pid the cluster holds is kube-apiserver's. Returns only when the exec fails.
pub fn exec_member(hostname: &str, binary: &Path, args: &[String]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUTS).is_ok()
        && let Err(err) = nix::unistd::sethostname(hostname)
    {
        return std::io::Error::other(format!("failed to set the host name {hostname:?}: {err}"));
    }
    if let Err(err) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM) {
        return std::io::Error::other(format!(
            "failed to tie {} to the cluster: {err}",
            binary.display()
        ));
    }
    std::process::Command::new(binary).args(args).exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_of_releases_and_development_builds() {
        assert_eq!(
            parse_version("Kubernetes v1.36.2\n"),
            Some(("1.36".to_owned(), 36))
        );
        assert_eq!(
            parse_version("Kubernetes v1.37.0-alpha.1.20+abcdef"),
            Some(("1.37".to_owned(), 37))
        );
        assert_eq!(parse_version("apiserver-fake 0.1.0"), None);
        assert_eq!(parse_version(""), None);
    }

    #[test]
    fn a_binary_not_found_says_where_it_was_looked_for() {
        let base = Path::new("/nonexistent");
        let err = locate("./kube-apiserver", base).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/nonexistent/./kube-apiserver is not an executable file"
        );
        let err = locate("no-such-kube-apiserver-binary", base).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("\"no-such-kube-apiserver-binary\" is not in"),
            "{err}"
        );
    }

    #[test]
    fn the_fakes_own_flags_are_dropped_and_the_peer_flags_added() {
        let args = kube_apiserver_args(
            vec![
                "--kubernetes-version=1.36".to_owned(),
                "--hostname=real".to_owned(),
                "--secure-port=6443".to_owned(),
                "--peer-resolution-mode=discovery".to_owned(),
                "--identity-lease-gc-period-seconds=5".to_owned(),
                "--feature-gates=UnknownVersionInteroperabilityProxy=true".to_owned(),
            ],
            "127.0.0.2".parse().unwrap(),
            Path::new("/d/ca.crt"),
        );
        assert_eq!(
            args,
            [
                "--secure-port=6443",
                "--feature-gates=UnknownVersionInteroperabilityProxy=true",
                "--advertise-address=127.0.0.2",
                "--peer-ca-file=/d/ca.crt",
            ]
        );
    }

    #[test]
    fn the_fake_only_flags_are_the_ones_marked_so() {
        let fake_only = ServerFlags::fake_only_flags();
        for flag in [
            "--kubernetes-version",
            "--hostname",
            "--peer-resolution-mode",
            "--peer-endpoint-ttl-seconds",
        ] {
            assert!(fake_only.contains(flag), "{flag} missing from {fake_only:?}");
        }
        for flag in [
            "--feature-gates",
            "--runtime-config",
            "--secure-port",
            "--etcd-servers",
        ] {
            assert!(!fake_only.contains(flag), "{flag} is kube-apiserver's");
        }
    }
}
