//! Revocable console sessions (issue #33): sign-out, key revocation and tenant suspension end a console
//! session's token at once, replayed as the cookie or as a bearer token, on the plain key check and on the
//! statements that check the key themselves (lease creation and release); hostile `sid` claims are refused and
//! change nothing.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use gpuplane::auth::Role;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::{Response, TEST_SECRET, TestApp};

/// A signed-in console: the session token (the `gp_session` cookie's value) and its CSRF token.
struct Console {
    token: String,
    csrf: String,
}

async fn sign_in(app: &TestApp, api_key: &str) -> Console {
    let res = app
        .call(Method::POST, "/v1/console/session", None, Some(json!({ "api_key": api_key })))
        .await
        .expect(StatusCode::OK);
    let cookie = res
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("gp_session="))
        .expect("session cookie")
        .to_string();
    let token = cookie.split(';').next().unwrap().trim_start_matches("gp_session=").to_string();
    Console { token, csrf: res.body["csrf_token"].as_str().unwrap().to_string() }
}

/// A request with the session cookie, as the browser sends it (with the CSRF header on state changes).
async fn by_cookie(app: &TestApp, method: Method, path: &str, console: &Console, body: Option<Value>) -> Response {
    let mut req = Request::builder()
        .method(method.clone())
        .uri(path)
        .header("cookie", format!("gp_session={}; gp_csrf={}", console.token, console.csrf));
    if method != Method::GET {
        req = req.header("x-csrf-token", &console.csrf);
    }
    let req = match body {
        Some(b) => req.header("content-type", "application/json").body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    };
    app.send(req.unwrap()).await
}

async fn sign_out(app: &TestApp, console: &Console) {
    by_cookie(app, Method::DELETE, "/v1/console/session", console, None).await.expect(StatusCode::NO_CONTENT);
}

const READS: [&str; 3] = ["/v1/tenant", "/v1/leases", "/v1/console/session"];

/// Every read of [`READS`] answers `status` (and `code`, for an error) to the console, by cookie and as bearer.
async fn reads_answer(app: &TestApp, console: &Console, status: StatusCode, code: Option<&str>) {
    for path in READS {
        for res in [by_cookie(app, Method::GET, path, console, None).await, app.get(path, &console.token).await] {
            match code {
                Some(code) => {
                    res.expect_problem(status, code);
                }
                None => {
                    res.expect(status);
                }
            }
        }
    }
}

async fn session_rows(db: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM console_sessions").fetch_one(db).await.unwrap()
}

/// The claims of a real token, to forge variants of it with the test's signing secret.
fn claims_of(app: &TestApp, token: &str) -> Value {
    let claims = app.state.tokens.verify(token).expect("a valid token");
    serde_json::to_value(claims).unwrap()
}

fn forge(claims: &Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(TEST_SECRET.as_bytes()).unwrap();
    jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), claims, &key).unwrap()
}

#[sqlx::test]
async fn a_signed_out_session_is_refused_as_cookie_and_as_bearer_and_writes_nothing(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.node(&op, &pool, "n1", 8).await;
    let (_, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let console = sign_in(&app, &key).await;
    reads_answer(&app, &console, StatusCode::OK, None).await;
    let lease = by_cookie(
        &app,
        Method::POST,
        "/v1/leases",
        &console,
        Some(json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 2 })),
    )
    .await
    .expect(StatusCode::CREATED);
    let lease_id = lease.body["id"].as_str().unwrap().to_string();
    assert_eq!(session_rows(&app.db).await, 1);

    sign_out(&app, &console).await;
    assert_eq!(session_rows(&app.db).await, 0, "sign-out ends the session on the server");
    reads_answer(&app, &console, StatusCode::UNAUTHORIZED, Some("session_ended")).await;
    // The statements that check the key themselves refuse it too, and write nothing.
    let create = json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 2 });
    by_cookie(&app, Method::POST, "/v1/leases", &console, Some(create.clone()))
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "session_ended");
    app.post("/v1/leases", &console.token, create).await.expect_problem(StatusCode::UNAUTHORIZED, "session_ended");
    let release = format!("/v1/leases/{lease_id}/release");
    by_cookie(&app, Method::POST, &release, &console, Some(json!({})))
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "session_ended");
    app.post(&release, &console.token, json!({})).await.expect_problem(StatusCode::UNAUTHORIZED, "session_ended");
    let (leases, active): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM leases")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((leases, active), (1, 1), "no lease created or released by the ended session");
    // Signing out again is harmless; a new sign-in with the same key works.
    sign_out(&app, &console).await;
    let again = sign_in(&app, &key).await;
    reads_answer(&app, &again, StatusCode::OK, None).await;
}

#[sqlx::test]
async fn another_session_of_the_tenant_survives_a_sign_out(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let member_key = app.add_key(&op, &tenant_id, Role::TenantMember).await;
    let first = sign_in(&app, &key).await;
    let same_key = sign_in(&app, &key).await;
    let other_key = sign_in(&app, &member_key).await;
    let api_token = app.token_for(&key).await;

    sign_out(&app, &first).await;
    reads_answer(&app, &first, StatusCode::UNAUTHORIZED, Some("session_ended")).await;
    reads_answer(&app, &same_key, StatusCode::OK, None).await;
    reads_answer(&app, &other_key, StatusCode::OK, None).await;
    // A token of `POST /v1/auth/token` has no session: the key's sign-out does not touch it.
    app.get("/v1/tenant", &api_token).await.expect(StatusCode::OK);
    assert_eq!(session_rows(&app.db).await, 2);
}

#[sqlx::test]
async fn revoking_the_key_ends_its_sessions_and_only_its(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, admin_key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let member_key = app.add_key(&op, &tenant_id, Role::TenantMember).await;
    let admin = sign_in(&app, &admin_key).await;
    let member = sign_in(&app, &member_key).await;
    let member_id = claims_of(&app, &member.token)["sub"].as_str().unwrap().to_string();

    by_cookie(&app, Method::DELETE, &format!("/v1/tenant/api-keys/{member_id}"), &admin, None)
        .await
        .expect(StatusCode::NO_CONTENT);
    reads_answer(&app, &member, StatusCode::UNAUTHORIZED, Some("unauthorized")).await;
    reads_answer(&app, &admin, StatusCode::OK, None).await;
}

#[sqlx::test]
async fn suspending_the_tenant_ends_its_sessions_for_good(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let (_, other_key) = app.tenant_key(&op, "globex", Role::TenantAdmin).await;
    let console = sign_in(&app, &key).await;
    let other = sign_in(&app, &other_key).await;
    let api_token = app.token_for(&key).await;

    app.patch(&format!("/v1/admin/tenants/{tenant_id}"), &op, json!({ "status": "suspended" }))
        .await
        .expect(StatusCode::OK);
    reads_answer(&app, &console, StatusCode::UNAUTHORIZED, Some("session_ended")).await;
    // A key's own token is refused as before, for the suspension.
    app.get("/v1/tenant", &api_token).await.expect_problem(StatusCode::FORBIDDEN, "tenant_suspended");
    reads_answer(&app, &other, StatusCode::OK, None).await;

    // Reactivation brings the key back, not the session.
    app.patch(&format!("/v1/admin/tenants/{tenant_id}"), &op, json!({ "status": "active" }))
        .await
        .expect(StatusCode::OK);
    reads_answer(&app, &console, StatusCode::UNAUTHORIZED, Some("session_ended")).await;
    app.get("/v1/tenant", &api_token).await.expect(StatusCode::OK);
    let fresh = sign_in(&app, &key).await;
    reads_answer(&app, &fresh, StatusCode::OK, None).await;
}

#[sqlx::test]
async fn hostile_session_ids_are_refused_and_change_nothing(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let (_, other_key) = app.tenant_key(&op, "globex", Role::TenantAdmin).await;
    let mine = sign_in(&app, &key).await;
    let theirs = sign_in(&app, &other_key).await;
    let claims = claims_of(&app, &mine.token);
    let their_sid = claims_of(&app, &theirs.token)["sid"].clone();
    assert!(claims["sid"].is_string() && their_sid.is_string() && claims["sid"] != their_sid);

    let with_sid = |sid: Option<Value>| {
        let mut c = claims.clone();
        match sid {
            Some(sid) => c["sid"] = sid,
            None => {
                c.as_object_mut().unwrap().remove("sid");
            }
        }
        let token = forge(&c);
        Console { csrf: gpuplane::auth::cookie::csrf_token(&token), token }
    };
    // No sid: a bearer token without a session is an API token, but the cookie holds only sessions.
    let missing = with_sid(None);
    for path in READS {
        by_cookie(&app, Method::GET, path, &missing, None)
            .await
            .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    // Not a uuid: not a token of this service.
    for garbage in [json!("garbage"), json!(42), json!(""), json!({ "id": their_sid }), json!([their_sid])] {
        reads_answer(&app, &with_sid(Some(garbage)), StatusCode::UNAUTHORIZED, Some("unauthorized")).await;
    }
    // Another tenant's session, or one that never was: no session of this key.
    for sid in [their_sid.clone(), json!(Uuid::nil()), json!(Uuid::now_v7())] {
        let forged = with_sid(Some(sid));
        reads_answer(&app, &forged, StatusCode::UNAUTHORIZED, Some("session_ended")).await;
        // Its sign-out ends nothing: another key's session is left alone.
        sign_out(&app, &forged).await;
        app.call(Method::DELETE, "/v1/console/session", Some(&forged.token), None).await.expect(StatusCode::NO_CONTENT);
    }
    assert_eq!(session_rows(&app.db).await, 2);
    reads_answer(&app, &theirs, StatusCode::OK, None).await;
    reads_answer(&app, &mine, StatusCode::OK, None).await;
    // A sign-out by cookie without the session's CSRF token is refused and ends nothing.
    let req = Request::delete("/v1/console/session")
        .header("cookie", format!("gp_session={}", mine.token))
        .body(Body::empty())
        .unwrap();
    app.send(req).await.expect_problem(StatusCode::FORBIDDEN, "csrf_failed");
    reads_answer(&app, &mine, StatusCode::OK, None).await;
}

#[sqlx::test]
async fn expired_sessions_are_refused_and_swept(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let old = sign_in(&app, &key).await;
    let live = sign_in(&app, &key).await;
    let sid: Uuid = claims_of(&app, &old.token)["sid"].as_str().unwrap().parse().unwrap();
    // Its row expires first (a clock ahead of the token's `exp`): the row's expiry is what counts.
    sqlx::query("UPDATE console_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(sid)
        .execute(&app.db)
        .await
        .unwrap();
    reads_answer(&app, &old, StatusCode::UNAUTHORIZED, Some("session_ended")).await;
    assert_eq!(gpuplane::auth::sessions::delete_expired(&app.db).await.unwrap(), 1);
    assert_eq!(gpuplane::auth::sessions::delete_expired(&app.db).await.unwrap(), 0);
    assert_eq!(session_rows(&app.db).await, 1);
    reads_answer(&app, &live, StatusCode::OK, None).await;
}
