//! Everyday kubectl as the README shows it, driven from outside: the built binary's `cluster` demo and
//! `kubectl` with `docs/examples/job.yaml` — apply (created, then unchanged), diff after an edit,
//! server-side apply reporting the conflict with the client-side applier, `--force-conflicts`,
//! `kubectl scale`, and `explain` — through `a`, which lacks `batch/v1` and proxies every Job request to `b`.

mod support;

use std::path::Path;

use support::demo::Demo;
use support::{kubectl, kubectl_available};

#[test]
fn readme_kubectl_workflow_against_the_demo() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Demo::start(dir.path(), &[]);
    let manifest = demo.wait_for_manifest(dir.path());
    let kubeconfig = |name: &str| support::demo::kubeconfig(&manifest, name);
    let (a, b) = (kubeconfig("a"), kubeconfig("b"));
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/job.yaml");
    let original = std::fs::read_to_string(&example).expect("docs/examples/job.yaml");
    let job = example.to_string_lossy().into_owned();
    let edited = dir.path().join("job.yaml");
    std::fs::write(&edited, original.replace("backoffLimit: 4", "backoffLimit: 5"))
        .expect("write the edited manifest");
    let edited = edited.to_string_lossy().into_owned();

    assert_eq!(kubectl(&a, &["apply", "-f", &job]).1, "job.batch/pi created\n");
    assert_eq!(kubectl(&a, &["apply", "-f", &job]).1, "job.batch/pi unchanged\n");
    let (same, diff, _) = kubectl(&a, &["diff", "-f", &edited]);
    assert!(!same, "diff exits 1 on a difference");
    assert!(diff.lines().any(|l| l == "+  backoffLimit: 5"), "{diff}");

    let (applied, _, conflict) = kubectl(&a, &["apply", "--server-side", "-f", &edited]);
    assert!(!applied);
    assert!(
        conflict.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using batch/v1 at "
        ),
        "{conflict}"
    );
    let (forced, out, err) = kubectl(
        &a,
        &["apply", "--server-side", "--force-conflicts", "-f", &edited],
    );
    assert!(forced, "{err}");
    assert_eq!(out, "job.batch/pi serverside-applied\n");

    let (created, _, err) = kubectl(
        &a,
        &["create", "deployment", "web", "--image=nginx", "--replicas=2"],
    );
    assert!(created, "{err}");
    let (scaled, out, err) = kubectl(&a, &["scale", "deployment", "web", "--replicas=3"]);
    assert!(scaled, "{err}");
    assert_eq!(out, "deployment.apps/web scaled\n");
    let replicas = kubectl(
        &a,
        &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"],
    )
    .1;
    assert_eq!(replicas, "3");

    // b serves batch/v1, so its OpenAPI describes Jobs.
    let (explained, out, err) = kubectl(&b, &["explain", "jobs.spec.template"]);
    assert!(explained, "{err}");
    assert!(out.contains("FIELD: template <PodTemplateSpec>"), "{out}");
}
