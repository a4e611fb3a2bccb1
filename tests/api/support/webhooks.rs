//! A webhook receiver, the signature check of the Standard Webhooks scheme, and a delivery worker of the tests'
//! own.

use super::app::{TEST_SECRET, TestApp};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gpuplane::config::{Secret, Settings};
use gpuplane::webhooks::delivery::Worker;
use gpuplane::{AppState, build_router};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One received, verified webhook.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub body: Value,
}

/// A receiver that answers 500 to its first `fail` requests, then 204, and keeps what it accepted.
#[derive(Default)]
pub struct Receiver {
    pub accepted: Mutex<Vec<Received>>,
    pub requests: Mutex<Vec<(HeaderMap, Bytes)>>,
    pub fail: AtomicUsize,
}

pub async fn spawn_receiver() -> (Arc<Receiver>, String) {
    let receiver = Arc::new(Receiver::default());
    let state = receiver.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let state = state.clone();
            async move {
                state.requests.lock().unwrap().push((headers.clone(), body.clone()));
                if state.fail.load(Ordering::SeqCst) > 0 {
                    state.fail.fetch_sub(1, Ordering::SeqCst);
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                let id = headers["webhook-id"].to_str().unwrap().to_string();
                state.accepted.lock().unwrap().push(Received { id, body: serde_json::from_slice(&body).unwrap() });
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (receiver, url)
}

/// Check a request's Standard Webhooks headers with the secret, computed independently of the service's code.
#[track_caller]
pub fn assert_signed(headers: &HeaderMap, body: &[u8], secret: &str) {
    let id = headers["webhook-id"].to_str().unwrap();
    let ts = headers["webhook-timestamp"].to_str().unwrap();
    let age = chrono::Utc::now().timestamp() - ts.parse::<i64>().unwrap();
    assert!(age.abs() < 300, "timestamp {ts} is within 5 minutes of now");
    let key = STANDARD.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = Hmac::<sha2_for_hmac::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    let sent = headers["webhook-signature"].to_str().unwrap();
    assert!(sent.split(' ').any(|s| s == expected), "signature {sent} is {expected}");
}

/// A service that may call private addresses (the receiver is on loopback) and retries at once.
pub fn app(db: PgPool) -> TestApp {
    let mut settings = Settings::new(Secret::new(TEST_SECRET));
    settings.webhooks.allow_private = true;
    settings.webhooks.retry_schedule = vec![Duration::ZERO; 3];
    let state = AppState::new(db.clone(), settings).unwrap();
    TestApp { router: build_router(state.clone()), db, state }
}

pub fn worker(app: &TestApp) -> Worker {
    Worker::new(app.db.clone(), app.state.settings.webhooks.clone(), app.state.settings.keyring.clone())
}

/// Run delivery rounds until `done` holds, or fail after a deadline.
pub async fn deliver_until(worker: &Worker, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "webhooks not delivered in time");
        if worker.deliver_due(32).await.unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn create_endpoint(app: &TestApp, token: &str, url: &str, types: Value) -> (String, String) {
    let res = app
        .post("/v1/webhooks", token, json!({ "url": url, "event_types": types, "description": "test" }))
        .await
        .expect(StatusCode::CREATED);
    (res.body["id"].as_str().unwrap().to_string(), res.body["secret"].as_str().unwrap().to_string())
}

pub fn types_of(receiver: &Receiver) -> Vec<String> {
    receiver.accepted.lock().unwrap().iter().map(|r| r.body["type"].as_str().unwrap().to_string()).collect()
}
