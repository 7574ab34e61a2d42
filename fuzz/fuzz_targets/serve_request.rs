//! The request decoding of `lshbench serve` (`online::api::decode`), on the bytes of a request body. The first
//! byte picks the route (check, insert, query); the rest is the body, decoded under small limits. A body is
//! either refused with 400 or 413 and a non-empty message whose JSON error body parses, or accepted; an accepted
//! request keeps every limit, and encoding it again and decoding that gives it back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_online::api::{Limits, Request, Route, decode};

const LIMITS: Limits = Limits {
    max_body_bytes: 4096,
    max_batch: 8,
    max_text_bytes: 512,
    max_id_bytes: 64,
};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let route = match mode % 3 {
        0 => Route::Check,
        1 => Route::Insert,
        _ => Route::Query,
    };
    match decode(route, body, &LIMITS) {
        Ok(request) => {
            let (docs, again) = match &request {
                Request::Check(r) => (
                    r.documents.iter().map(|d| (Some(&d.id), &d.text)).collect::<Vec<_>>(),
                    serde_json::to_vec(r).unwrap(),
                ),
                Request::Insert(r) => (
                    r.documents.iter().map(|d| (Some(&d.id), &d.text)).collect(),
                    serde_json::to_vec(r).unwrap(),
                ),
                Request::Query(r) => (
                    r.documents.iter().map(|d| (d.id.as_ref(), &d.text)).collect(),
                    serde_json::to_vec(r).unwrap(),
                ),
            };
            assert!(docs.len() <= LIMITS.max_batch);
            for (id, text) in docs {
                assert!(text.len() <= LIMITS.max_text_bytes);
                if let Some(id) = id {
                    assert!(id.len() <= LIMITS.max_id_bytes);
                    assert!(route == Route::Query || !id.is_empty());
                }
            }
            if again.len() <= LIMITS.max_body_bytes {
                assert_eq!(decode(route, &again, &LIMITS).expect("a re-encoded request decodes"), request);
            }
        }
        Err(e) => {
            assert!(e.status == 400 || e.status == 413, "status {}", e.status);
            assert!(!e.message.is_empty());
            let body: serde_json::Value = serde_json::from_slice(&e.body()).expect("the error body is JSON");
            assert_eq!(body["status"], e.status);
        }
    }
});
