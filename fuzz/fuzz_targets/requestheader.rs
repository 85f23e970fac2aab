//! The requestheader authenticator's header handling: any set of `X-Remote-*` headers yields a user or
//! none, and stripping removes every identity header it reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mvp_core::{RequestHeaderAuthenticator, RequestHeaderConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(authenticator) =
        RequestHeaderAuthenticator::new(&RequestHeaderConfig::with_standard_headers(Vec::new()))
    else {
        return;
    };
    let mut headers = http::HeaderMap::new();
    for line in data.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(&line[..colon]),
            http::HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    let _ = authenticator.user_from_headers(&headers);
    authenticator.strip_identity_headers(&mut headers);
    assert!(
        authenticator.user_from_headers(&headers).is_none(),
        "stripped headers still name a user"
    );
});
