//! YAML request bodies, response bodies and files, on serde-saphyr: a maintained, panic-free parser
//! whose work is bounded by a budget, so a hostile body costs time linear in its size.
//!
//! kube-apiserver converts YAML to JSON (sigs.k8s.io/yaml, on go-yaml v2) and decodes that; the fake
//! does the same in one step. go-yaml's scanner refuses nesting deeper than 10,000 levels
//! (`max_flow_level`, `max_indents`), the same depth JSON bodies may have, and so does this module
//! ([`MAX_DEPTH`]), with go-yaml's words (`yaml: line 3: exceeded max depth of 10000`), before any
//! value is built. A caller whose stack cannot take a value that deep asks for less
//! ([`decode_with_max_depth`]).
//! The parser recurses once per level with large frames in unoptimised builds, more than a Tokio
//! worker stack holds at that depth, so decoding runs on a stack segment of its own, sized for the
//! document (`decode_stack`, via stacker).

use serde_json::Value;

/// The deepest nesting of mappings and sequences a YAML document may have: go-yaml v2's
/// `max_flow_level` and `max_indents` (JSON bodies may nest as deep: `rest::negotiation::MAX_JSON_DEPTH`).
pub const MAX_DEPTH: usize = 10_000;

/// Stack the parser needs per level of nesting, with room to spare (unoptimised builds: 16 KiB per level
/// is not enough there, 32 KiB is).
const DECODE_STACK_PER_LEVEL: usize = 32 * 1024;

/// The stack decoding gets beyond what its depth needs, whatever thread it runs on.
const DECODE_STACK_BASE: usize = 16 << 20;

/// The stack decoding `bytes` to at most `max_depth` levels gets (reserved address space; only what the
/// document's depth touches is committed): sized by an upper bound of the document's nesting, the
/// number of characters that can open a collection (`[`, `{`, `:`, `-`), so a small manifest does not
/// reserve what 10,000 levels need. Aliases cannot nest deeper than the text: an alias names a
/// collection that was complete before it.
fn decode_stack(bytes: &[u8], max_depth: usize) -> usize {
    let bound = bytes
        .iter()
        .filter(|b| matches!(b, b'[' | b'{' | b':' | b'-'))
        .count()
        .saturating_add(1)
        .min(max_depth.saturating_add(1));
    bound * DECODE_STACK_PER_LEVEL + DECODE_STACK_BASE
}

/// Why YAML could not be read.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// Nested deeper than [`MAX_DEPTH`], in go-yaml's words (`line N: ` when not on the first line).
    #[error("{}exceeded max depth of {MAX_DEPTH}", line_prefix(*.line))]
    TooDeep {
        /// The 1-based line where the limit was passed.
        line: u64,
    },
    /// Nested deeper than the caller's stack can take (an in-process server on a small stack).
    #[error("exceeded max depth for this server's stack ({0} levels)")]
    TooDeepForStack(usize),
    /// Not YAML, or not what was asked for: the parser's message, on one line.
    #[error("{0}")]
    Syntax(String),
}

/// go-yaml's location prefix: none for the first line (its 0-based line is 0 there).
fn line_prefix(line: u64) -> String {
    if line > 1 {
        format!("line {line}: ")
    } else {
        String::new()
    }
}

fn options(max_depth: usize) -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: max_depth,
            // The parser's own cap on flow collections (255 by default) is raised past `max_depth`; its
            // scanner reads ahead of the budget's count, so either may see the excess first.
            flow_nesting_limit: max_depth.saturating_mul(2).max(max_depth + 1),
        },
    }
}

fn error(err: &serde_saphyr::Error, max_depth: usize) -> YamlError {
    if let serde_saphyr::Error::Budget {
        breach: serde_saphyr::budget::BudgetBreach::Depth { .. },
        location,
    } = err.without_snippet()
    {
        return if max_depth >= MAX_DEPTH {
            YamlError::TooDeep {
                line: location.line(),
            }
        } else {
            YamlError::TooDeepForStack(max_depth)
        };
    }
    let text = one_line(&err.to_string());
    if text.contains("recursion limit exceeded") {
        // The parser's nesting cap (see `options`): the same excess, found by its scanner.
        let line = err.location().map_or(1, |l| l.line());
        return if max_depth >= MAX_DEPTH {
            YamlError::TooDeep { line }
        } else {
            YamlError::TooDeepForStack(max_depth)
        };
    }
    YamlError::Syntax(text)
}

/// One YAML document as JSON.
pub fn decode(bytes: &[u8]) -> Result<Value, YamlError> {
    decode_with_max_depth(bytes, MAX_DEPTH)
}

/// One YAML document as JSON, refusing documents nested deeper than `max_depth` (at most
/// [`MAX_DEPTH`]; less is [`YamlError::TooDeepForStack`]).
pub fn decode_with_max_depth(bytes: &[u8], max_depth: usize) -> Result<Value, YamlError> {
    let max_depth = max_depth.min(MAX_DEPTH);
    stacker::grow(decode_stack(bytes, max_depth), || {
        serde_saphyr::from_slice_with_options(bytes, options(max_depth)).map_err(|e| error(&e, max_depth))
    })
}

/// Every document of a YAML stream (`---` separated), as JSON.
pub fn decode_stream(text: &str) -> Result<Vec<Value>, YamlError> {
    stacker::grow(decode_stack(text.as_bytes(), MAX_DEPTH), || {
        serde_saphyr::from_multiple_with_options(text, options(MAX_DEPTH)).map_err(|e| error(&e, MAX_DEPTH))
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
            // Block nesting as deep costs a quadratic body (indentation); 100 block levels, then flow.
            let block: String = (0..100).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
            let mixed = format!(
                "{block}{}{}{}",
                " ".repeat(100),
                "[".repeat(depth - 100),
                "]".repeat(depth - 100)
            );
            for (body, line) in [(flow, 1), (mixed, 101)] {
                let start = Instant::now();
                let err = decode(body.as_bytes()).unwrap_err();
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "depth {depth} took {:?}",
                    start.elapsed()
                );
                assert!(!err.to_string().contains('\n'), "{err}");
                assert!(
                    matches!(err, YamlError::TooDeep { line: l } if l == line),
                    "depth {depth}: {err:?}"
                );
            }
        }
        let fine: String = (0..127).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
        assert!(decode(format!("{fine}{}x: 1\n", " ".repeat(127)).as_bytes()).is_ok());
    }

    #[test]
    fn too_deep_is_refused_in_go_yamls_words() {
        let flow = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            decode(flow.as_bytes()).unwrap_err().to_string(),
            "exceeded max depth of 10000"
        );
        let flow = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        // Dropping a value that deep recurses as deep: on a stack of the binary's workers' size.
        let decoded = std::thread::Builder::new()
            .stack_size(crate::api::rest::negotiation::DEEP_BODY_STACK_BYTES)
            .spawn(move || decode(flow.as_bytes()).is_ok())
            .expect("thread")
            .join()
            .expect("decoded");
        assert!(decoded, "10,000 levels are accepted");
        let shallow = decode_with_max_depth(b"a: [[[1]]]", 2).unwrap_err();
        assert!(matches!(shallow, YamlError::TooDeepForStack(2)), "{shallow}");
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
