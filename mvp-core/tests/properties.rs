//! Property tests (proptest) where a coverage-guided fuzzer cannot run on a stable toolchain: request
//! classification and the requestheader authenticator take any input a client can send without
//! panicking, and classify well-formed resource paths exactly.
//!
//! `PROPTEST_CASES` sets the number of cases (256 by default; CI runs the default, a long run is
//! `PROPTEST_CASES=100000 cargo test -p mvp-core --test properties`). A failing case is saved under
//! `tests/properties.proptest-regressions` and replayed first on every later run.

mod support;

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use mvp_core::RequestInfo;
use mvp_core::{RequestHeaderAuthenticator, RequestHeaderConfig};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use rustls_pki_types::CertificateDer;

fn segment() -> impl Strategy<Value = String> {
    "[a-z0-9][a-z0-9.-]{0,12}"
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::GET),
        Just(Method::POST),
        Just(Method::PUT),
        Just(Method::PATCH),
        Just(Method::DELETE),
        Just(Method::HEAD),
        Just(Method::OPTIONS),
        "[A-Z]{1,10}".prop_map(|m| Method::from_bytes(m.as_bytes()).unwrap()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Failing cases are kept beside this file and replayed first.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// Any path and query a client can put in a request line is classified or refused, never a panic.
    #[test]
    fn any_request_line_is_classified_without_panicking(
        method in method(),
        path in "(/[a-zA-Z0-9%._~:@!$&'()*+,;=-]{0,12}){0,10}/?",
        query in proptest::option::of("[a-zA-Z0-9%=&._-]{0,40}"),
    ) {
        let raw = match &query {
            Some(q) => format!("{}?{q}", if path.is_empty() { "/" } else { &path }),
            None => if path.is_empty() { "/".to_owned() } else { path.clone() },
        };
        if let Ok(uri) = raw.parse::<Uri>() {
            let _ = RequestInfo::from_parts(&method, &uri);
        }
    }

    /// A namespaced resource path is split into exactly its parts, as upstream's RequestInfoFactory does.
    #[test]
    fn namespaced_resource_paths_are_classified_exactly(
        group in proptest::option::of(segment()),
        version in "v[0-9]{1,2}",
        namespace in segment(),
        resource in "[a-z]{1,12}",
        name in proptest::option::of(segment()),
    ) {
        let prefix = match &group {
            Some(group) => format!("/apis/{group}/{version}"),
            None => format!("/api/{version}"),
        };
        let mut path = format!("{prefix}/namespaces/{namespace}/{resource}");
        if let Some(name) = &name {
            path = format!("{path}/{name}");
        }
        let info = RequestInfo::from_parts(&Method::GET, &path.parse().unwrap()).unwrap();
        prop_assert!(info.is_resource_request);
        prop_assert_eq!(&info.api_group, group.as_deref().unwrap_or(""));
        prop_assert_eq!(&info.api_version, &version);
        prop_assert_eq!(&info.namespace, &namespace);
        prop_assert_eq!(&info.resource, &resource);
        prop_assert_eq!(&info.name, name.as_deref().unwrap_or(""));
        prop_assert_eq!(info.verb.as_str(), if name.is_some() { "get" } else { "list" });
    }

    /// Any identity headers from a trusted front proxy give the identity they name (groups all values
    /// in order, extras lowercased keys), never a panic.
    #[test]
    fn requestheader_identities_are_read_from_any_header_values(
        user in "[ -~]{0,30}",
        groups in proptest::collection::vec("[!-~]{1,20}", 0..5),
        extra in proptest::collection::vec(("[a-zA-Z0-9-]{1,10}", "[!-~]{1,20}"), 0..4),
    ) {
        let pki = pki();
        let authenticator = RequestHeaderAuthenticator::new(&RequestHeaderConfig::with_standard_headers(vec![
            pki.ca.cert_der(),
        ]))
        .unwrap();
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(&user) {
            headers.insert("x-remote-user", value);
        }
        for group in &groups {
            headers.append("x-remote-group", HeaderValue::from_str(group).unwrap());
        }
        for (key, value) in &extra {
            let name = HeaderName::from_bytes(format!("x-remote-extra-{key}").as_bytes()).unwrap();
            headers.append(name, HeaderValue::from_str(value).unwrap());
        }
        let chain = [pki.client.clone()];
        let found = authenticator.authenticate(&chain, &headers).unwrap();
        match found {
            None => prop_assert!(user.trim().is_empty(), "no user only without a name"),
            Some(found) => {
                prop_assert_eq!(&found.name, &user);
                prop_assert_eq!(&found.groups, &groups);
                prop_assert!(found.extra.keys().all(|k| *k == k.to_lowercase()));
            }
        }
    }
}

/// A front-proxy CA and a client certificate it issued, made once.
struct FrontProxy {
    ca: support::TestCa,
    client: CertificateDer<'static>,
}

fn pki() -> &'static FrontProxy {
    static PKI: std::sync::OnceLock<FrontProxy> = std::sync::OnceLock::new();
    PKI.get_or_init(|| {
        let ca = support::TestCa::new("front-proxy-ca");
        let client = ca.client("front-proxy-client", &[]).0.remove(0);
        FrontProxy { ca, client }
    })
}
