//! The behaviour matrix (`docs/behaviours.md`) and the test suite must not drift apart.

use std::collections::BTreeSet;
use std::path::Path;

struct Row {
    id: String,
    test: String,
    snapshots: Vec<String>,
}

fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

fn matrix(root: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(root.join("docs/behaviours.md")).unwrap();
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| # ") && !l.starts_with("|---"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert!(cells.len() >= 6, "malformed matrix row: {line}");
            let test = code_spans(cells[3]);
            assert_eq!(test.len(), 1, "one test per row: {line}");
            Row {
                id: cells[0].to_owned(),
                test: test[0].clone(),
                snapshots: code_spans(cells[4]),
            }
        })
        .collect()
}

/// `file::function` of every test function in `tests/*.rs`.
fn tests(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let file = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut attributed = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[tokio::test") || line == "#[test]" {
                attributed = true;
            } else if attributed && (line.starts_with("async fn ") || line.starts_with("fn ")) {
                let name = line.trim_start_matches("async ").trim_start_matches("fn ");
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(format!("{file}::{name}"));
                attributed = false;
            }
        }
    }
    out
}

#[test]
fn matrix_matches_tests_and_snapshots() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rows = matrix(root);
    // Every checklist item has a row.
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let missing: Vec<u32> = (1..=50)
        .filter(|n| !ids.contains(n.to_string().as_str()))
        .collect();
    assert!(missing.is_empty(), "checklist items without a row: {missing:?}");
    // Rows name existing tests, and every test has a row.
    let in_matrix: BTreeSet<String> = rows.iter().map(|r| r.test.clone()).collect();
    let actual = tests(root);
    let unknown: Vec<&String> = in_matrix.difference(&actual).collect();
    assert!(
        unknown.is_empty(),
        "matrix names tests that do not exist: {unknown:#?}"
    );
    let unlisted: Vec<&String> = actual.difference(&in_matrix).collect();
    assert!(
        unlisted.is_empty(),
        "tests missing from docs/behaviours.md: {unlisted:#?}"
    );
    // Snapshots named exist (and belong to the row's test file), and every snapshot file is listed.
    let listed: BTreeSet<String> = rows.iter().flat_map(|r| r.snapshots.iter().cloned()).collect();
    for row in &rows {
        let file = row.test.split("::").next().unwrap();
        for snapshot in &row.snapshots {
            assert!(
                snapshot.starts_with(&format!("{file}__")),
                "{snapshot} is not a snapshot of {file}.rs"
            );
            let path = root.join("tests/snapshots").join(format!("{snapshot}.snap"));
            assert!(
                path.exists(),
                "row {} names a missing snapshot {}",
                row.id,
                path.display()
            );
        }
    }
    let files: BTreeSet<String> = std::fs::read_dir(root.join("tests/snapshots"))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".snap")
                .map(str::to_owned)
        })
        .collect();
    let orphans: Vec<&String> = files.difference(&listed).collect();
    assert!(
        orphans.is_empty(),
        "snapshots not in docs/behaviours.md: {orphans:#?}"
    );
}
