//! kube-apiserver's logging flags (component-base `logs/api/v1`: `-v`/`--v`, `--vmodule`,
//! `--log-flush-frequency`, `--logging-format`) and the `tracing` output they configure.
//!
//! A kube-apiserver command line (a kubeadm static-pod manifest's, say) carries `--v=2`; the fake takes
//! the same flags with the same syntax and errors, and maps the verbosity onto `tracing` levels
//! ([`Verbosity::filter`]): klog's `V(0)` messages are `info`, its `V(2)` ones `debug`, and at `--v=3`
//! one `HTTP` line per request (the `httplog` target, `crate::chain::http_log`) as upstream's
//! `httplog` writes at that level. `RUST_LOG`, when set, replaces the mapping.
//!
//! klog's own flags (`--logtostderr`, `--log-file`, ...) were removed from kube-apiserver in 1.26
//! (kubernetes/kubernetes#112120, KEP-2845), before the oldest version the fake emulates: it rejects
//! them as kube-apiserver does, naming the removal, rather than accept a command line the real server
//! refuses.

use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;

use crate::chain::http_log::TARGET as HTTP_LOG_TARGET;

/// The verbosity from which each request is logged (upstream: `klog.V(3).Enabled()` in
/// `httplog.WithLogging`).
pub const HTTP_LOG_VERBOSITY: u32 = 3;

/// The crates whose messages are "the fake's own", raised first as the verbosity grows.
const OWN_TARGETS: [&str; 3] = ["apiserver_fake", "mvp_core", "controller_manager"];

/// klog's flags that kube-apiserver no longer has (removed in 1.26): accepted by the parser only to be
/// refused with a pointer to the removal (see the module documentation).
pub const REMOVED_KLOG_FLAGS: [&str; 11] = [
    "add-dir-header",
    "alsologtostderr",
    "log-backtrace-at",
    "log-dir",
    "log-file",
    "log-file-max-size",
    "logtostderr",
    "one-output",
    "skip-headers",
    "skip-log-headers",
    "stderrthreshold",
];

/// The values `--logging-format` permits, in upstream's help order.
pub const LOGGING_FORMATS: [&str; 2] = ["json", "text"];

/// Logging flags of kube-apiserver (help texts are upstream's, the fake's mapping follows in
/// parentheses).
#[derive(Debug, Clone, Args)]
pub struct LoggingFlags {
    /// number for the log level verbosity. (The fake: 0–1 info, 2 debug, 3 debug and one `HTTP` line per
    /// request as kube-apiserver's httplog, 4–5 trace, 6 and more also its libraries' debug messages;
    /// `RUST_LOG` overrides.)
    #[arg(short = 'v', long = "v", value_name = "Level", default_value = "0")]
    pub verbosity: String,
    /// comma-separated list of pattern=N settings for file-filtered logging (only works for text log
    /// format). (Checked as upstream, otherwise inert: its patterns name Go source files.)
    #[arg(long, value_name = "pattern=N,...", default_value = "")]
    pub vmodule: String,
    /// Maximum number of seconds between log flushes. (Checked as upstream, otherwise inert: the fake
    /// writes every line unbuffered.)
    #[arg(long, value_name = "duration", default_value = "5s")]
    pub log_flush_frequency: String,
    /// Sets the log format. Permitted formats: "json", "text". (json: one JSON object per line, the
    /// fields of tracing's JSON formatter rather than klog's.)
    #[arg(long, default_value = "text")]
    pub logging_format: String,
    /// Removed klog flags, captured to be refused with a clear message.
    #[command(flatten)]
    pub removed: RemovedKlogFlags,
}

/// klog's flags removed from kube-apiserver in 1.26 (see [`REMOVED_KLOG_FLAGS`]); hidden from `--help`.
#[derive(Debug, Clone, Default, Args)]
pub struct RemovedKlogFlags {
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    add_dir_header: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    alsologtostderr: Option<String>,
    #[arg(long, hide = true)]
    log_backtrace_at: Option<String>,
    #[arg(long, hide = true)]
    log_dir: Option<String>,
    #[arg(long, hide = true)]
    log_file: Option<String>,
    #[arg(long, hide = true)]
    log_file_max_size: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    logtostderr: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    one_output: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    skip_headers: Option<String>,
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    skip_log_headers: Option<String>,
    #[arg(long, hide = true)]
    stderrthreshold: Option<String>,
}

impl RemovedKlogFlags {
    /// The first removed flag given, if any (names as in [`REMOVED_KLOG_FLAGS`]).
    fn first_given(&self) -> Option<&'static str> {
        let given = [
            self.add_dir_header.is_some(),
            self.alsologtostderr.is_some(),
            self.log_backtrace_at.is_some(),
            self.log_dir.is_some(),
            self.log_file.is_some(),
            self.log_file_max_size.is_some(),
            self.logtostderr.is_some(),
            self.one_output.is_some(),
            self.skip_headers.is_some(),
            self.skip_log_headers.is_some(),
            self.stderrthreshold.is_some(),
        ];
        REMOVED_KLOG_FLAGS
            .iter()
            .zip(given)
            .find_map(|(name, given)| given.then_some(*name))
    }
}

/// Why the logging flags were rejected: one line, pflag's or component-base's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoggingError {
    /// `-v` is not a verbosity (upstream: `VerbosityLevel.Set`, a `uint32` that must fit an `int32`).
    #[error("invalid argument {0:?} for \"-v, --v\" flag: strconv.ParseUint: parsing {0:?}: invalid syntax")]
    Verbosity(String),
    /// A `--vmodule` item is not `pattern=N` (upstream: `VModuleConfiguration.Set`).
    #[error("invalid argument {value:?} for \"--vmodule\" flag: {item:?} does not have the pattern=N format")]
    VModule {
        /// The whole flag value.
        value: String,
        /// The offending item.
        item: String,
    },
    /// `--log-flush-frequency` is not a Go duration.
    #[error("invalid argument {value:?} for \"--log-flush-frequency\" flag: {reason}")]
    FlushFrequency {
        /// The flag value.
        value: String,
        /// The duration parser's error.
        reason: String,
    },
    /// `--logging-format` names no registered format (upstream's `Validate`).
    #[error("format: Invalid value: {0:?}: Unsupported log format")]
    Format(String),
    /// `--vmodule` with a format other than text (upstream's `Validate`).
    #[error("vmodule: Forbidden: Only supported for text log format")]
    VModuleFormat,
    /// One of klog's flags that kube-apiserver removed in 1.26.
    #[error(
        "unknown flag: --{0} (klog's flags were removed from kube-apiserver in 1.26, kubernetes/kubernetes#112120)"
    )]
    RemovedKlogFlag(&'static str),
}

/// The output format of the logs (`--logging-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggingFormat {
    /// Human-readable lines (tracing's default formatter).
    Text,
    /// One JSON object per line.
    Json,
}

/// The checked logging flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggingOptions {
    /// `-v`.
    pub verbosity: Verbosity,
    /// `--logging-format`.
    pub format: LoggingFormat,
    /// `--log-flush-frequency` (inert: lines are written unbuffered).
    pub flush_frequency: Duration,
}

/// klog's verbosity level (`-v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Verbosity(pub u32);

impl Verbosity {
    /// The `tracing` filter directives this verbosity stands for, used when `RUST_LOG` is not set:
    /// the fake's own crates at info (0–1), debug (2–3) or trace (4+), its libraries at warn (debug from
    /// 6), and the `httplog` target from [`HTTP_LOG_VERBOSITY`].
    pub fn filter(self) -> String {
        let own = match self.0 {
            0 | 1 => "info",
            2 | 3 => "debug",
            _ => "trace",
        };
        let libraries = if self.0 >= 6 { "debug" } else { "warn" };
        let http = if self >= Verbosity(HTTP_LOG_VERBOSITY) {
            "info"
        } else {
            "off"
        };
        let mut directives = vec![libraries.to_owned()];
        directives.extend(OWN_TARGETS.iter().map(|target| format!("{target}={own}")));
        directives.push(format!("{HTTP_LOG_TARGET}={http}"));
        directives.join(",")
    }
}

impl LoggingFlags {
    /// Checks the flags as kube-apiserver does (pflag's parsing, then component-base's `Validate`).
    pub fn validate(&self) -> Result<LoggingOptions, LoggingError> {
        if let Some(flag) = self.removed.first_given() {
            return Err(LoggingError::RemovedKlogFlag(flag));
        }
        let verbosity = self
            .verbosity
            .parse::<u32>()
            .ok()
            .filter(|v| i32::try_from(*v).is_ok())
            .map(Verbosity)
            .ok_or_else(|| LoggingError::Verbosity(self.verbosity.clone()))?;
        for item in self.vmodule.split(',').filter(|item| !item.is_empty()) {
            let well_formed = match item.split_once('=') {
                Some((pattern, level)) => {
                    !pattern.is_empty()
                        && !level.contains('=')
                        && level.parse::<u32>().is_ok_and(|v| i32::try_from(v).is_ok())
                }
                None => false,
            };
            if !well_formed {
                return Err(LoggingError::VModule {
                    value: self.vmodule.clone(),
                    item: item.to_owned(),
                });
            }
        }
        let flush_frequency = crate::go_duration::parse_std(&self.log_flush_frequency)
            .map_err(|err| LoggingError::FlushFrequency {
                value: self.log_flush_frequency.clone(),
                reason: err.to_string(),
            })?
            .unwrap_or_default();
        let format = match self.logging_format.as_str() {
            "text" => LoggingFormat::Text,
            "json" => LoggingFormat::Json,
            other => return Err(LoggingError::Format(other.to_owned())),
        };
        if format != LoggingFormat::Text && !self.vmodule.is_empty() {
            return Err(LoggingError::VModuleFormat);
        }
        Ok(LoggingOptions {
            verbosity,
            format,
            flush_frequency,
        })
    }
}

/// Whether log lines on standard error may carry colour codes: only on a terminal, and never when
/// `NO_COLOR` is set to a non-empty value (<https://no-color.org>).
pub fn stderr_wants_colour() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// Installs the process's `tracing` subscriber, writing to standard error: `RUST_LOG` when set, else
/// `default_filter`; `format` as `--logging-format` asks; colour only where [`stderr_wants_colour`].
/// Returns quietly if a subscriber is already installed.
pub fn init(default_filter: &str, format: LoggingFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LoggingFormat::Text => builder.with_ansi(stderr_wants_colour()).try_init(),
        LoggingFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> LoggingFlags {
        use clap::Parser;
        #[derive(Debug, clap::Parser)]
        #[command(no_binary_name = true)]
        struct Only {
            #[command(flatten)]
            logging: LoggingFlags,
        }
        Only::try_parse_from(args).expect("parses").logging
    }

    #[test]
    fn verbosity_is_taken_in_every_spelling_pflag_accepts() {
        for args in [&["--v=2"][..], &["-v=2"], &["-v", "2"], &["--v", "2"], &["-v2"]] {
            assert_eq!(
                flags(args).validate().map(|o| o.verbosity),
                Ok(Verbosity(2)),
                "{args:?}"
            );
        }
        assert_eq!(flags(&[]).validate().map(|o| o.verbosity), Ok(Verbosity(0)));
    }

    #[test]
    fn bad_values_are_rejected_with_upstreams_wording() {
        assert_eq!(
            flags(&["--v=-1"]).validate().unwrap_err().to_string(),
            "invalid argument \"-1\" for \"-v, --v\" flag: strconv.ParseUint: parsing \"-1\": invalid syntax"
        );
        assert!(flags(&["--v=4294967295"]).validate().is_err());
        assert_eq!(
            flags(&["--vmodule=a=1,b"]).validate().unwrap_err(),
            LoggingError::VModule {
                value: "a=1,b".to_owned(),
                item: "b".to_owned()
            }
        );
        assert!(flags(&["--vmodule=a=1,b=2,"]).validate().is_ok());
        assert!(flags(&["--vmodule==1"]).validate().is_err());
        assert_eq!(
            flags(&["--logging-format=xml"])
                .validate()
                .unwrap_err()
                .to_string(),
            "format: Invalid value: \"xml\": Unsupported log format"
        );
        assert_eq!(
            flags(&["--logging-format=json", "--vmodule=a=1"])
                .validate()
                .unwrap_err(),
            LoggingError::VModuleFormat
        );
        assert!(flags(&["--log-flush-frequency=often"]).validate().is_err());
    }

    #[test]
    fn removed_klog_flags_are_refused_by_name() {
        for (args, name) in [
            (&["--logtostderr"][..], "logtostderr"),
            (&["--logtostderr=false"], "logtostderr"),
            (&["--log-file", "/var/log/a.log"], "log-file"),
            (&["--stderrthreshold=2"], "stderrthreshold"),
        ] {
            assert_eq!(
                flags(args).validate().unwrap_err(),
                LoggingError::RemovedKlogFlag(name)
            );
        }
    }

    #[test]
    fn verbosity_maps_to_tracing_levels() {
        assert_eq!(
            Verbosity(0).filter(),
            "warn,apiserver_fake=info,mvp_core=info,controller_manager=info,httplog=off"
        );
        assert!(Verbosity(2).filter().contains("apiserver_fake=debug"));
        assert!(Verbosity(2).filter().ends_with("httplog=off"));
        assert!(Verbosity(3).filter().ends_with("httplog=info"));
        assert!(Verbosity(4).filter().contains("mvp_core=trace"));
        assert!(Verbosity(6).filter().starts_with("debug,"));
        for v in [0, 1, 2, 3, 4, 6, 10] {
            assert!(
                tracing_subscriber::EnvFilter::try_new(Verbosity(v).filter()).is_ok(),
                "v={v}"
            );
        }
    }
}
