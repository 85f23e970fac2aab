//! Go's `time.ParseDuration`, ported: kube-apiserver reads every duration it is given (`--request-timeout`,
//! `?timeout=`, `metav1.Duration` fields) with it, so the fake accepts exactly what it accepts (`1h30m`,
//! `.5s`, `-2m3.4s`, `12µs` and `12μs`), refuses the rest with its words, and never panics.
//!
//! Ported from Go 1.24's `src/time/format.go` (`ParseDuration`, `leadingInt`, `leadingFraction`,
//! `quote`), including its float arithmetic for fractions, so that results are equal to the nanosecond.
//! Go's own test table is the test below. Go's `quote` escapes invalid UTF-8 byte by byte; a Rust string
//! holds none, and non-ASCII characters are escaped as Go escapes them (every byte as `\xNN`).

use std::fmt::Write as _;

/// Why a duration was refused; the message is Go's (`time: invalid duration "abc"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoDurationError {
    /// Malformed, or beyond ±2⁶³ nanoseconds.
    #[error("time: invalid duration {}", quote(.0))]
    Invalid(String),
    /// A number without a unit (`5`).
    #[error("time: missing unit in duration {}", quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know (`1d`).
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.input))]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
}

const NANOS: u64 = 1;
const MICROS: u64 = 1_000;
const MILLIS: u64 = 1_000_000;
const SECONDS: u64 = 1_000_000_000;

fn unit(name: &str) -> Option<u64> {
    Some(match name {
        "ns" => NANOS,
        // "us", U+00B5 (micro sign) and U+03BC (Greek mu), as Go's unitMap.
        "us" | "\u{b5}s" | "\u{3bc}s" => MICROS,
        "ms" => MILLIS,
        "s" => SECONDS,
        "m" => 60 * SECONDS,
        "h" => 3600 * SECONDS,
        _ => return None,
    })
}

const LIMIT: u64 = 1 << 63;

/// Parses `text` as Go's `time.ParseDuration` does, into nanoseconds (a Go `time.Duration`).
pub fn parse(text: &str) -> Result<i64, GoDurationError> {
    let invalid = || GoDurationError::Invalid(text.to_owned());
    let mut s = text.as_bytes();
    let mut negative = false;
    if let Some(&sign @ (b'-' | b'+')) = s.first() {
        negative = sign == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        // The next character must be [0-9.].
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // [0-9]*
        let before = s.len();
        let (mut value, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();
        // (\.[0-9]*)?
        let (mut fraction, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before = s.len();
            let (f, sc, rest) = leading_fraction(s);
            (fraction, scale, s) = (f, sc, rest);
            post = before != s.len();
        }
        if !pre && !post {
            return Err(invalid());
        }
        // The unit: everything up to the next [0-9.].
        let end = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if end == 0 {
            return Err(GoDurationError::MissingUnit(text.to_owned()));
        }
        let name = String::from_utf8_lossy(&s[..end]).into_owned();
        s = &s[end..];
        let Some(unit) = unit(&name) else {
            return Err(GoDurationError::UnknownUnit {
                unit: name,
                input: text.to_owned(),
            });
        };
        if value > LIMIT / unit {
            return Err(invalid());
        }
        value *= unit;
        if fraction > 0 {
            // Go: v += uint64(float64(f) * (float64(unit) / scale)), a saturating float conversion.
            value = value.saturating_add((fraction as f64 * (unit as f64 / scale)) as u64);
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // -2⁶³ is the one value whose magnitude is not an i64.
        return Ok(if total == LIMIT { i64::MIN } else { -(total as i64) });
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// [`parse`] as a std `Duration`; `None` for a negative one.
pub fn parse_std(text: &str) -> Result<Option<std::time::Duration>, GoDurationError> {
    parse(text).map(|nanos| u64::try_from(nanos).ok().map(std::time::Duration::from_nanos))
}

/// Go's `leadingInt`: the leading digits and the rest; `None` on overflow.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > LIMIT {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// Go's `leadingFraction`: the leading digits as an integer, the power of ten they were scaled by, and
/// the rest; digits past what a u64 holds are consumed and ignored.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > (LIMIT - 1) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > LIMIT {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, &s[i..])
}

/// Go's `time.quote`: in double quotes, `"` and `\` escaped, control and non-ASCII characters as
/// `\xNN` per byte.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if !(' '..'\u{80}').contains(&c) {
            let mut bytes = [0u8; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                let _ = write!(out, "\\x{byte:02x}");
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// Go's `parseDurationTests` (src/time/time_test.go).
    #[test]
    fn gos_table_parses_to_the_nanosecond() {
        let table: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000 * NS),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827 * NS),
        ];
        for (input, want) in table {
            assert_eq!(parse(input), Ok(*want), "{input}");
        }
    }

    /// Go's `parseDurationErrorTests` (those a Rust string can hold: valid UTF-8): the error names the
    /// input quoted as Go quotes it.
    #[test]
    fn gos_error_table_is_refused_with_its_quoting() {
        let table: &[(&str, &str)] = &[
            ("", r#""""#),
            ("3", r#""3""#),
            ("-", r#""-""#),
            ("s", r#""s""#),
            (".", r#"".""#),
            ("-.", r#""-.""#),
            (".s", r#"".s""#),
            ("+.s", r#""+.s""#),
            ("1d", r#""1d""#),
            ("\u{fffd}", r#""\xef\xbf\xbd""#),
            (
                "\u{fffd} hello \u{fffd} world",
                r#""\xef\xbf\xbd hello \xef\xbf\xbd world""#,
            ),
            ("9223372036854775810ns", r#""9223372036854775810ns""#),
            ("9223372036854775808ns", r#""9223372036854775808ns""#),
            ("-9223372036854775809ns", r#""-9223372036854775809ns""#),
            ("9223372036854776us", r#""9223372036854776us""#),
            ("3000000h", r#""3000000h""#),
            ("9223372036854775.808us", r#""9223372036854775.808us""#),
            ("9223372036854ms775us808ns", r#""9223372036854ms775us808ns""#),
        ];
        for (input, quoted) in table {
            let err = parse(input).expect_err(input).to_string();
            assert!(err.contains(quoted), "{input}: {err}");
        }
    }

    #[test]
    fn messages_are_gos() {
        assert_eq!(
            parse("abc").unwrap_err().to_string(),
            r#"time: invalid duration "abc""#
        );
        assert_eq!(
            parse("5").unwrap_err().to_string(),
            r#"time: missing unit in duration "5""#
        );
        assert_eq!(
            parse("1d").unwrap_err().to_string(),
            r#"time: unknown unit "d" in duration "1d""#
        );
        assert_eq!(
            parse("1\u{e9}").unwrap_err().to_string(),
            r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#
        );
        assert_eq!(
            parse_std("1\u{b5}s"),
            Ok(Some(std::time::Duration::from_micros(1)))
        );
        assert_eq!(parse_std("-1s"), Ok(None));
    }
}
