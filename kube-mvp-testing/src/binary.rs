//! Finding the `apiserver-fake` binary the fixture drives.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable naming the `apiserver-fake` binary (it wins over every other place).
pub const BINARY_ENV: &str = "KUBE_MVP_APISERVER_FAKE";

/// The binary's file name.
const NAME: &str = if cfg!(windows) {
    "apiserver-fake.exe"
} else {
    "apiserver-fake"
};

/// The `apiserver-fake` binary: `$KUBE_MVP_APISERVER_FAKE`, else the first on `PATH` (`cargo install
/// apiserver-fake`), else one in the cargo target directory of the running test or example (inside
/// the kube-mvp workspace: `target/debug/deps/TEST` finds `target/debug/apiserver-fake`, so a
/// `cargo build -p apiserver-fake` or a workspace test run provides it).
pub fn find() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        return Ok(PathBuf::from(path));
    }
    if let Some(path) = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(NAME))
        .find(|candidate| is_file(candidate))
    {
        return Ok(path);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .take(3)
                .map(|dir| dir.join(NAME))
                .find(|c| is_file(c))
        })
        .ok_or(Error::BinaryNotFound)
}

fn is_file(path: &Path) -> bool {
    path.metadata().map(|m| m.is_file()).unwrap_or(false)
}
