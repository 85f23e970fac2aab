//! The identity lease garbage collector (docs/mvp-behaviour.md §2.2, §9): every kube-apiserver periodically
//! deletes the expired kube-apiserver identity leases in `kube-system`, i.e. those whose `renewTime +
//! leaseDurationSeconds` lies in the past, or that lack either field.
//!
//! This is how a crashed server is eventually forgotten: its lease disappears, the peers' discovery caches
//! drop it (a lease delete triggers a re-sync) and the StorageVersion garbage collector removes its entries.
//! With upstream's defaults (lease 3600 s, GC every 3600 s) that takes up to two hours.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::controllers::identity::{
    IDENTITY_LEASE_COMPONENT, IDENTITY_LEASE_LABEL, IDENTITY_LEASE_NAMESPACE,
};
use crate::store::{ObjectKey, Preconditions, StorageResource, Store, resource_version};

fn lease_resource() -> StorageResource {
    StorageResource::new("coordination.k8s.io", "leases")
}

/// Whether `lease` carries the kube-apiserver identity label (the collector's label selector).
pub(crate) fn is_identity_lease(lease: &Value) -> bool {
    lease
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(IDENTITY_LEASE_LABEL))
        .and_then(Value::as_str)
        == Some(IDENTITY_LEASE_COMPONENT)
}

/// Whether `lease` is expired at `now`, as upstream's `isLeaseExpired`: a missing or unreadable
/// `spec.renewTime` or `spec.leaseDurationSeconds` counts as expired (such leases are invalid).
pub(crate) fn is_lease_expired(lease: &Value, now: OffsetDateTime) -> bool {
    let renew = lease
        .pointer("/spec/renewTime")
        .and_then(Value::as_str)
        .and_then(parse_micro_time);
    let duration = lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64);
    match (renew, duration) {
        (Some(renew), Some(seconds)) => renew + time::Duration::seconds(seconds) < now,
        _ => true,
    }
}

/// Parses a UTC RFC 3339 timestamp as Kubernetes writes Time and MicroTime (`2026-11-22T20:55:18Z`,
/// `2026-11-22T20:55:18.123456Z`; a `+00:00` suffix is accepted too). Other offsets are not produced
/// by Kubernetes and are rejected.
pub(crate) fn parse_micro_time(text: &str) -> Option<OffsetDateTime> {
    let text = text.strip_suffix('Z').or_else(|| text.strip_suffix("+00:00"))?;
    let (date, clock) = text.split_once('T')?;
    let mut date_parts = date.splitn(3, '-');
    let year: i32 = date_parts.next()?.parse().ok()?;
    let month: u8 = date_parts.next()?.parse().ok()?;
    let day: u8 = date_parts.next()?.parse().ok()?;
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, fraction)) => (hms, Some(fraction)),
        None => (clock, None),
    };
    let mut clock_parts = hms.splitn(3, ':');
    let hour: u8 = clock_parts.next()?.parse().ok()?;
    let minute: u8 = clock_parts.next()?.parse().ok()?;
    let second: u8 = clock_parts.next()?.parse().ok()?;
    let nanos = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            let digits: u32 = f.parse().ok()?;
            digits * 10u32.pow(9 - u32::try_from(f.len()).ok()?)
        }
        Some(_) => return None,
    };
    let date = time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()?;
    let clock = time::Time::from_hms_nano(hour, minute, second, nanos).ok()?;
    Some(time::PrimitiveDateTime::new(date, clock).assume_utc())
}

/// One collection pass: deletes every expired identity lease in `kube-system`, re-reading each before
/// deleting it and deleting with its uid and resourceVersion as preconditions, so a lease renewed in
/// between survives. Returns the names of the leases deleted.
pub(crate) async fn collect_expired_leases(store: &dyn Store, now: OffsetDateTime) -> Vec<String> {
    let resource = lease_resource();
    let Ok((leases, _)) = store.list(&resource, Some(IDENTITY_LEASE_NAMESPACE)).await else {
        return Vec::new();
    };
    let mut deleted = Vec::new();
    for lease in leases
        .iter()
        .filter(|l| is_identity_lease(l) && is_lease_expired(l, now))
    {
        let Some(name) = lease.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let key = ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, name);
        // Double-check the latest copy, as upstream does before deleting.
        let Ok(latest) = store.get(&resource, &key).await else {
            continue;
        };
        if !is_lease_expired(&latest, now) {
            continue;
        }
        let preconditions = Preconditions {
            uid: latest
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            resource_version: resource_version(&latest),
        };
        if store.delete(&resource, &key, Some(preconditions)).await.is_ok() {
            tracing::info!(lease = %name, "deleted expired apiserver identity lease");
            deleted.push(name.to_owned());
        }
    }
    deleted
}

/// Runs [`collect_expired_leases`] at once and then every `period`, until `cancel`.
pub(crate) async fn run_identity_lease_gc(
    store: Arc<dyn Store>,
    period: Duration,
    cancel: CancellationToken,
) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = interval.tick() => {}
        }
        collect_expired_leases(store.as_ref(), OffsetDateTime::now_utc()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::identity::{identity_lease, micro_time};
    use crate::store::MemoryStore;
    use serde_json::json;
    use time::macros::datetime;

    #[test]
    fn parses_kubernetes_time_formats() {
        let t = parse_micro_time("2026-11-22T20:55:18.123456Z").unwrap();
        assert_eq!(t, datetime!(2026-11-22 20:55:18.123456 UTC));
        assert_eq!(
            parse_micro_time("2026-01-02T03:04:05Z").unwrap(),
            datetime!(2026-01-02 03:04:05 UTC)
        );
        assert_eq!(
            parse_micro_time("2026-01-02T03:04:05.5+00:00").unwrap(),
            datetime!(2026-01-02 03:04:05.5 UTC)
        );
        for bad in [
            "",
            "2026-01-02",
            "2026-13-02T03:04:05Z",
            "2026-01-02T03:04:05+02:00",
            "2026-01-02T03:04:05.Z",
            "2026-01-02T03:04:05.1234567890Z",
            "2026-01-02T25:04:05Z",
        ] {
            assert_eq!(parse_micro_time(bad), None, "{bad}");
        }
        // Round trip with the writer.
        let at = datetime!(2030-06-07 08:09:10.000042 UTC);
        assert_eq!(parse_micro_time(&micro_time(at)), Some(at));
    }

    #[test]
    fn expiry_is_renew_time_plus_duration_and_invalid_leases_are_expired() {
        let renewed = datetime!(2026-01-01 00:00:00 UTC);
        let lease = identity_lease("apiserver-x", "h", "host", 10, &micro_time(renewed), None);
        assert!(!is_lease_expired(&lease, renewed + time::Duration::seconds(10)));
        assert!(is_lease_expired(
            &lease,
            renewed + time::Duration::milliseconds(10_001)
        ));
        let no_renew = json!({"spec": {"leaseDurationSeconds": 10}});
        assert!(is_lease_expired(&no_renew, renewed));
        let no_duration = json!({"spec": {"renewTime": micro_time(renewed)}});
        assert!(is_lease_expired(&no_duration, renewed));
    }

    #[tokio::test]
    async fn collects_only_expired_identity_leases() {
        let store = MemoryStore::new();
        let resource = lease_resource();
        let now = datetime!(2026-01-01 12:00:00 UTC);
        let old = micro_time(now - time::Duration::seconds(100));
        let fresh = micro_time(now - time::Duration::seconds(1));
        let put = |name: &str, lease: Value| {
            let key = ObjectKey::namespaced(IDENTITY_LEASE_NAMESPACE, name);
            let store = &store;
            let resource = &resource;
            async move { store.create(resource, &key, lease).await.unwrap() }
        };
        put("dead", identity_lease("dead", "dead_1", "h1", 10, &old, None)).await;
        put(
            "alive",
            identity_lease("alive", "alive_1", "h2", 10, &fresh, None),
        )
        .await;
        let mut other = identity_lease("kcm", "kcm_1", "h3", 10, &old, None);
        other["metadata"]["labels"] = json!({IDENTITY_LEASE_LABEL: "kube-controller-manager"});
        put("kcm", other).await;
        let mut unlabelled = identity_lease("leader", "l_1", "h4", 10, &old, None);
        unlabelled["metadata"]["labels"] = json!({});
        put("leader", unlabelled).await;

        let deleted = collect_expired_leases(&store, now).await;
        assert_eq!(deleted, vec!["dead".to_owned()]);
        let (left, _) = store
            .list(&resource, Some(IDENTITY_LEASE_NAMESPACE))
            .await
            .unwrap();
        let names: Vec<&str> = left
            .iter()
            .filter_map(|l| l.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        assert_eq!(names, vec!["alive", "kcm", "leader"]);
        assert!(collect_expired_leases(&store, now).await.is_empty());
    }
}
