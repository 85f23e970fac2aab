//! Kubernetes protobuf request bodies (`decode_object`): any bytes decode to a JSON object or a clean
//! error; what decodes serialises again.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = apiserver_fake::protobuf::decode_object(data) {
        assert!(serde_json::to_vec(&object).is_ok());
    }
});
