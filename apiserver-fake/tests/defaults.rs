//! Defaulting and create/update strategies through a real server (TLS, routing, the store): what a
//! client reads back after creating a minimal object.

mod support;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use support::{TestClient, cluster, member};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const SERVICES: &str = "/api/v1/namespaces/default/services";

/// The Job of the Kubernetes docs (`kubectl apply -f https://kubernetes.io/examples/controllers/job.yaml`).
const MINIMAL_JOB: &str = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"pi"},
  "spec":{"template":{"spec":{"restartPolicy":"Never",
  "containers":[{"name":"pi","image":"perl:5.34.0","command":["perl","-Mbignum=bpi","-wle","print bpi(2000)"]}]}}}}"#;

async fn put(client: &TestClient, path: &str, body: &Value) -> support::Reply {
    let body = body.to_string();
    client
        .send(
            Method::PUT,
            path,
            &[("content-type", "application/json")],
            Some(&body),
        )
        .await
}

/// What a 1.36 kube-apiserver returns for [`MINIMAL_JOB`] (status aside, which the Job controller
/// fills in later on a real cluster), field by field from upstream:
/// - `parallelism: 1`, `completions: 1`, `backoffLimit: 6`, `completionMode: NonIndexed`,
///   `suspend: false`, `podReplacementPolicy: TerminatingOrFailed` (JobPodReplacementPolicy, GA 1.34),
///   `manualSelector: false`: `SetDefaults_Job` (pkg/apis/batch/v1/defaults.go);
/// - `selector.matchLabels` and the four template labels: `generateSelector`, from the Job strategy's
///   `PrepareForCreate` (pkg/registry/batch/job/strategy.go);
/// - `metadata.labels`: `SetDefaults_Job` copies the template's labels to a Job without labels, when the
///   stored Job is read back (decoding defaults it again);
/// - `dnsPolicy`, `schedulerName`, `securityContext`, `terminationGracePeriodSeconds`:
///   `SetDefaults_PodSpec`; `imagePullPolicy`, `terminationMessagePath`, `terminationMessagePolicy`:
///   `SetDefaults_Container`; `resources: {}`: the struct's serialization;
/// - `status: {}` and `generation: 1`: the strategy's `PrepareForCreate`.
fn expected_job_spec(uid: &str) -> (Value, Value) {
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid,
        "job-name": "pi",
    });
    let spec = json!({
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "completions": 1,
        "manualSelector": false,
        "parallelism": 1,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        "suspend": false,
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "containers": [{
                    "command": ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"],
                    "image": "perl:5.34.0",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "pi",
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }],
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Never",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "terminationGracePeriodSeconds": 30,
            },
        },
    });
    (spec, labels)
}

#[tokio::test]
async fn a_minimal_job_comes_back_defaulted_and_keeps_its_selector_across_updates() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let admin = TestClient::admin(&cluster, 0);

    let created = admin.post(JOBS, MINIMAL_JOB).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let job = created.json();
    let uid = job["metadata"]["uid"].as_str().expect("a uid").to_owned();
    let (spec, labels) = expected_job_spec(&uid);
    assert_eq!(job["spec"], spec);
    assert_eq!(job["metadata"]["labels"], labels);
    assert_eq!(job["metadata"]["generation"], json!(1));
    assert_eq!(job["status"], json!({}));
    // A read gives the same object.
    assert_eq!(admin.get(&format!("{JOBS}/pi")).await.json(), job);

    // A PUT of what was read, with a label added: same selector, same spec, same generation.
    let mut changed = job.clone();
    changed["metadata"]["labels"]["team"] = json!("a");
    let updated = put(&admin, &format!("{JOBS}/pi"), &changed).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text());
    let updated = updated.json();
    assert_eq!(updated["spec"], spec);
    assert_eq!(updated["metadata"]["uid"], json!(uid));
    assert_eq!(updated["metadata"]["generation"], json!(1));

    // A second PUT that leaves out the defaulted and generated fields (not the template labels, which
    // upstream's validation requires): defaulted again, selector kept, no generation bump.
    let mut sparse = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "resourceVersion": updated["metadata"]["resourceVersion"]},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "pi", "image": "perl:5.34.0",
                "command": ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"]}]}}}});
    sparse["spec"]["suspend"] = json!(true);
    let again = put(&admin, &format!("{JOBS}/pi"), &sparse).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    let again = again.json();
    let mut suspended = spec.clone();
    suspended["suspend"] = json!(true);
    assert_eq!(again["spec"], suspended);
    assert_eq!(again["metadata"]["generation"], json!(2));

    // A Job created with generateName gets labels naming the generated name.
    let generated = admin
        .post(
            JOBS,
            r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"generateName":"gen-"},
               "spec":{"template":{"spec":{"restartPolicy":"OnFailure","containers":[{"name":"c","image":"busybox"}]}}}}"#,
        )
        .await
        .json();
    let name = generated["metadata"]["name"].as_str().expect("a name");
    assert!(name.starts_with("gen-"), "{name}");
    assert_eq!(
        generated["spec"]["template"]["metadata"]["labels"]["job-name"],
        json!(name)
    );
    assert_eq!(
        generated["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        json!("Always")
    );
}

#[tokio::test]
async fn a_job_without_a_restart_policy_is_defaulted_to_always_and_rejected() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let admin = TestClient::admin(&cluster, 0);
    let reply = admin
        .post(
            JOBS,
            r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"always"},
               "spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#,
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        reply.json()["message"],
        json!(
            "Job.batch \"always\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \
             \"OnFailure\", \"Never\""
        )
    );
}

#[tokio::test]
async fn job_defaults_follow_the_binary_version() {
    let cluster = cluster(vec![member("a", 1, "1.28", &[])]).await;
    let admin = TestClient::admin(&cluster, 0);
    let job = admin.post(JOBS, MINIMAL_JOB).await.json();
    let uid = job["metadata"]["uid"].as_str().expect("a uid").to_owned();
    let (mut spec, _) = expected_job_spec(&uid);
    // 1.28: JobPodReplacementPolicy is alpha (off) and manualSelector is not defaulted yet.
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("podReplacementPolicy");
        spec.remove("manualSelector");
    }
    assert_eq!(job["spec"], spec);
}

#[tokio::test]
async fn services_get_unique_cluster_ips_from_the_service_range() {
    let cluster = cluster(vec![member(
        "a",
        1,
        "1.36",
        &["--service-cluster-ip-range=10.0.0.0/24"],
    )])
    .await;
    let admin = TestClient::admin(&cluster, 0);
    let service = |name: &str, extra: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}"}},
                "spec":{{"selector":{{"app":"{name}"}},"ports":[{{"port":80}}]{extra}}}}}"#
        )
    };
    let a = admin.post(SERVICES, &service("a", "")).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text());
    let a = a.json();
    // A /24 keeps its first 16 addresses for static requests (`calculateRangeOffset`).
    assert_eq!(
        a["spec"],
        json!({
            "clusterIP": "10.0.0.17",
            "clusterIPs": ["10.0.0.17"],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "selector": {"app": "a"},
            "sessionAffinity": "None",
            "type": "ClusterIP",
        })
    );
    assert_eq!(a["status"], json!({"loadBalancer": {}}));
    let b = admin.post(SERVICES, &service("b", "")).await.json();
    assert_eq!(b["spec"]["clusterIP"], json!("10.0.0.18"));
    let dns = admin
        .post(SERVICES, &service("dns", r#","clusterIP":"10.0.0.10""#))
        .await;
    assert_eq!(dns.status, StatusCode::CREATED, "{}", dns.text());
    let taken = admin
        .post(SERVICES, &service("dup", r#","clusterIP":"10.0.0.10""#))
        .await;
    assert_eq!(taken.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        taken.json()["message"],
        json!(
            "Service \"dup\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.0.0.10\"}: \
             failed to allocate IP 10.0.0.10: provided IP is already allocated"
        )
    );
    // Deleting a Service frees its IP; a PUT without clusterIP keeps the allocated one.
    let deleted = admin
        .send(Method::DELETE, &format!("{SERVICES}/dns"), &[], None)
        .await;
    assert_eq!(deleted.status, StatusCode::OK);
    let again = admin
        .post(SERVICES, &service("dns", r#","clusterIP":"10.0.0.10""#))
        .await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.text());
    let mut sparse: Value = serde_json::from_str(&service("a", "")).expect("JSON");
    sparse["metadata"]["labels"] = json!({"tier": "web"});
    let kept = put(&admin, &format!("{SERVICES}/a"), &sparse).await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.text());
    assert_eq!(kept.json()["spec"], a["spec"]);
    // A patch to NodePort gets a node port and keeps the cluster IP.
    let node_port = admin
        .send(
            Method::PATCH,
            &format!("{SERVICES}/a"),
            &[("content-type", "application/merge-patch+json")],
            Some(r#"{"spec":{"type":"NodePort"}}"#),
        )
        .await;
    assert_eq!(node_port.status, StatusCode::OK, "{}", node_port.text());
    let node_port = node_port.json();
    assert_eq!(node_port["spec"]["clusterIP"], json!("10.0.0.17"));
    assert_eq!(
        node_port["spec"]["ports"],
        json!([{"nodePort": 30000, "port": 80, "protocol": "TCP", "targetPort": 80}])
    );
    assert_eq!(node_port["spec"]["externalTrafficPolicy"], json!("Cluster"));
}

#[tokio::test]
async fn deployments_and_pods_are_defaulted() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let admin = TestClient::admin(&cluster, 0);
    let deployment = admin
        .post(
            "/apis/apps/v1/namespaces/default/deployments",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
               "spec":{"selector":{"matchLabels":{"app":"web"}},
               "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","ports":[{"containerPort":80}]}]}}}}"#,
        )
        .await;
    assert_eq!(deployment.status, StatusCode::CREATED, "{}", deployment.text());
    let deployment = deployment.json();
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], json!(1));
    assert_eq!(spec["revisionHistoryLimit"], json!(10));
    assert_eq!(spec["progressDeadlineSeconds"], json!(600));
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert!(spec["template"]["spec"].get("enableServiceLinks").is_none());

    let pod = admin
        .post(
            "/api/v1/namespaces/default/pods",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},
               "spec":{"containers":[{"name":"c","image":"nginx","resources":{"limits":{"cpu":"1","memory":"1Gi"}}}]}}"#,
        )
        .await;
    assert_eq!(pod.status, StatusCode::CREATED, "{}", pod.text());
    let pod = pod.json();
    assert_eq!(pod["spec"]["enableServiceLinks"], json!(true));
    assert_eq!(pod["spec"]["restartPolicy"], json!("Always"));
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "Guaranteed"})
    );
}
