//! Go durations (`--request-timeout`, `?timeout=`, `metav1.Duration` fields): any text parses or is an
//! error in Go's words, never a panic; what parses is within an i64 of nanoseconds, and a positive
//! duration prints back (as whole nanoseconds) to the same value.
#![no_main]

use apiserver_fake::go_duration;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match go_duration::parse(text) {
        Ok(nanos) if nanos >= 0 => assert_eq!(go_duration::parse(&format!("{nanos}ns")), Ok(nanos)),
        Ok(_) => {}
        Err(err) => assert!(err.to_string().starts_with("time: "), "{err}"),
    }
});
