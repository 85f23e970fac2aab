//! Request classification (`RequestInfo::from_parts`, kube's `RequestInfoFactory`): any method and
//! request target either classifies or is an error, never a panic; a classified resource request names
//! its verb.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mvp_core::RequestInfo;

const METHODS: &[&str] = &[
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, target)) = data.split_first() else {
        return;
    };
    let Ok(target) = std::str::from_utf8(target) else {
        return;
    };
    let Ok(uri) = http::Uri::try_from(target) else {
        return;
    };
    let Ok(method) = http::Method::from_bytes(METHODS[usize::from(selector) % METHODS.len()].as_bytes())
    else {
        return;
    };
    if let Ok(info) = RequestInfo::from_parts(&method, &uri)
        && info.is_resource_request
    {
        assert!(
            !info.verb.is_empty(),
            "{target}: a resource request without a verb"
        );
    }
});
