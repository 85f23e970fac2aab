//! YAML request bodies, response bodies and files, on serde-saphyr: a maintained, panic-free parser
//! whose work is bounded by a budget, so a hostile body costs time linear in its size.
//!
//! kube-apiserver converts YAML to JSON (sigs.k8s.io/yaml) and decodes that; the fake does the same in
//! one step. Documents nested deeper than [`MAX_DEPTH`] are refused before any value is built, with
//! the same depth bound as JSON bodies (serde_json's), so both encodings accept the same objects.
//! The parser recurses once per level with large frames in unoptimised builds, more than a 2 MiB
//! Tokio worker stack holds at that depth, so decoding runs on a stack segment of its own
//! (`DECODE_STACK`, via stacker).

use serde_json::Value;

/// The deepest nesting of mappings and sequences a YAML document may have (JSON bodies may nest
/// 10,000 levels, as upstream's: `rest::negotiation::MAX_JSON_DEPTH`).
pub const MAX_DEPTH: usize = 128;

/// The stack decoding gets, whatever thread it runs on.
const DECODE_STACK: usize = 32 * 1024 * 1024;

/// Why YAML could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(String);

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
        },
    }
}

/// One YAML document as JSON.
pub fn decode(bytes: &[u8]) -> Result<Value, YamlError> {
    stacker::grow(DECODE_STACK, || {
        serde_saphyr::from_slice_with_options(bytes, options())
            .map_err(|e| YamlError(one_line(&e.to_string())))
    })
}

/// Every document of a YAML stream (`---` separated), as JSON.
pub fn decode_stream(text: &str) -> Result<Vec<Value>, YamlError> {
    stacker::grow(DECODE_STACK, || {
        serde_saphyr::from_multiple_with_options(text, options())
            .map_err(|e| YamlError(one_line(&e.to_string())))
    })
}

/// `value` as YAML (response bodies).
pub fn encode(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_default()
}

/// Error texts may carry a snippet of the input over several lines; a Status message is one line.
fn one_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;

    #[test]
    fn documents_and_streams_decode_to_json() {
        let value =
            decode(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  n: \"1\"\n").unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"n": "1"}})
        );
        let stream = decode_stream("a: 1\n---\nb: [x, z]\n").unwrap();
        assert_eq!(stream, vec![json!({"a": 1}), json!({"b": ["x", "z"]})]);
        assert_eq!(decode(encode(&value).as_bytes()).unwrap(), value);
    }

    #[test]
    fn deep_nesting_is_refused_fast_at_any_size() {
        for depth in [MAX_DEPTH + 1, 20_000, 200_000] {
            let flow = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let block: String = (0..depth.min(20_000))
                .map(|i| format!("{}a:\n", " ".repeat(i)))
                .collect();
            for body in [flow, block] {
                let start = Instant::now();
                let err = decode(body.as_bytes()).unwrap_err();
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "depth {depth} took {:?}",
                    start.elapsed()
                );
                assert!(!err.to_string().contains('\n'), "{err}");
            }
        }
        let fine: String = (0..MAX_DEPTH - 1)
            .map(|i| format!("{}a:\n", " ".repeat(i)))
            .collect();
        assert!(decode(format!("{fine}{}x: 1\n", " ".repeat(MAX_DEPTH - 1)).as_bytes()).is_ok());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for body in [
            &b"a: [b"[..],
            b"\xff\xfe",
            b"key: value\n  bad indent: x\n",
            b"*alias",
        ] {
            let _ = decode(body);
        }
    }
}
