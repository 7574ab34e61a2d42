//! The HTTP service of `lshbench serve`: an HTTP/1.1 JSON API (tokio, hyper, axum) over a durable
//! [`OnlineIndex`], with the limits and timeouts that keep a hostile or broken client from hurting it.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/check` | query then insert each document, in order ([`api::CheckRequest`]) |
//! | `POST /v1/query` | near-duplicates among the durable documents, nothing inserted |
//! | `POST /v1/insert` | insert without looking |
//! | `GET /v1/documents/{id}`, `DELETE /v1/documents/{id}` | one document |
//! | `GET /v1/stats` | size, memory, disk, parameters, S-curve, recovery (JSON) |
//! | `GET /healthz` | `ok`, or 503 while writes are refused |
//! | `GET /metrics` | Prometheus text: requests, latency, documents, bytes |
//! | `GET /` | a page: size, parameters, the S-curve, a box to look a text up |
//!
//! Every error is JSON, `{"error": message, "status": code}`. Writes are answered only once durable; reads
//! never wait for a sync ([`lshbench_online`]). A batch's decoding, signing and verification run on tokio's
//! blocking threads, as many at once as the runtime has workers: a batch of 1,000 mails is about a quarter
//! of a second of CPU, and on the workers it would hold up every other connection's requests.

#![warn(missing_docs)]

mod io;
mod metrics;
mod probation;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use lshbench_online::api::{self, ApiError, BatchResponse, Limits, Request, Route};
use lshbench_online::{OnlineIndex, Outcome, WriteError};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use metrics::Metrics;

/// How the service listens and what it accepts.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// A bearer token every request but `GET /healthz` and `GET /` must carry; required off loopback.
    pub token: Option<String>,
    /// Request size limits.
    pub limits: Limits,
    /// A request's headers must arrive within this time of the server's starting to wait for them: from the
    /// connection's opening, or from the previous answer on it. So an idle keep-alive connection is closed after
    /// this long too.
    pub header_timeout: Duration,
    /// A request's body must arrive within this time.
    pub body_timeout: Duration,
    /// A connection whose answer has made no progress being written for this long (a client that does not read
    /// it) is closed.
    pub write_timeout: Duration,
    /// Connections open at once; more are closed as soon as they are accepted. With a token, at most a quarter
    /// of them (at least 1) may be connections that have made no request with the token yet: a new one closes
    /// the oldest of those.
    pub max_connections: usize,
    /// On SIGTERM, requests in flight get this long to finish.
    pub drain_timeout: Duration,
    /// Worker threads of the runtime (default: the logical CPUs).
    pub threads: Option<usize>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: "127.0.0.1:7878".parse().expect("a valid address"),
            token: None,
            limits: Limits::default(),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            max_connections: 1024,
            drain_timeout: Duration::from_secs(30),
            threads: None,
        }
    }
}

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Listening off loopback without a token.
    #[error(
        "--listen {0} is not a loopback address: anyone who can reach it could write to the index. Give \
         --token (clients then send `Authorization: Bearer TOKEN`), or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    /// An empty token.
    #[error("--token is empty")]
    EmptyToken,
    /// The address could not be bound, or the runtime could not start.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// What the operating system said.
        cause: std::io::Error,
    },
}

struct AppState {
    index: Arc<OnlineIndex>,
    options: ServerOptions,
    metrics: Metrics,
    started: Instant,
    /// Batches being decoded, signed or verified at once: as many as the runtime has workers, so that batches
    /// neither oversubscribe the CPUs nor grow the blocking pool without bound.
    cpu: Arc<tokio::sync::Semaphore>,
}

type Shared = Arc<AppState>;

impl AppState {
    fn new(index: Arc<OnlineIndex>, options: ServerOptions) -> Shared {
        let workers = options.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        Arc::new(AppState {
            index,
            options,
            metrics: Metrics::default(),
            started: Instant::now(),
            cpu: Arc::new(tokio::sync::Semaphore::new(workers.max(1))),
        })
    }
}

/// Runs the service on `index` until SIGTERM or SIGINT (or `shutdown` resolves), then drains requests in
/// flight, closes the index (its queued writes finish and are synced) and returns. `ready` is called with the
/// bound address once connections are accepted.
pub fn serve(
    index: Arc<OnlineIndex>,
    options: ServerOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServerError> {
    check_listen(&options)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all().thread_name("lshbench-http");
    if let Some(n) = options.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.build().map_err(|cause| ServerError::Io {
        what: "starting the runtime".into(),
        cause,
    })?;
    let result = rt.block_on(run(index.clone(), options, ready));
    drop(rt);
    index.close();
    result
}

/// Refuses a non-loopback address without a token, and an empty token.
pub fn check_listen(options: &ServerOptions) -> Result<(), ServerError> {
    match &options.token {
        Some(t) if t.is_empty() => Err(ServerError::EmptyToken),
        None if !options.listen.ip().is_loopback() => Err(ServerError::NeedsToken(options.listen)),
        _ => Ok(()),
    }
}

async fn run(
    index: Arc<OnlineIndex>,
    options: ServerOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|cause| ServerError::Io {
            what: format!("listening on {}", options.listen),
            cause,
        })?;
    let addr = listener.local_addr().map_err(|cause| ServerError::Io {
        what: "reading the bound address".into(),
        cause,
    })?;
    let state = AppState::new(index, options.clone());
    let app = router(state.clone());
    let connections = Arc::new(tokio::sync::Semaphore::new(options.max_connections));
    let probation = options
        .token
        .is_some()
        .then(|| probation::Probation::new(options.max_connections / 4));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|cause| ServerError::Io {
            what: "installing the SIGTERM handler".into(),
            cause,
        })?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|cause| ServerError::Io {
            what: "installing the SIGINT handler".into(),
            cause,
        })?;
    ready(addr);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait a little rather than spin.
                        eprintln!("lshbench serve: accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                // With a token, the connection starts on probation, which may close the oldest one on it.
                let (ticket, eviction, evicted) = match &probation {
                    Some(p) => {
                        let (ticket, eviction, evicted) = p.admit();
                        (Some(ticket), Some(eviction), evicted)
                    }
                    None => (None, None, false),
                };
                let permit = match connections.clone().try_acquire_owned() {
                    Ok(p) => p,
                    // The connection just evicted gives its slot back as soon as its task runs.
                    Err(_) if evicted => match tokio::time::timeout(
                        Duration::from_millis(100),
                        connections.clone().acquire_owned(),
                    )
                    .await
                    {
                        Ok(Ok(p)) => p,
                        _ => continue,
                    },
                    // Over the connection limit: closed at once.
                    Err(_) => continue,
                };
                let _ = stream.set_nodelay(true);
                let tower = hyper_util::service::TowerToHyperService::new(app.clone());
                // Each request carries the connection's ticket, for `guard` to clear.
                let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                    if let Some(t) = &ticket {
                        request.extensions_mut().insert(t.clone());
                    }
                    hyper::service::Service::call(&tower, request)
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(options.header_timeout)
                    .keep_alive(true)
                    .serve_connection(
                        TokioIo::new(io::WriteTimeout::new(stream, options.write_timeout)),
                        service,
                    );
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    // A client that vanishes or breaks the protocol ends its own connection, nothing else.
                    let evicted = async {
                        match eviction {
                            Some(e) => e.wait().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = conn => {}
                        _ = evicted => {}
                    }
                    drop(permit);
                });
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    drop(listener);
    eprintln!("lshbench serve: stopping: finishing the requests in flight");
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(options.drain_timeout) => {
            eprintln!(
                "lshbench serve: requests still open after {} s were cut off",
                options.drain_timeout.as_secs()
            );
        }
    }
    let _ = state;
    Ok(())
}

/// The routes, behind the token check and the metrics.
fn router(state: Shared) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/stats", get(stats))
        .route("/v1/check", post(check))
        .route("/v1/query", post(query))
        .route("/v1/insert", post(insert))
        .route(
            "/v1/documents/{id}",
            get(get_document).delete(delete_document),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// The route label of a path, for metrics (ids are not labels).
fn route_label(path: &str) -> &'static str {
    match path {
        "/" => "/",
        "/healthz" => "/healthz",
        "/metrics" => "/metrics",
        "/v1/stats" => "/v1/stats",
        "/v1/check" => "/v1/check",
        "/v1/query" => "/v1/query",
        "/v1/insert" => "/v1/insert",
        p if p.starts_with("/v1/documents/") => "/v1/documents/{id}",
        _ => "other",
    }
}

fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// The token check (every route but `/healthz` and the page) and the request metrics.
async fn guard(
    State(state): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let t0 = Instant::now();
    let route = route_label(request.uri().path());
    let method = method_label(request.method());
    let open = matches!(route, "/healthz" | "/");
    let response = match &state.options.token {
        Some(token) => {
            let allowed = authorized(request.headers(), token);
            if allowed {
                // Off probation: this connection no longer counts against the unauthenticated share.
                if let Some(ticket) = request.extensions().get::<Arc<probation::Ticket>>() {
                    ticket.clear();
                }
            }
            if allowed || open {
                next.run(request).await
            } else {
                let mut r = error(ApiError {
                    status: 401,
                    message: "this index needs `Authorization: Bearer TOKEN` (the --token it was started with)"
                        .into(),
                });
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
        }
        None => next.run(request).await,
    };
    state.metrics.record(
        route,
        method,
        response.status().as_u16(),
        t0.elapsed().as_secs_f64(),
    );
    response
}

/// Whether `headers` carry `Authorization: Bearer TOKEN` with this token. The scheme is matched without regard to
/// case and may be followed by more than one space (RFC 9110, 11.1 and 11.4: `auth-scheme 1*SP token68`).
fn authorized(headers: &axum::http::HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, rest)| rest.trim_start_matches(' '))
    else {
        return false;
    };
    // Compared in time independent of where the first difference is.
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn json_response(status: u16, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn json<T: serde::Serialize>(value: &T) -> Response {
    json_response(200, serde_json::to_vec(value).expect("answers serialise"))
}

fn error(e: ApiError) -> Response {
    json_response(e.status, e.body())
}

fn write_error(e: WriteError) -> Response {
    let busy = matches!(e, WriteError::Busy { .. });
    let mut r = error(ApiError {
        status: e.status(),
        message: e.to_string(),
    });
    if busy {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

async fn not_found() -> Response {
    error(ApiError {
        status: 404,
        message: "no such route (see GET / and the guide's serve chapter)".into(),
    })
}

async fn method_not_allowed() -> Response {
    error(ApiError {
        status: 405,
        message: "this route does not take this method".into(),
    })
}

/// Reads a body under the size limit and the body timeout. A body announced larger than the limit is refused
/// before any of it is read.
async fn read_body(
    request: axum::extract::Request,
    options: &ServerOptions,
) -> Result<axum::body::Bytes, ApiError> {
    let limit = options.limits.max_body_bytes;
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = announced.filter(|&n| n > limit as u64) {
        return Err(ApiError::too_large(format!(
            "the request body is {n} bytes, over the limit of {limit} bytes (--max-body-bytes)"
        )));
    }
    let body = request.into_body();
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(options.body_timeout, limited.collect()).await {
        Err(_) => Err(ApiError {
            status: 408,
            message: format!(
                "the request body did not arrive within {} s",
                options.body_timeout.as_secs()
            ),
        }),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::too_large(format!(
                "the request body is over the limit of {limit} bytes (--max-body-bytes)"
            )))
        }
        Ok(Err(e)) => Err(ApiError::bad_request(format!(
            "reading the request body failed: {e}"
        ))),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// The request's body, read whole. A body that could not be (too large, too slow, cut off) is answered with
/// `Connection: close`: the rest of it may still be on its way.
async fn body(
    state: &Shared,
    request: axum::extract::Request,
) -> Result<axum::body::Bytes, Response> {
    read_body(request, &state.options).await.map_err(|e| {
        let mut r = error(e);
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    })
}

/// Runs `work` on a blocking thread once one of the `cpu` permits is free, so that the runtime's workers stay
/// free for other connections. (Four queries of 1,000 mails at once on 2 cores held `/healthz` up to a second
/// when they ran on the workers.)
async fn on_cpu<T: Send + 'static>(
    state: &Shared,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    let Ok(permit) = state.cpu.clone().acquire_owned().await else {
        unreachable!("the semaphore is never closed")
    };
    match tokio::task::spawn_blocking(move || {
        let _permit = permit;
        work()
    })
    .await
    {
        Ok(value) => Ok(value),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only when the runtime is shutting down.
        Err(_) => Err(write_error(WriteError::Closed)),
    }
}

/// Waits for the writer's answer.
async fn answered(rx: tokio::sync::oneshot::Receiver<Result<Outcome, WriteError>>) -> Response {
    answer(rx.await)
}

/// The response to the writer's answer (`Err`: the writer went away without one).
fn answer(
    r: Result<Result<Outcome, WriteError>, tokio::sync::oneshot::error::RecvError>,
) -> Response {
    match r {
        Ok(Ok(Outcome::Docs(results))) => json(&BatchResponse { results }),
        Ok(Ok(Outcome::Deleted(d))) => json(&d),
        Ok(Err(e)) => write_error(e),
        Err(_) => write_error(WriteError::Closed),
    }
}

async fn check(State(state): State<Shared>, request: axum::extract::Request) -> Response {
    write(state, request, Route::Check).await
}

async fn insert(State(state): State<Shared>, request: axum::extract::Request) -> Response {
    write(state, request, Route::Insert).await
}

/// A check or an insert: decoded and signed off the workers; the writer answers through a channel.
async fn write(state: Shared, request: axum::extract::Request, route: Route) -> Response {
    let bytes = match body(&state, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let reply = move |r| {
        let _ = tx.send(r);
    };
    let (index, limits) = (state.index.clone(), state.options.limits);
    let submitted = on_cpu(&state, move || -> Result<(), ApiError> {
        match api::decode(route, &bytes, &limits)? {
            Request::Check(r) => index.submit_check(r.documents, r.insert, reply),
            Request::Insert(r) => index.submit_insert(r.documents, reply),
            Request::Query(_) => unreachable!("the write routes decode checks and inserts"),
        }
        Ok(())
    });
    match submitted.await {
        Ok(Ok(())) => answered(rx).await,
        Ok(Err(e)) => error(e),
        Err(r) => r,
    }
}

async fn query(State(state): State<Shared>, request: axum::extract::Request) -> Response {
    let bytes = match body(&state, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (index, limits) = (state.index.clone(), state.options.limits);
    // Decoded, signed, looked up and verified off the workers, and the answer serialised there too.
    let answer = on_cpu(&state, move || {
        match api::decode(Route::Query, &bytes, &limits) {
            Ok(Request::Query(r)) => match index.query(&r.documents) {
                Ok(results) => json(&BatchResponse { results }),
                Err(e) => write_error(e),
            },
            Ok(_) => unreachable!("the query route decodes queries"),
            Err(e) => error(e),
        }
    });
    answer.await.unwrap_or_else(|r| r)
}

/// The `{id}` of a document route, or the 400 that says why it could not be read (an invalid percent-encoding
/// or one that does not decode to UTF-8): axum's own rejection would be plain text.
fn document_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(id)| id).map_err(|rejection| {
        ApiError::bad_request(format!(
            "the document id in the path could not be read: {} (percent-encode the id's UTF-8 bytes)",
            rejection.body_text()
        ))
    })
}

fn no_document(id: &str) -> Response {
    error(ApiError {
        status: 404,
        message: format!("no document `{id}` in the index"),
    })
}

async fn get_document(
    State(state): State<Shared>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match document_id(path) {
        Ok(id) => id,
        Err(e) => return error(e),
    };
    match state.index.get(&id) {
        Some(d) => json(&d),
        None => no_document(&id),
    }
}

async fn delete_document(
    State(state): State<Shared>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match document_id(path) {
        Ok(id) => id,
        Err(e) => return error(e),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    state.index.submit_delete(id.clone(), move |r| {
        let _ = tx.send(r);
    });
    match rx.await {
        // Nothing to delete is an error like any other 404, in the error shape.
        Ok(Ok(Outcome::Deleted(d))) if !d.deleted => no_document(&id),
        r => answer(r),
    }
}

async fn stats(State(state): State<Shared>) -> Response {
    let stats = state.index.stats();
    let mut value = serde_json::to_value(&stats).expect("stats serialise");
    value["server"] = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": state.started.elapsed().as_secs_f64(),
        "limits": state.options.limits,
        "token_required": state.options.token.is_some(),
    });
    json(&value)
}

async fn healthz(State(state): State<Shared>) -> Response {
    // Constant time: a probe polled every second must not scan the index's directory.
    match state.index.poisoned() {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(why) => error(ApiError {
            status: 503,
            message: why,
        }),
    }
}

async fn metrics(State(state): State<Shared>) -> Response {
    let text = state.metrics.render(&state.index.stats());
    let mut r = Response::new(Body::from(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// The page at `GET /`: self-contained (no script or style from elsewhere).
pub const PAGE: &str = include_str!("page.html");

async fn page() -> Response {
    let mut r = Response::new(Body::from(PAGE));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
        ),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::Service;

    /// The router over a new, empty index in a temporary directory, called without a socket.
    struct Harness {
        app: Router,
        rt: tokio::runtime::Runtime,
        dir: tempfile::TempDir,
    }

    impl Harness {
        fn new(token: Option<&str>) -> Harness {
            let dir = tempfile::tempdir().unwrap();
            let index = OnlineIndex::create(
                &dir.path().join("index"),
                &Default::default(),
                Default::default(),
            )
            .unwrap();
            let options = ServerOptions {
                token: token.map(str::to_string),
                ..Default::default()
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            Harness {
                app: router(AppState::new(Arc::new(index), options)),
                rt,
                dir,
            }
        }

        /// The status, the content type and the body of a request.
        fn call(
            &self,
            method: &str,
            uri: &str,
            headers: &[(&str, &str)],
            body: &str,
        ) -> (u16, String, String) {
            let mut request = axum::http::Request::builder().method(method).uri(uri);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let request = request.body(Body::from(body.to_string())).unwrap();
            let mut app = self.app.clone();
            self.rt.block_on(async move {
                let response = app.call(request).await.unwrap();
                let status = response.status().as_u16();
                let kind = response
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                (status, kind, String::from_utf8(body.to_vec()).unwrap())
            })
        }

        /// As `call`, for an error: its status and message, after checking it has the JSON error shape.
        fn error(
            &self,
            method: &str,
            uri: &str,
            headers: &[(&str, &str)],
            body: &str,
        ) -> (u16, String) {
            let (status, kind, body) = self.call(method, uri, headers, body);
            assert_eq!(kind, "application/json", "{method} {uri}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["status"], status, "{body}");
            assert_eq!(v.as_object().unwrap().len(), 2, "{body}");
            (status, v["error"].as_str().unwrap().to_string())
        }
    }

    #[test]
    fn a_document_id_that_does_not_decode_is_a_json_400() {
        let h = Harness::new(None);
        for method in ["GET", "DELETE"] {
            for id in ["%FF", "a%C3", "%E2%82"] {
                let (status, message) = h.error(method, &format!("/v1/documents/{id}"), &[], "");
                assert_eq!(status, 400, "{method} {id}: {message}");
                assert!(message.contains("document id in the path"), "{message}");
                assert!(message.contains("UTF-8"), "{message}");
            }
        }
        // An id that does decode is looked up.
        let (status, message) = h.error("GET", "/v1/documents/caf%C3%A9%2F1", &[], "");
        assert_eq!(
            (status, message.as_str()),
            (404, "no document `café/1` in the index")
        );
    }

    #[test]
    fn health_checks_do_not_scan_the_index_directory() {
        let h = Harness::new(None);
        // Entries the statistics read one by one (for the disk's bytes), and a health check must not.
        let index = h.dir.path().join("index");
        for i in 0..20_000 {
            std::fs::File::create(index.join(format!("junk-{i}"))).unwrap();
        }
        let time = |uri: &str| {
            let t0 = Instant::now();
            for _ in 0..5 {
                assert_eq!(h.call("GET", uri, &[], "").0, 200);
            }
            t0.elapsed()
        };
        let (health, stats) = (time("/healthz"), time("/v1/stats"));
        assert!(
            health * 10 < stats,
            "/healthz took {health:?}, /v1/stats {stats:?}"
        );
    }

    #[test]
    fn a_batch_is_worked_off_the_runtimes_threads() {
        // On a runtime of one thread, a query of 1,000 documents and a health check sent after it: the health
        // check is answered first, since the query's decoding, signing and lookups run on a blocking thread.
        let h = Harness::new(None);
        let text = |i: usize| {
            (0..400)
                .map(|w| format!("w{}", (i * 7919 + w * 104_729) % 5003))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let documents: Vec<serde_json::Value> = (0..1000)
            .map(|i| serde_json::json!({"id": format!("d{i}"), "text": text(i)}))
            .collect();
        let body = serde_json::to_string(&serde_json::json!({ "documents": documents })).unwrap();
        let request = |method: &str, uri: &str, body: String| {
            axum::http::Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::from(body))
                .unwrap()
        };
        let (mut query, mut health) = (h.app.clone(), h.app.clone());
        let (query_done, health_done) = h.rt.block_on(async move {
            let q = tokio::spawn(async move {
                let r = query
                    .call(request("POST", "/v1/query", body))
                    .await
                    .unwrap();
                (r.status(), Instant::now())
            });
            let c = tokio::spawn(async move {
                let r = health
                    .call(request("GET", "/healthz", String::new()))
                    .await
                    .unwrap();
                (r.status(), Instant::now())
            });
            (q.await.unwrap(), c.await.unwrap())
        });
        assert_eq!(
            (query_done.0, health_done.0),
            (StatusCode::OK, StatusCode::OK)
        );
        assert!(
            health_done.1 < query_done.1,
            "the health check waited for the query"
        );
    }

    #[test]
    fn deleting_an_absent_document_is_a_404_in_the_error_shape() {
        let h = Harness::new(None);
        let (status, message) = h.error("DELETE", "/v1/documents/absent", &[], "");
        assert_eq!(
            (status, message.as_str()),
            (404, "no document `absent` in the index")
        );
        let body = r#"{"documents":[{"id":"here","text":"some text to delete"}]}"#;
        assert_eq!(h.call("POST", "/v1/insert", &[], body).0, 200);
        let (status, kind, body) = h.call("DELETE", "/v1/documents/here", &[], "");
        assert_eq!((status, kind.as_str()), (200, "application/json"));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v["id"].as_str(), v["deleted"].as_bool()),
            (Some("here"), Some(true))
        );
        assert_eq!(h.error("DELETE", "/v1/documents/here", &[], "").0, 404);
    }

    #[test]
    fn every_error_of_every_route_is_json() {
        let h = Harness::new(Some("s3cret"));
        let auth: &[(&str, &str)] = &[("authorization", "Bearer s3cret")];
        // Method, path, headers, body, status.
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str, u16);
        let cases: &[Case] = &[
            ("GET", "/v1/stats", &[], "", 401),
            ("GET", "/v1/nothing", auth, "", 404),
            ("GET", "/v1/documents/", auth, "", 404),
            ("GET", "/v1/documents/a/b", auth, "", 404),
            ("PUT", "/v1/check", auth, "{}", 405),
            ("OPTIONS", "/v1/query", auth, "", 405),
            ("POST", "/healthz", auth, "", 405),
            ("DELETE", "/v1/stats", auth, "", 405),
            ("POST", "/v1/check", auth, "{", 400),
            ("POST", "/v1/query", auth, "[]", 400),
            ("GET", "/v1/documents/%FF", auth, "", 400),
            ("GET", "/v1/documents/absent", auth, "", 404),
            ("DELETE", "/v1/documents/absent", auth, "", 404),
        ];
        for &(method, uri, headers, body, status) in cases {
            assert_eq!(
                h.error(method, uri, headers, body).0,
                status,
                "{method} {uri}"
            );
        }
    }

    #[test]
    fn listening_off_loopback_needs_a_token() {
        let at = |addr: &str, token: Option<&str>| {
            check_listen(&ServerOptions {
                listen: addr.parse().unwrap(),
                token: token.map(str::to_string),
                ..Default::default()
            })
        };
        assert!(at("127.0.0.1:1", None).is_ok());
        assert!(at("[::1]:1", None).is_ok());
        let e = at("0.0.0.0:1", None).unwrap_err().to_string();
        assert!(e.contains("not a loopback address"), "{e}");
        assert!(at("0.0.0.0:1", Some("s3cret")).is_ok());
        assert!(at("127.0.0.1:1", Some("")).is_err());
    }

    #[test]
    fn route_labels_hide_ids() {
        assert_eq!(route_label("/v1/documents/secret-id"), "/v1/documents/{id}");
        assert_eq!(route_label("/v1/nope"), "other");
    }

    #[test]
    fn the_bearer_scheme_is_matched_without_regard_to_case() {
        let with = |value: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            authorized(&headers, "s3cret")
        };
        for good in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "bEaReR   s3cret",
        ] {
            assert!(with(good), "{good}");
        }
        for bad in [
            "Bearer s3cre",
            "Bearer s3cret2",
            "Bearer",
            "Bearers3cret",
            "Basic s3cret",
            "Bearer\ts3cret",
            "s3cret",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(!authorized(&axum::http::HeaderMap::new(), "s3cret"));
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for needle in ["<script src", "<link", "@import", "<img", "https://"] {
            assert!(!PAGE.contains(needle), "the page has {needle}");
        }
        // The only absolute URL is the SVG namespace, which is a name, not something fetched.
        assert_eq!(PAGE.matches("http://").count(), 1);
        assert!(PAGE.contains("\"http://www.w3.org/2000/svg\""));
    }
}
