//! The upgrade simulator's report, as a test reads it: `apiserver-fake upgrade --out DIR` writes
//! `DIR/report.json`, one run per `--mvp` setting (the proxy on first), and exits non-zero when the
//! proxy-on run shows harm. [`UpgradeReport::assert_false_404s_only_without_the_proxy`] is the check
//! every mode of the simulator (in-process, processes, containers) is held to.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// The parsed `report.json` of one `apiserver-fake upgrade` invocation.
#[derive(Debug, Clone)]
pub struct UpgradeReport {
    path: PathBuf,
    json: Value,
}

impl UpgradeReport {
    /// Reads `DIR/report.json` from the simulator's `--out DIR`. Fails with [`Error::Io`] when the file
    /// cannot be read and [`Error::Report`] when it is not a JSON object with a `runs` array.
    pub fn read(out_dir: impl AsRef<Path>) -> Result<Self> {
        let path = out_dir.as_ref().join("report.json");
        let text =
            std::fs::read_to_string(&path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| Error::Report {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if !json["runs"].is_array() {
            return Err(Error::Report {
                path,
                message: "no `runs` array".to_owned(),
            });
        }
        Ok(Self { path, json })
    }

    /// The whole document, for fields this type has no accessor for.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// The runs in the order the simulator made them (`--mvp both`: the proxy on, then off).
    pub fn runs(&self) -> &[Value] {
        self.json["runs"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The run with the Mixed Version Proxy on (`mvp: true`) or off, if the simulator made one.
    pub fn run(&self, mvp: bool) -> Option<&Value> {
        self.runs().iter().find(|run| run["mvp"].as_bool() == Some(mvp))
    }

    /// The simulator's central claim, as an assertion (it panics with the offending run, for use in
    /// tests): both runs made progress (more than ten acknowledged writes) and lost no acknowledged
    /// write; with the proxy on no request got a false 404 and no watch missed an event; with it off at
    /// least one false 404 was seen (so the run did exercise the mixed-version window).
    #[track_caller]
    pub fn assert_false_404s_only_without_the_proxy(&self) {
        let path = self.path.display();
        let (Some(on), Some(off)) = (self.run(true), self.run(false)) else {
            panic!(
                "{path}: a run with the proxy on and one with it off (--mvp both): {}",
                self.json
            );
        };
        for run in [on, off] {
            assert!(run["acknowledged_writes"].as_u64() > Some(10), "{path}: {run}");
            assert_eq!(run["lost_writes"], 0, "{path}: {run}");
        }
        assert_eq!(on["false_404"], 0, "{path}, with the proxy: {on}");
        assert_eq!(on["missed_watch_events"], 0, "{path}, with the proxy: {on}");
        assert!(
            off["false_404"].as_u64() > Some(0),
            "{path}, without the proxy: {off}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) {
        std::fs::write(dir.join("report.json"), text).expect("write report.json");
    }

    fn report(on: &str, off: &str) -> UpgradeReport {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &format!(r#"{{"runs": [{on}, {off}]}}"#));
        UpgradeReport::read(dir.path()).expect("a report")
    }

    const ON: &str = r#"{"mvp": true, "acknowledged_writes": 40, "lost_writes": 0, "false_404": 0, "missed_watch_events": 0}"#;
    const OFF: &str = r#"{"mvp": false, "acknowledged_writes": 38, "lost_writes": 0, "false_404": 7, "missed_watch_events": 2}"#;

    #[test]
    fn a_harmless_proxy_on_run_and_a_harmed_proxy_off_run_pass() {
        let report = report(ON, OFF);
        report.assert_false_404s_only_without_the_proxy();
        assert_eq!(report.run(false).map(|r| r["false_404"].clone()), Some(7.into()));
    }

    #[test]
    #[should_panic(expected = "with the proxy")]
    fn a_false_404_with_the_proxy_fails() {
        report(&ON.replace(r#""false_404": 0"#, r#""false_404": 1"#), OFF)
            .assert_false_404s_only_without_the_proxy();
    }

    #[test]
    #[should_panic(expected = "without the proxy")]
    fn no_false_404_without_the_proxy_fails() {
        report(ON, &OFF.replace(r#""false_404": 7"#, r#""false_404": 0"#))
            .assert_false_404s_only_without_the_proxy();
    }

    #[test]
    #[should_panic(expected = "lost_writes")]
    fn a_lost_write_fails() {
        report(ON, &OFF.replace(r#""lost_writes": 0"#, r#""lost_writes": 1"#))
            .assert_false_404s_only_without_the_proxy();
    }

    #[test]
    fn what_is_not_a_report_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(UpgradeReport::read(dir.path()), Err(Error::Io { .. })));
        write(dir.path(), "not json");
        assert!(matches!(
            UpgradeReport::read(dir.path()),
            Err(Error::Report { .. })
        ));
        write(dir.path(), r#"{"from": "1.35"}"#);
        let err = UpgradeReport::read(dir.path()).expect_err("no runs");
        assert!(
            err.to_string()
                .ends_with("report.json: not an upgrade report: no `runs` array"),
            "{err}"
        );
    }
}
