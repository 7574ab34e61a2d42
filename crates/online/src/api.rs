//! The JSON requests and answers of the online index, and their decoding under limits. The HTTP layer
//! (`lshbench-server`) and the fuzz target `serve_request` call [`decode`]; nothing here is async.
//!
//! Requests are strict: unknown fields, wrong types, a missing `documents`, an empty id, a batch larger than
//! [`Limits::max_batch`] and a text or id over its limit are refused with a message that says which
//! document and which field. Sizes are refused with 413, everything else with 400.

use serde::{Deserialize, Serialize};

/// The limits a request is decoded under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// The largest request body, in bytes (checked by the HTTP layer before decoding; here for the message).
    pub max_body_bytes: usize,
    /// The most documents in one request.
    pub max_batch: usize,
    /// The longest text, in bytes of UTF-8.
    pub max_text_bytes: usize,
    /// The longest id, in bytes of UTF-8.
    pub max_id_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 << 20,
            max_batch: 1000,
            max_text_bytes: 1 << 20,
            max_id_bytes: 1024,
        }
    }
}

/// Whether a checked document is inserted. On the wire a string: `"always"`, `"if-unique"` or `"never"` (the
/// derive would also take an object such as `{"always": null}`, which the API does not promise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InsertMode {
    /// Always (unless its id is already in the index).
    #[default]
    Always,
    /// Only when no near-duplicate was found.
    IfUnique,
    /// Never: a query that takes its place in the writer's order.
    Never,
}

impl<'de> Deserialize<'de> for InsertMode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const VARIANTS: &[&str] = &["always", "if-unique", "never"];
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = InsertMode;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"one of "always", "if-unique", "never""#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<InsertMode, E> {
                match v {
                    "always" => Ok(InsertMode::Always),
                    "if-unique" => Ok(InsertMode::IfUnique),
                    "never" => Ok(InsertMode::Never),
                    _ => Err(E::unknown_variant(v, VARIANTS)),
                }
            }
        }
        deserializer.deserialize_str(Name)
    }
}

/// A document to check or insert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct DocIn {
    /// Its id, unique in the index.
    pub id: String,
    /// Its text.
    pub text: String,
}

/// A document to query with: the id is optional and only echoed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct QueryDoc {
    /// Echoed in the answer.
    #[serde(default)]
    pub id: Option<String>,
    /// Its text.
    pub text: String,
}

/// `POST /v1/check`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct CheckRequest {
    /// The documents, checked and inserted in this order.
    pub documents: Vec<DocIn>,
    /// Whether each is inserted (default `always`).
    #[serde(default)]
    pub insert: InsertMode,
}

/// `POST /v1/insert`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct InsertRequest {
    /// The documents, inserted in this order.
    pub documents: Vec<DocIn>,
}

/// `POST /v1/query`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct QueryRequest {
    /// The documents to look up.
    pub documents: Vec<QueryDoc>,
}

/// Gives each type named the serde impls its derive (made inherent by `remote = "Self"`) would have, except that
/// it is deserialized only from a map. The derive alone also takes a sequence of the fields in order, so
/// `[["id", "text"]]` would pass for a list of documents: every object of the API is refused as an array, with
/// `expecting` in the message.
macro_rules! objects_only {
    ($($ty:ident: $expecting:literal),* $(,)?) => {$(
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $ty::serialize(self, serializer)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Only;
                impl<'de> serde::de::Visitor<'de> for Only {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        $ty::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                deserializer.deserialize_map(Only)
            }
        }
    )*};
}

objects_only! {
    DocIn: r#"a document object {"id", "text"}"#,
    QueryDoc: r#"a document object {"text", "id"?}"#,
    CheckRequest: r#"a request object {"documents", "insert"?}"#,
    InsertRequest: r#"a request object {"documents"}"#,
    QueryRequest: r#"a request object {"documents"}"#,
}

/// A decoded request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `POST /v1/check`.
    Check(CheckRequest),
    /// `POST /v1/insert`.
    Insert(InsertRequest),
    /// `POST /v1/query`.
    Query(QueryRequest),
}

/// Which body a route takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/check`.
    Check,
    /// `POST /v1/insert`.
    Insert,
    /// `POST /v1/query`.
    Query,
}

/// A refused request: the HTTP status and the message of the JSON error body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// 400, 401, 404, 408, 413, 503, 507, ...
    pub status: u16,
    /// What was wrong, for a person.
    pub message: String,
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
        }
    }

    /// A 413 with `message`.
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 413,
            message: message.into(),
        }
    }

    /// The JSON body: `{"error": message, "status": status}`.
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"error": self.message, "status": self.status}))
            .expect("a JSON object of a string and a number serialises")
    }
}

/// Decodes the body of `route` under `limits`: JSON of the route's request type, nothing else.
pub fn decode(route: Route, body: &[u8], limits: &Limits) -> Result<Request, ApiError> {
    if body.len() > limits.max_body_bytes {
        return Err(ApiError::too_large(format!(
            "the request body is {} bytes, over the limit of {} (--max-body-bytes)",
            body.len(),
            limits.max_body_bytes
        )));
    }
    let parsed = match route {
        Route::Check => serde_json::from_slice(body).map(Request::Check),
        Route::Insert => serde_json::from_slice(body).map(Request::Insert),
        Route::Query => serde_json::from_slice(body).map(Request::Query),
    };
    let request = parsed.map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not a valid {route:?} request: {e}"
        ))
    })?;
    let docs: Vec<(Option<&str>, &str)> = match &request {
        Request::Check(r) => r
            .documents
            .iter()
            .map(|d| (Some(d.id.as_str()), d.text.as_str()))
            .collect(),
        Request::Insert(r) => r
            .documents
            .iter()
            .map(|d| (Some(d.id.as_str()), d.text.as_str()))
            .collect(),
        Request::Query(r) => r
            .documents
            .iter()
            .map(|d| (d.id.as_deref(), d.text.as_str()))
            .collect(),
    };
    if docs.len() > limits.max_batch {
        return Err(ApiError::too_large(format!(
            "{} documents in one request, over the limit of {} (--max-batch): send them in smaller batches",
            docs.len(),
            limits.max_batch
        )));
    }
    let must_have_id = route != Route::Query;
    for (i, (id, text)) in docs.iter().enumerate() {
        if text.len() > limits.max_text_bytes {
            return Err(ApiError::too_large(format!(
                "documents[{i}].text is {} bytes, over the limit of {} (--max-text-bytes)",
                text.len(),
                limits.max_text_bytes
            )));
        }
        if let Some(id) = id {
            if id.len() > limits.max_id_bytes {
                return Err(ApiError::too_large(format!(
                    "documents[{i}].id is {} bytes, over the limit of {}",
                    id.len(),
                    limits.max_id_bytes
                )));
            }
            if must_have_id && id.is_empty() {
                return Err(ApiError::bad_request(format!("documents[{i}].id is empty")));
            }
        }
    }
    Ok(request)
}

/// A near-duplicate found for a document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    /// The earlier document's id.
    pub id: String,
    /// Its sequence number (the order the index took it in).
    pub seq: u64,
    /// The signatures' estimated Jaccard.
    pub estimate: f64,
    /// Exact Jaccard of the shingle sets, when verification is exact.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub jaccard: Option<f64>,
}

/// The answer for one document of a check, insert or query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DocResult {
    /// The document's id (absent for a query document given without one).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub id: Option<String>,
    /// Its near-duplicates in the index, earliest first (not reported by `insert`).
    #[serde(default)]
    pub duplicates: Vec<Duplicate>,
    /// Bucket members not read because their bucket was over the index's bucket cap.
    #[serde(default)]
    pub unchecked: u64,
    /// Its shingle set was empty: never a candidate, never a near-duplicate.
    #[serde(default)]
    pub empty: bool,
    /// Whether it was inserted (check and insert).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub inserted: Option<bool>,
    /// Its sequence number when inserted.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seq: Option<u64>,
    /// Why it was not inserted: `duplicate` (insert `if-unique`), `exists` (the id is taken), `never`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
}

/// The answer of check, insert and query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchResponse {
    /// One result per document, in request order.
    pub results: Vec<DocResult>,
}

/// `GET /v1/documents/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DocumentResponse {
    /// The id.
    pub id: String,
    /// Its sequence number.
    pub seq: u64,
    /// Whether its shingle set was empty.
    pub empty: bool,
    /// Its text, when the index keeps texts.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub text: Option<String>,
}

/// `DELETE /v1/documents/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeleteResponse {
    /// The id.
    pub id: String,
    /// Whether it was there (and is now gone).
    pub deleted: bool,
    /// The deletion's sequence number.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seq: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_body_bytes: 1000,
            max_batch: 3,
            max_text_bytes: 20,
            max_id_bytes: 8,
        }
    }

    fn err(route: Route, body: &str) -> ApiError {
        decode(route, body.as_bytes(), &limits()).unwrap_err()
    }

    #[test]
    fn good_requests_decode() {
        let r = decode(
            Route::Check,
            br#"{"documents":[{"id":"a","text":"hello"}],"insert":"if-unique"}"#,
            &limits(),
        )
        .unwrap();
        assert_eq!(
            r,
            Request::Check(CheckRequest {
                documents: vec![DocIn {
                    id: "a".into(),
                    text: "hello".into()
                }],
                insert: InsertMode::IfUnique
            })
        );
        // Serialised as derived: the objects the decoder takes.
        let Request::Check(c) = r else { unreachable!() };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"documents":[{"id":"a","text":"hello"}],"insert":"if-unique"}"#
        );
        let q = decode(Route::Query, br#"{"documents":[{"text":"x"}]}"#, &limits()).unwrap();
        assert!(matches!(q, Request::Query(r) if r.documents[0].id.is_none()));
        assert!(decode(Route::Insert, br#"{"documents":[]}"#, &limits()).is_ok());
    }

    #[test]
    fn every_kind_of_bad_request_gets_its_status_and_a_message() {
        let cases: &[(Route, &str, u16, &str)] = &[
            (Route::Check, "{", 400, "EOF while parsing"),
            (
                Route::Check,
                "[]",
                400,
                r#"invalid type: sequence, expected a request object {"documents", "insert"?}"#,
            ),
            (
                Route::Check,
                r#"[[{"id":"a","text":"x"}]]"#,
                400,
                "invalid type: sequence, expected a request object",
            ),
            (
                Route::Insert,
                r#"[[["a","x"]]]"#,
                400,
                "invalid type: sequence, expected a request object",
            ),
            (
                Route::Query,
                r#"[[{"text":"x"}]]"#,
                400,
                "invalid type: sequence, expected a request object",
            ),
            (
                Route::Check,
                r#"{"documents":[["a","x"]]}"#,
                400,
                r#"invalid type: sequence, expected a document object {"id", "text"}"#,
            ),
            (
                Route::Insert,
                r#"{"documents":[{"id":"a","text":"x"},["b","y"]]}"#,
                400,
                "invalid type: sequence, expected a document object",
            ),
            (
                Route::Query,
                r#"{"documents":[["x"]]}"#,
                400,
                r#"invalid type: sequence, expected a document object {"text", "id"?}"#,
            ),
            (
                Route::Query,
                r#"{"documents":[[null,"x"]]}"#,
                400,
                "invalid type: sequence, expected a document object",
            ),
            (
                Route::Query,
                r#"{"documents":[{"text":"x","x":1}]}"#,
                400,
                "unknown field `x`, expected `id` or `text`",
            ),
            (
                Route::Check,
                r#"{"documents":[{"text":"x","id":"a"}],"insert":"never","x":1}"#,
                400,
                "unknown field `x`, expected `documents` or `insert`",
            ),
            (
                Route::Check,
                r#"{"documents":[{"id":"a","text":"x"}],"documents":[]}"#,
                400,
                "duplicate field `documents`",
            ),
            (
                Route::Check,
                r#"{"documents":[{"id":1,"text":"x"}]}"#,
                400,
                "invalid type: integer",
            ),
            (
                Route::Check,
                r#"{"documents":[{"id":"a","text":"x","lang":"en"}]}"#,
                400,
                "unknown field `lang`",
            ),
            (Route::Check, r#"{"docs":[]}"#, 400, "unknown field `docs`"),
            (Route::Check, r#"{}"#, 400, "missing field `documents`"),
            (
                Route::Check,
                r#"{"documents":[],"insert":"maybe"}"#,
                400,
                "unknown variant `maybe`",
            ),
            (
                Route::Check,
                r#"{"documents":[],"insert":{"always":null}}"#,
                400,
                r#"invalid type: map, expected one of "always", "if-unique", "never""#,
            ),
            (
                Route::Insert,
                r#"{"documents":[{"id":"","text":"x"}]}"#,
                400,
                "documents[0].id is empty",
            ),
            (
                Route::Insert,
                r#"{"documents":[{"text":"x"}]}"#,
                400,
                "missing field `id`",
            ),
            (
                Route::Query,
                r#"{"documents":[{"id":null}]}"#,
                400,
                "missing field `text`",
            ),
            (
                Route::Check,
                r#"{"documents":[{"id":"a","text":"x"},{"id":"b","text":"x"},{"id":"c","text":"x"},{"id":"d","text":"x"}]}"#,
                413,
                "4 documents in one request",
            ),
            (
                Route::Insert,
                r#"{"documents":[{"id":"a","text":"0123456789012345678901"}]}"#,
                413,
                "documents[0].text is 22 bytes",
            ),
            (
                Route::Query,
                r#"{"documents":[{"id":"123456789","text":"x"}]}"#,
                413,
                "documents[0].id is 9 bytes",
            ),
        ];
        for &(route, body, status, msg) in cases {
            let e = err(route, body);
            assert_eq!(e.status, status, "{body}: {e}");
            assert!(e.message.contains(msg), "{body}: {e}");
            let json: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
            assert_eq!(json["status"], status);
        }
        let big = format!(
            r#"{{"documents":[{{"id":"a","text":"{}"}}]}}"#,
            "x".repeat(2000)
        );
        assert_eq!(err(Route::Check, &big).status, 413);
        // Invalid UTF-8 inside a string is refused, not replaced.
        let bad = b"{\"documents\":[{\"id\":\"a\",\"text\":\"\xff\"}]}";
        assert_eq!(
            decode(Route::Check, bad, &limits()).unwrap_err().status,
            400
        );
    }
}
