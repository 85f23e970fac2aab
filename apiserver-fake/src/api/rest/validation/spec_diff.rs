//! The diff kube-apiserver appends to its "may not change" errors (a Pod's spec, a
//! PersistentVolumeClaim's spec): from 1.34 `diff.Diff` of apimachinery's `util/diff`, a unified diff
//! (three lines of context, no file headers, go-difflib's hunk ranges) of the two values marshalled
//! as JSON indented by one space. Before 1.34 upstream prints go-cmp's `cmp.Diff` of the internal Go
//! structs instead, which the fake does not reproduce: it prints this diff at every minor.
//!
//! Deviations, all in the lines after the error's first line: the fake marshals the v1 JSON object it
//! stores (its field names and order, fields left out when unset) where upstream marshals the
//! internal Go struct (Go field names in declaration order, every field, `null` for unset pointers);
//! and the lines are aligned by a longest common subsequence, where go-difflib's `SequenceMatcher`
//! may pair repeated lines (`},`) differently.

use serde::Serialize;
use serde_json::Value;

/// The number of unchanged lines shown around each change (`difflib.UnifiedDiff.Context`).
const CONTEXT: usize = 3;

/// The unified diff from `old` to `new` (empty when they marshal the same).
pub(crate) fn json_diff(old: &Value, new: &Value) -> String {
    let (a, b) = (pretty(old), pretty(new));
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let ops = opcodes(&a, &b);
    let mut out = String::new();
    for group in grouped(&ops) {
        let (first, last) = (group[0], group[group.len() - 1]);
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(first.1, last.2),
            range(first.3, last.4)
        ));
        for &(tag, i1, i2, j1, j2) in &group {
            if tag == Tag::Equal {
                a[i1..i2].iter().for_each(|l| out.push_str(&format!(" {l}\n")));
                continue;
            }
            a[i1..i2].iter().for_each(|l| out.push_str(&format!("-{l}\n")));
            b[j1..j2].iter().for_each(|l| out.push_str(&format!("+{l}\n")));
        }
    }
    out
}

/// `json.MarshalIndent(v, "", " ")`.
fn pretty(value: &Value) -> String {
    let mut buffer = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut buffer, formatter);
    if value.serialize(&mut serializer).is_err() {
        return String::new();
    }
    String::from_utf8(buffer).unwrap_or_default()
}

/// go-difflib's `formatRangeUnified`: 1-based start, the length unless it is 1.
fn range(start: usize, stop: usize) -> String {
    match stop - start {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        length => format!("{},{length}", start + 1),
    }
}

/// What an opcode does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// Lines in both.
    Equal,
    /// Lines of `a` replaced by (possibly no) lines of `b`, or lines only in `b`.
    Change,
}

/// `(tag, i1, i2, j1, j2)`: `a[i1..i2]` against `b[j1..j2]`.
type Opcode = (Tag, usize, usize, usize, usize);

/// The opcodes of a longest-common-subsequence alignment of `a` and `b`.
fn opcodes(a: &[&str], b: &[&str]) -> Vec<Opcode> {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the LCS length of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<Opcode> = Vec::new();
    let push =
        |ops: &mut Vec<Opcode>, tag: Tag, i: usize, j: usize, di: usize, dj: usize| match ops.last_mut() {
            Some(last) if last.0 == tag => {
                last.2 += di;
                last.4 += dj;
            }
            _ => ops.push((tag, i, i + di, j, j + dj)),
        };
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            push(&mut ops, Tag::Equal, i, j, 1, 1);
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            push(&mut ops, Tag::Change, i, j, 0, 1);
            j += 1;
        } else {
            push(&mut ops, Tag::Change, i, j, 1, 0);
            i += 1;
        }
    }
    ops
}

/// `GetGroupedOpCodes(CONTEXT)`: the changes with up to three equal lines around them, split where
/// more than six equal lines separate two changes.
fn grouped(ops: &[Opcode]) -> Vec<Vec<Opcode>> {
    if !ops.iter().any(|op| op.0 == Tag::Change) {
        return Vec::new();
    }
    let mut ops = ops.to_vec();
    if let Some(first) = ops.first_mut()
        && first.0 == Tag::Equal
    {
        first.1 = first.1.max(first.2.saturating_sub(CONTEXT));
        first.3 = first.3.max(first.4.saturating_sub(CONTEXT));
    }
    if let Some(last) = ops.last_mut()
        && last.0 == Tag::Equal
    {
        last.2 = last.2.min(last.1 + CONTEXT);
        last.4 = last.4.min(last.3 + CONTEXT);
    }
    let mut groups = Vec::new();
    let mut group = Vec::new();
    for (tag, i1, i2, j1, j2) in ops {
        let (mut i1, mut j1) = (i1, j1);
        if tag == Tag::Equal && i2 - i1 > 2 * CONTEXT {
            group.push((tag, i1, i1 + CONTEXT, j1, j1 + CONTEXT));
            groups.push(std::mem::take(&mut group));
            i1 = i1.max(i2 - CONTEXT);
            j1 = j1.max(j2 - CONTEXT);
        }
        group.push((tag, i1, i2, j1, j2));
    }
    if !(group.len() == 1 && group[0].0 == Tag::Equal) {
        groups.push(group);
    }
    groups
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_changed_access_mode_diffs_as_upstream_prints_it() {
        let old = json!({"AccessModes": ["ReadWriteMany"], "Selector": null, "Resources": {"Limits": null}});
        let new = json!({"AccessModes": ["ReadWriteOnce"], "Selector": null, "Resources": {"Limits": null}});
        assert_eq!(
            json_diff(&old, &new),
            "@@ -1,6 +1,6 @@\n {\n  \"AccessModes\": [\n-  \"ReadWriteMany\"\n+  \"ReadWriteOnce\"\n  ],\n  \
             \"Selector\": null,\n  \"Resources\": {\n"
        );
        assert_eq!(json_diff(&old, &old), "");
    }

    #[test]
    fn distant_changes_make_two_hunks() {
        let keys: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
        let old: serde_json::Map<String, Value> = keys.iter().map(|k| (k.clone(), json!(1))).collect();
        let mut new = old.clone();
        new.insert("k01".into(), json!(2));
        new.insert("k18".into(), json!(2));
        let diff = json_diff(&Value::Object(old), &Value::Object(new));
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.starts_with("@@ -1,6 +1,6 @@\n {\n  \"k00\": 1,\n- \"k01\": 1,\n+ \"k01\": 2,\n"));
    }
}
