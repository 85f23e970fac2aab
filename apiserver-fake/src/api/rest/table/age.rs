//! Ages and durations as the printers show them: apimachinery's `duration.HumanDuration` (`5s`,
//! `3m20s`, `2d`) and printers.go's `translateTimestampSince`, over the RFC 3339 timestamps objects
//! carry (`metav1.Time`, and `metav1.MicroTime` with its fraction).
//!
//! "Now" is always passed in, so the same object prints the same cells in tests.

use time::OffsetDateTime;

/// What `translateTimestampSince` prints for a zero (absent) timestamp.
pub(crate) const UNKNOWN: &str = "<unknown>";

/// Parses an RFC 3339 timestamp (`2024-01-02T03:04:05Z`, `...05.123456Z`, `...05+02:00`); `None`
/// when it is not one.
pub(crate) fn parse_timestamp(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// `duration.HumanDuration`: a duration with two to three significant figures (`45s`, `3m20s`,
/// `25m`, `5h3m`, `20h`, `3d4h`, `30d`, `2y10d`, `9y`); `0s` for up to a second in the future (clock
/// skew), `<invalid>` further.
pub(crate) fn human_duration(duration: time::Duration) -> String {
    let seconds = duration.whole_seconds();
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince` (and `translateMicroTimestampSince`): how long ago `timestamp` was,
/// `<unknown>` when it is absent or not a timestamp.
pub(crate) fn since(timestamp: Option<&str>, now: OffsetDateTime) -> String {
    match timestamp.filter(|t| !t.is_empty()).and_then(parse_timestamp) {
        Some(then) => human_duration(now - then),
        None => UNKNOWN.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> OffsetDateTime {
        parse_timestamp(text).unwrap()
    }

    #[test]
    fn parses_rfc3339_with_fractions_and_offsets() {
        let utc = at("2024-03-01T10:20:30Z");
        assert_eq!(utc.unix_timestamp(), 1_709_288_430);
        assert_eq!(
            at("2024-03-01T10:20:30.250000Z") - utc,
            time::Duration::milliseconds(250)
        );
        assert_eq!(at("2024-03-01T12:20:30+02:00"), utc);
        for bad in [
            "",
            "2024-03-01",
            "2024-13-01T00:00:00Z",
            "2024-03-01T10:20:30",
            "x024-03-01T10:20:30Z",
        ] {
            assert!(parse_timestamp(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn human_durations_match_apimachinery() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 3 * 60, "5h3m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (740 * 86400, "2y10d"),
            (8 * 365 * 86400, "8y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(
                human_duration(time::Duration::seconds(seconds)),
                expected,
                "{seconds}s"
            );
        }
    }

    #[test]
    fn since_is_unknown_without_a_timestamp() {
        let now = at("2024-03-01T10:20:30Z");
        assert_eq!(since(Some("2024-03-01T10:17:10Z"), now), "3m20s");
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(since(Some(""), now), "<unknown>");
    }
}
