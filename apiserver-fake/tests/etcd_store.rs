//! The etcd backend against a real etcd (the `etcd` binary on `PATH`): the store contract the REST
//! layer relies on, kube-apiserver's key layout and value format (read back with `etcdctl`), leases of
//! the internal keyspace, 410 after compaction, and a prefix that never touches other keys.
//!
//! Needs the `etcd` feature and `etcd`/`etcdctl` on `PATH`; otherwise it says it is skipped (and fails
//! when `KUBE_MVP_REQUIRE_ETCD=1`, as CI sets it).

mod support;

#[cfg(not(feature = "etcd"))]
#[test]
fn etcd_backend_is_skipped_without_the_feature() {
    support::etcd::skip("apiserver-fake was built without the `etcd` feature");
}

#[cfg(feature = "etcd")]
mod with_etcd {
    use std::process::Command;
    use std::time::Duration;

    use apiserver_fake::store::{
        EtcdConfig, EtcdStore, ObjectKey, Preconditions, StorageMediaType, StorageResource, Store,
        StoreError, WatchEventType,
    };
    use futures_util::StreamExt;
    use serde_json::{Value, json};

    use crate::support::etcd::{PrivateEtcd, private_etcd};

    fn jobs() -> StorageResource {
        StorageResource::new("batch", "jobs")
    }

    fn job(name: &str) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"parallelism": 1}})
    }

    fn rv(object: &Value) -> u64 {
        object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .expect("resourceVersion")
    }

    async fn open(etcd: &PrivateEtcd, prefix: &str) -> EtcdStore {
        let config = EtcdConfig {
            servers: vec![etcd.url.clone()],
            prefix: prefix.to_owned(),
        };
        EtcdStore::connect(&config, Duration::from_secs(5))
            .await
            .expect("etcd answers")
    }

    /// The value stored at `key`, as bytes.
    fn etcdctl_bytes(etcd: &PrivateEtcd, key: &str) -> Vec<u8> {
        let output = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", etcd.url))
            .args(["get", "--print-value-only", key])
            .output()
            .expect("etcdctl runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut value = output.stdout;
        // etcdctl ends the value with a newline of its own.
        if value.last() == Some(&b'\n') {
            value.pop();
        }
        value
    }

    fn etcdctl(etcd: &PrivateEtcd, args: &[&str]) -> String {
        let output = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", etcd.url))
            .args(args)
            .output()
            .expect("etcdctl runs");
        assert!(
            output.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    #[tokio::test]
    async fn crud_follows_the_store_contract_with_etcd_revisions() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/crud/registry").await;
        let key = ObjectKey::namespaced("default", "a");
        let created = store.create(&jobs(), &key, job("a")).await.unwrap();
        let first = rv(&created);
        assert_eq!(created["metadata"]["namespace"], "default");
        assert_eq!(created["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert!(matches!(
            store.create(&jobs(), &key, job("a")).await,
            Err(StoreError::AlreadyExists { .. })
        ));
        assert_eq!(store.get(&jobs(), &key).await.unwrap(), created);

        let mut changed = created.clone();
        changed["spec"]["parallelism"] = json!(2);
        changed["metadata"]["uid"] = json!("forged");
        let updated = store.update(&jobs(), &key, changed.clone(), None).await.unwrap();
        assert!(rv(&updated) > first);
        assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
        // The resourceVersion the object carries is a precondition: stale → 409.
        assert!(matches!(
            store.update(&jobs(), &key, changed, None).await,
            Err(StoreError::Conflict { .. })
        ));
        assert!(matches!(
            store.update(&jobs(), &key, updated.clone(), Some(first)).await,
            Err(StoreError::Conflict { .. })
        ));
        // An update that changes nothing writes nothing.
        let same = store.update(&jobs(), &key, updated.clone(), None).await.unwrap();
        assert_eq!(rv(&same), rv(&updated));

        let err = store
            .delete(
                &jobs(),
                &key,
                Some(Preconditions {
                    uid: None,
                    resource_version: Some(first),
                }),
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("Precondition failed: ResourceVersion"),
            "{err}"
        );
        let deleted = store.delete(&jobs(), &key, None).await.unwrap();
        assert!(rv(&deleted) > rv(&updated), "the deletion's revision");
        assert!(matches!(
            store.get(&jobs(), &key).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.update(&jobs(), &key, job("a"), None).await,
            Err(StoreError::NotFound { .. })
        ));
    }

    #[tokio::test]
    async fn keys_and_values_are_laid_out_as_kube_apiserver_does() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/layout/registry").await;
        store
            .create(&jobs(), &ObjectKey::namespaced("default", "a"), job("a"))
            .await
            .unwrap();
        store
            .create(
                &StorageResource::new("", "namespaces"),
                &ObjectKey::cluster("default"),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
            )
            .await
            .unwrap();
        store
            .create(
                &StorageResource::new("", "services"),
                &ObjectKey::namespaced("default", "kubernetes"),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes"}}),
            )
            .await
            .unwrap();
        store
            .create(
                &StorageResource::new("stable.example.com", "crontabs"),
                &ObjectKey::namespaced("default", "c"),
                json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c"}}),
            )
            .await
            .unwrap();
        let keys = etcdctl(&etcd, &["get", "--prefix", "--keys-only", "/layout/registry/"]);
        let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(
            keys,
            [
                "/layout/registry/jobs/default/a",
                "/layout/registry/namespaces/default",
                "/layout/registry/services/specs/default/kubernetes",
                "/layout/registry/stable.example.com/crontabs/default/c",
            ]
        );
        // Built-in kinds in Kubernetes protobuf, by default, as upstream.
        let stored = etcdctl_bytes(&etcd, "/layout/registry/jobs/default/a");
        assert!(
            stored.starts_with(b"k8s\0"),
            "{}",
            String::from_utf8_lossy(&stored)
        );
        let value = apiserver_fake::protobuf::decode_object(&stored).unwrap();
        assert_eq!(value["spec"]["parallelism"], 1);
        assert!(
            value["metadata"].get("resourceVersion").is_none(),
            "the revision is etcd's, never stored: {value}"
        );
        // Custom resources in JSON.
        let stored = etcdctl_bytes(&etcd, "/layout/registry/stable.example.com/crontabs/default/c");
        let value: Value = serde_json::from_slice(&stored).unwrap();
        assert_eq!(value["kind"], "CronTab");
    }

    #[tokio::test]
    async fn json_storage_is_written_on_request_and_either_encoding_is_read() {
        let Some(etcd) = private_etcd() else { return };
        let json_store = open(&etcd, "/media/registry")
            .await
            .with_media_type(StorageMediaType::Json);
        let protobuf_store = open(&etcd, "/media/registry").await;
        json_store
            .create(&jobs(), &ObjectKey::namespaced("default", "j"), job("j"))
            .await
            .unwrap();
        protobuf_store
            .create(&jobs(), &ObjectKey::namespaced("default", "p"), job("p"))
            .await
            .unwrap();
        let stored = etcdctl_bytes(&etcd, "/media/registry/jobs/default/j");
        let value: Value = serde_json::from_slice(&stored).expect("JSON");
        assert_eq!(value["metadata"]["name"], "j");
        assert!(etcdctl_bytes(&etcd, "/media/registry/jobs/default/p").starts_with(b"k8s\0"));
        for store in [&json_store, &protobuf_store] {
            let (items, _) = store.list(&jobs(), Some("default")).await.unwrap();
            let names: Vec<&str> = items
                .iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["j", "p"]);
            assert!(items.iter().all(|o| o["spec"]["parallelism"] == 1));
        }
    }

    #[tokio::test]
    async fn lists_are_ordered_by_key_and_scoped_by_namespace_and_prefix() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/list/registry").await;
        let other = open(&etcd, "/list/other").await;
        for (ns, name) in [("b", "x"), ("a", "z"), ("a", "y")] {
            store
                .create(&jobs(), &ObjectKey::namespaced(ns, name), job(name))
                .await
                .unwrap();
        }
        other
            .create(&jobs(), &ObjectKey::namespaced("a", "foreign"), job("foreign"))
            .await
            .unwrap();
        let (all, revision) = store.list(&jobs(), None).await.unwrap();
        let names: Vec<&str> = all
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["y", "z", "x"], "another prefix's keys stay out");
        assert!(all.iter().all(|o| rv(o) <= revision));
        assert_eq!(store.list(&jobs(), Some("a")).await.unwrap().0.len(), 2);
        assert!(
            store
                .list(&StorageResource::new("", "pods"), None)
                .await
                .unwrap()
                .0
                .is_empty()
        );
    }

    #[tokio::test]
    async fn watches_replay_from_a_revision_follow_and_carry_prev_objects() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/watch/registry").await;
        let a = ObjectKey::namespaced("a", "j");
        let created = store.create(&jobs(), &a, job("j")).await.unwrap();
        store
            .create(&jobs(), &ObjectKey::namespaced("b", "j"), job("j"))
            .await
            .unwrap();
        let mut from_start = store
            .watch(&jobs(), Some("a"), Some(rv(&created) - 1))
            .await
            .unwrap();
        let mut from_now = store.watch(&jobs(), None, None).await.unwrap();
        let mut next = created.clone();
        next["spec"]["parallelism"] = json!(5);
        let modified = store.update(&jobs(), &a, next, None).await.unwrap();
        let deleted = store.delete(&jobs(), &a, None).await.unwrap();

        let added = from_start.next().await.unwrap().unwrap();
        assert_eq!(
            (added.event_type, added.revision),
            (WatchEventType::Added, rv(&created))
        );
        let changed = from_start.next().await.unwrap().unwrap();
        assert_eq!(changed.event_type, WatchEventType::Modified);
        assert_eq!(changed.object, modified);
        assert_eq!(changed.prev_object.as_ref(), Some(&created));
        let gone = from_start.next().await.unwrap().unwrap();
        assert_eq!(
            (gone.event_type, gone.revision),
            (WatchEventType::Deleted, rv(&deleted))
        );
        assert_eq!(gone.object, deleted, "last state at the deletion's revision");

        let live = from_now.next().await.unwrap().unwrap();
        assert_eq!(live.event_type, WatchEventType::Modified);
    }

    /// The watch cache's contract with the store (docs/decisions.md §21): a progress notification of a
    /// [`Store::watch_progress`] watch says every change up to its revision was delivered, so none may
    /// come before an event at or below its revision. A watch from an older revision is one etcd
    /// catches up in the background; etcd before 3.4.25 answered a `ProgressRequest` at once with its
    /// current revision, ahead of those events (etcd-io/etcd#15220). On such an etcd the store must
    /// offer no progress requests at all (upstream's `RequestWatchProgress` version check).
    #[tokio::test]
    async fn progress_notifications_never_overtake_events() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/progress/registry").await;
        // The binary's tests share one etcd, so the revisions of these creates need not be
        // consecutive: the watch must deliver exactly these, in order.
        let mut revisions = Vec::new();
        for i in 0..50 {
            let name = format!("j-{i:03}");
            let created = store
                .create(&jobs(), &ObjectKey::namespaced("a", &name), job(&name))
                .await
                .unwrap();
            revisions.push(rv(&created));
        }
        let watch = store.watch_progress(&jobs(), revisions[0] - 1).await.unwrap();
        if let Some(request) = &watch.request_progress {
            for _ in 0..5 {
                request.send(()).expect("the watch runs");
            }
        }
        let mut events = watch.events;
        let (mut delivered, mut seen) = (0usize, Vec::new());
        while delivered < revisions.len() {
            let event = tokio::time::timeout(Duration::from_secs(10), events.next())
                .await
                .expect("the watch catches up")
                .expect("the watch runs")
                .expect("an event");
            seen.push((event.event_type, event.revision));
            if event.event_type == WatchEventType::Bookmark {
                assert!(
                    event.revision < revisions[delivered],
                    "a progress notification at {} after {delivered} of 50 events (next at {}): {seen:?}",
                    event.revision,
                    revisions[delivered]
                );
            } else {
                assert_eq!(event.revision, revisions[delivered], "{seen:?}");
                delivered += 1;
            }
        }
    }

    /// gRPC's default receive limit is 4 MiB; kube-apiserver's etcd client takes up to 2 GiB.
    #[tokio::test]
    async fn lists_larger_than_grpcs_default_message_limit_are_read() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/large/registry").await;
        for i in 0..50 {
            let mut big = job(&format!("j{i}"));
            big["spec"]["payload"] = json!("x".repeat(100_000));
            store
                .create(&jobs(), &ObjectKey::namespaced("x", &format!("j{i}")), big)
                .await
                .unwrap();
        }
        let (items, revision) = store.list(&jobs(), None).await.unwrap();
        assert_eq!(items.len(), 50);
        assert_eq!(store.list_at(&jobs(), None, revision).await.unwrap().0.len(), 50);
    }

    #[tokio::test]
    async fn a_list_at_an_old_revision_reads_that_snapshot() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/snapshot/registry").await;
        for name in ["a", "b"] {
            store
                .create(&jobs(), &ObjectKey::namespaced("x", name), job(name))
                .await
                .unwrap();
        }
        let (_, first_page_at) = store.list(&jobs(), None).await.unwrap();
        store
            .delete(&jobs(), &ObjectKey::namespaced("x", "a"), None)
            .await
            .unwrap();
        store
            .create(&jobs(), &ObjectKey::namespaced("x", "c"), job("c"))
            .await
            .unwrap();
        let (then, at) = store.list_at(&jobs(), None, first_page_at).await.unwrap();
        let names: Vec<&str> = then
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!((names, at), (vec!["a", "b"], first_page_at));
    }

    /// A chunked list's ranged read: `limit` keys from the start key (relative to the list's prefix),
    /// etcd's `more` and `count`, pinned to the first page's revision, and scoped to the namespace and
    /// the store's prefix.
    #[tokio::test]
    async fn ranged_reads_page_from_a_start_key_at_a_pinned_revision() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/range/registry").await;
        let other = open(&etcd, "/range/other").await;
        for (ns, name) in [("a", "x"), ("a-b", "x"), ("a", "y"), ("b", "z"), ("a", "w")] {
            store
                .create(&jobs(), &ObjectKey::namespaced(ns, name), job(name))
                .await
                .unwrap();
        }
        other
            .create(&jobs(), &ObjectKey::namespaced("a", "foreign"), job("foreign"))
            .await
            .unwrap();
        let keys = |page: &apiserver_fake::store::RangePage| {
            page.items.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
        };
        let first = store.list_range(&jobs(), None, None, 2, None).await.unwrap();
        assert_eq!(keys(&first), ["a-b/x", "a/w"], "etcd's bytewise order");
        assert!(first.more);
        assert_eq!(first.count, 5);
        // A change after the first page is not seen by the pages pinned to its revision.
        store
            .delete(&jobs(), &ObjectKey::namespaced("a", "x"), None)
            .await
            .unwrap();
        let second = store
            .list_range(&jobs(), None, Some("a/w\u{0}"), 2, Some(first.revision))
            .await
            .unwrap();
        assert_eq!(keys(&second), ["a/x", "a/y"]);
        assert_eq!(
            (second.more, second.count, second.revision),
            (true, 3, first.revision)
        );
        assert_eq!(second.items[0].1["metadata"]["name"], "x");
        let in_a = store.list_range(&jobs(), Some("a"), None, 0, None).await.unwrap();
        assert_eq!(keys(&in_a), ["w", "y"], "keys relative to the namespace, now");
        assert!(!in_a.more);
        let after = store
            .list_range(&jobs(), Some("a"), Some("w\u{0}"), 1, None)
            .await
            .unwrap();
        assert_eq!(
            (keys(&after), after.more, after.count),
            (vec!["y".to_owned()], false, 1)
        );
    }

    #[tokio::test]
    async fn a_compacted_revision_is_expired() {
        if private_etcd().is_none() {
            return;
        }
        // Compaction is etcd-wide: an etcd of its own, so other tests' watches are unaffected.
        let dir = tempfile::tempdir().unwrap();
        let own = apiserver_fake::cluster::etcd_process::EtcdProcess::start(
            &dir.path().join("data"),
            std::net::Ipv4Addr::LOCALHOST,
            0,
            None,
            true,
        )
        .expect("a second etcd starts");
        let etcd = PrivateEtcd {
            url: own.client_url().to_owned(),
        };
        let store = open(&etcd, "/compact/registry").await;
        let first = store
            .create(&jobs(), &ObjectKey::namespaced("x", "a"), job("a"))
            .await
            .unwrap();
        let second = store
            .create(&jobs(), &ObjectKey::namespaced("x", "b"), job("b"))
            .await
            .unwrap();
        etcdctl(&etcd, &["compaction", &rv(&second).to_string()]);
        let err = store.watch(&jobs(), None, Some(rv(&first))).await.err();
        assert!(matches!(err, Some(StoreError::Expired { .. })), "{err:?}");
        let err = store.list_at(&jobs(), None, rv(&first)).await.err();
        assert!(
            matches!(err, Some(StoreError::Expired { .. })),
            "a continued list: {err:?}"
        );
        let err = store
            .list_range(&jobs(), None, Some("x/a\u{0}"), 1, Some(rv(&first)))
            .await
            .err();
        assert!(
            matches!(err, Some(StoreError::Expired { .. })),
            "a continued page: {err:?}"
        );
        assert!(store.watch(&jobs(), None, Some(rv(&second))).await.is_ok());
    }

    #[tokio::test]
    async fn internal_records_live_under_the_prefix_with_an_etcd_lease() {
        let Some(etcd) = private_etcd() else { return };
        let store = open(&etcd, "/internal/registry").await;
        store
            .put_internal("/peerserverleases/a", json!({"ip": "1"}), Duration::from_secs(1))
            .await
            .unwrap();
        store
            .put_internal("/peerserverleases/b", json!({"ip": "2"}), Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(
            store.get_internal("/peerserverleases/a").await.unwrap(),
            Some(json!({"ip": "1"}))
        );
        let listed = etcdctl(
            &etcd,
            &[
                "get",
                "--prefix",
                "--keys-only",
                "/internal/registry/peerserverleases/",
            ],
        );
        assert_eq!(listed.lines().filter(|l| !l.is_empty()).count(), 2);
        let raw = etcdctl(
            &etcd,
            &["get", "-w", "json", "/internal/registry/peerserverleases/b"],
        );
        let raw: Value = serde_json::from_str(raw.trim()).unwrap();
        assert!(
            raw["kvs"][0]["lease"].as_i64().unwrap_or(0) != 0,
            "attached to a lease: {raw}"
        );
        // etcd expires the lease (it may take up to a second past the TTL).
        crate::support::eventually(
            "a's record to expire with its lease",
            Duration::from_secs(5),
            || async {
                let record = store.get_internal("/peerserverleases/a").await.unwrap();
                record.is_none().then_some(())
            },
        )
        .await;
        let live = store.list_internal("/peerserverleases/").await.unwrap();
        assert_eq!(live, vec![("/peerserverleases/b".to_owned(), json!({"ip": "2"}))]);
        assert!(store.delete_internal("/peerserverleases/b").await.unwrap());
        assert!(!store.delete_internal("/peerserverleases/b").await.unwrap());
    }

    #[tokio::test]
    async fn an_unreachable_etcd_fails_to_connect_and_a_lost_one_fails_health() {
        let Some(etcd) = private_etcd() else { return };
        let config = EtcdConfig {
            servers: vec!["http://127.0.0.1:1".to_owned()],
            prefix: "/registry".to_owned(),
        };
        assert!(
            EtcdStore::connect(&config, Duration::from_millis(500))
                .await
                .is_err()
        );
        let store = open(&etcd, "/health/registry").await;
        assert!(store.check_health().await.is_ok());
    }
}
