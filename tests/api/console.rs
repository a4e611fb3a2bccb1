//! The web console: its session cookie (the same token and checks as a bearer token, CSRF on state changes)
//! and its embedded files (content types, caching, CSP, size).

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use gpuplane::auth::Role;
use gpuplane::config::{Secret, Settings};
use gpuplane::{AppState, build_router};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::{Response, TEST_SECRET, TestApp};

/// The `Set-Cookie` header for cookie `name`.
#[track_caller]
fn set_cookie(headers: &HeaderMap, name: &str) -> String {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no Set-Cookie for {name}: {headers:?}"))
        .to_string()
}

fn cookie_value(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string()
}

fn attributes(set_cookie: &str) -> Vec<String> {
    set_cookie.split(';').skip(1).map(|a| a.trim().to_string()).collect()
}

async fn sign_in(app: &TestApp, api_key: &str) -> Response {
    app.call(Method::POST, "/v1/console/session", None, Some(json!({ "api_key": api_key }))).await
}

/// A request carrying the session cookie (as a browser would), and the CSRF header when given.
async fn with_cookie(
    app: &TestApp,
    method: Method,
    path: &str,
    session: &str,
    csrf: Option<&str>,
    body: Option<Value>,
) -> Response {
    let mut req =
        Request::builder().method(method).uri(path).header("cookie", format!("gp_csrf=x; gp_session={session}"));
    if let Some(csrf) = csrf {
        req = req.header("x-csrf-token", csrf);
    }
    let req = match body {
        Some(b) => req.header("content-type", "application/json").body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    };
    app.send(req.unwrap()).await
}

#[sqlx::test]
async fn sign_in_sets_an_httponly_strict_session_cookie_and_a_csrf_token(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;

    let res = sign_in(&app, &key).await.expect(StatusCode::OK);
    assert_eq!(res.headers["cache-control"], "no-store");
    assert_eq!(res.body["role"], "tenant_admin");
    assert_eq!(res.body["tenant_id"], tenant_id.as_str());
    let session = set_cookie(&res.headers, "gp_session");
    let attrs = attributes(&session);
    for wanted in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=900"] {
        assert!(attrs.iter().any(|a| a == wanted), "{wanted} missing: {session}");
    }
    assert!(!attrs.iter().any(|a| a == "Secure"), "plain HTTP, not configured: no Secure: {session}");
    // The page must read the CSRF token: that cookie is not HttpOnly, and it is what the body says.
    let csrf_cookie = set_cookie(&res.headers, "gp_csrf");
    assert!(!attributes(&csrf_cookie).iter().any(|a| a == "HttpOnly"), "{csrf_cookie}");
    assert!(attributes(&csrf_cookie).iter().any(|a| a == "SameSite=Strict"), "{csrf_cookie}");
    assert_eq!(cookie_value(&csrf_cookie), res.body["csrf_token"].as_str().unwrap());

    // The cookie holds the very token the bearer exchange gives: it verifies with the same keys.
    let token = cookie_value(&session);
    app.get("/v1/tenant", &token).await.expect(StatusCode::OK);

    // And it authenticates by itself, as a browser sends it.
    let me = with_cookie(&app, Method::GET, "/v1/console/session", &token, None, None).await.expect(StatusCode::OK);
    assert_eq!(me.body["csrf_token"], res.body["csrf_token"]);
    let tenant = with_cookie(&app, Method::GET, "/v1/tenant", &token, None, None).await.expect(StatusCode::OK);
    assert_eq!(tenant.body["id"], tenant_id.as_str());
}

#[sqlx::test]
async fn a_state_change_by_cookie_needs_the_sessions_csrf_token(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let res = sign_in(&app, &key).await.expect(StatusCode::OK);
    let token = cookie_value(&set_cookie(&res.headers, "gp_session"));
    let csrf = res.body["csrf_token"].as_str().unwrap().to_string();
    let body = json!({ "name": "from the console", "role": "tenant_member" });
    let second_key = app.add_key(&op, &tenant_id, Role::TenantAdmin).await;

    let refused = with_cookie(&app, Method::POST, "/v1/tenant/api-keys", &token, None, Some(body.clone())).await;
    refused.expect_problem(StatusCode::FORBIDDEN, "csrf_failed");
    // Another session's token (or the double-submitted cookie's placeholder) is no better.
    let other = sign_in(&app, &second_key).await.expect(StatusCode::OK);
    let other_csrf = other.body["csrf_token"].as_str().unwrap();
    assert_ne!(other_csrf, csrf, "each session has its own CSRF token");
    with_cookie(&app, Method::POST, "/v1/tenant/api-keys", &token, Some(other_csrf), Some(body.clone()))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "csrf_failed");
    with_cookie(&app, Method::POST, "/v1/tenant/api-keys", &token, Some("x"), Some(body.clone()))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "csrf_failed");
    for (method, path) in [(Method::DELETE, "/v1/tenant/api-keys/00000000-0000-0000-0000-000000000000")] {
        with_cookie(&app, method, path, &token, None, None).await.expect_problem(StatusCode::FORBIDDEN, "csrf_failed");
    }
    let keys_before = app.get("/v1/tenant/api-keys", &token).await.body.as_array().unwrap().len();

    let created = with_cookie(&app, Method::POST, "/v1/tenant/api-keys", &token, Some(&csrf), Some(body.clone()))
        .await
        .expect(StatusCode::CREATED);
    assert!(created.body["api_key"].as_str().unwrap().starts_with("gpk_"));
    let keys_after = app.get("/v1/tenant/api-keys", &token).await.body.as_array().unwrap().len();
    assert_eq!(keys_after, keys_before + 1, "only the request with the CSRF token created a key");

    // A bearer caller needs no CSRF token, as before.
    app.post("/v1/tenant/api-keys", &token, body).await.expect(StatusCode::CREATED);
}

#[sqlx::test]
async fn the_cookie_gets_the_same_roles_and_revocation_as_a_bearer_token(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, member_key) = app.tenant_key(&op, "acme", Role::TenantMember).await;
    let res = sign_in(&app, &member_key).await.expect(StatusCode::OK);
    assert_eq!(res.body["role"], "tenant_member");
    let token = cookie_value(&set_cookie(&res.headers, "gp_session"));
    let csrf = res.body["csrf_token"].as_str().unwrap().to_string();

    // A member reads, but admin actions stay refused with a valid CSRF token too.
    with_cookie(&app, Method::GET, "/v1/leases", &token, None, None).await.expect(StatusCode::OK);
    with_cookie(&app, Method::GET, "/v1/tenant/api-keys", &token, None, None)
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    with_cookie(
        &app,
        Method::POST,
        "/v1/leases",
        &token,
        Some(&csrf),
        Some(json!({ "gpu_count": 1, "duration_hours": 1 })),
    )
    .await
    .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    with_cookie(&app, Method::GET, "/v1/admin/tenants", &token, None, None)
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");

    // Another tenant's objects stay invisible (404).
    let (_, other_admin) = app.tenant_admin(&op, "globex").await;
    let other_key = app
        .post("/v1/tenant/api-keys", &other_admin, json!({ "name": "theirs", "role": "tenant_member" }))
        .await
        .expect(StatusCode::CREATED);
    let other_key_id = other_key.body["id"].as_str().unwrap();
    let (_, admin_key) = (tenant_id.clone(), app.add_key(&op, &tenant_id, Role::TenantAdmin).await);
    let admin = sign_in(&app, &admin_key).await.expect(StatusCode::OK);
    let admin_token = cookie_value(&set_cookie(&admin.headers, "gp_session"));
    let admin_csrf = admin.body["csrf_token"].as_str().unwrap().to_string();
    with_cookie(
        &app,
        Method::DELETE,
        &format!("/v1/tenant/api-keys/{other_key_id}"),
        &admin_token,
        Some(&admin_csrf),
        None,
    )
    .await
    .expect_problem(StatusCode::NOT_FOUND, "not_found");

    // Revoking the key ends its console sessions at once.
    let members = app.get("/v1/tenant/api-keys", &admin_token).await.expect(StatusCode::OK);
    let member_id = members.body.as_array().unwrap().iter().find(|k| k["role"] == "tenant_member").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.delete(&format!("/v1/tenant/api-keys/{member_id}"), &admin_token).await.expect(StatusCode::NO_CONTENT);
    with_cookie(&app, Method::GET, "/v1/leases", &token, None, None)
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");

    // A forged cookie is a forged token.
    with_cookie(&app, Method::GET, "/v1/leases", "not-a-jwt", None, None)
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
}

#[sqlx::test]
async fn a_bad_key_signs_nobody_in_and_sign_out_clears_the_cookies(db: PgPool) {
    let app = TestApp::new(db);
    let res = sign_in(&app, "gpk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").await;
    assert!(res.headers.get("set-cookie").is_none());
    res.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    sign_in(&app, "").await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // A NUL byte or a key of 10,000 characters signs nobody in and sets no cookie either.
    let nul = sign_in(&app, "gpk_\u{0}").await;
    assert!(nul.headers.get("set-cookie").is_none());
    assert_eq!(nul.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["api_key"]);
    let long = sign_in(&app, &("gpk_".to_string() + &"A".repeat(10_000))).await;
    assert!(long.headers.get("set-cookie").is_none());
    long.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    app.call(Method::POST, "/v1/console/session", None, Some(json!({ "key": "x" })))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    app.call(Method::GET, "/v1/console/session", None, None)
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");

    let out = app.call(Method::DELETE, "/v1/console/session", None, None).await.expect(StatusCode::NO_CONTENT);
    for name in ["gp_session", "gp_csrf"] {
        let cleared = set_cookie(&out.headers, name);
        assert_eq!(cookie_value(&cleared), "", "{cleared}");
        assert!(attributes(&cleared).iter().any(|a| a == "Max-Age=0"), "{cleared}");
    }
}

#[sqlx::test]
async fn cookies_are_secure_when_configured(db: PgPool) {
    let mut settings = Settings::new(Secret::new(TEST_SECRET));
    settings.secure_cookies = true;
    let state = AppState::new(db.clone(), settings).unwrap();
    let app = TestApp { router: build_router(state.clone()), db, state };
    let op = app.operator().await;
    let (_, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let res = sign_in(&app, &key).await.expect(StatusCode::OK);
    for name in ["gp_session", "gp_csrf"] {
        let cookie = set_cookie(&res.headers, name);
        assert!(attributes(&cookie).iter().any(|a| a == "Secure"), "{cookie}");
    }
}

async fn raw(app: &TestApp, path: &str) -> (StatusCode, HeaderMap, usize) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let res = app.router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = res.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, bytes.len())
}

#[sqlx::test]
async fn the_console_is_served_embedded_with_types_caching_and_csp(db: PgPool) {
    let app = TestApp::new(db);
    let (status, headers, len) = raw(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache", "the page is revalidated so a new binary's files are found");
    assert!(headers["content-security-policy"].to_str().unwrap().starts_with("default-src 'self'"));
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let mut total = len;

    let paths = gpuplane::console::assets::asset_paths();
    assert_eq!(paths.len(), 2);
    for path in &paths {
        let (status, headers, len) = raw(&app, path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let wanted = if path.ends_with(".js") { "text/javascript; charset=utf-8" } else { "text/css; charset=utf-8" };
        assert_eq!(headers["content-type"], wanted, "{path}");
        assert_eq!(headers["cache-control"], "public, max-age=31536000, immutable", "{path}: its name has its hash");
        assert!(headers.contains_key("content-security-policy"));
        total += len;
    }
    // The unhashed or a stale name is not served (a cached page never gets another version's file).
    let (status, headers, _) = raw(&app, "/console/app.js").await;
    assert_eq!(
        (status, &headers["content-type"]),
        (StatusCode::NOT_FOUND, &"application/problem+json".parse().unwrap())
    );
    let (status, _, _) = raw(&app, "/console/app-0000000000000000.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A first visit loads under 100 KB.
    assert_eq!(total, gpuplane::console::assets::first_load_bytes());
    assert!(total < 100 * 1024, "first page is {total} bytes");
}

/// The fleet page's counts come from `GET /v1/admin/fleet`: per pool, nodes (all, ready) and GPUs (all,
/// unhealthy), agreeing with the node list, following cordon and a failed GPU; operators only.
#[sqlx::test]
async fn the_fleet_counts_nodes_and_gpus_per_pool(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool_a = app.pool(&op, "fleet-a", "h100").await;
    let pool_b = app.pool(&op, "fleet-b", "h100").await;
    let a0 = app.node(&op, &pool_a, "fleet-a-0", 8).await;
    app.node(&op, &pool_a, "fleet-a-1", 4).await;
    let fleet =
        |body: &Value, pool: &str| body.as_array().unwrap().iter().find(|p| p["pool_id"] == pool).cloned().unwrap();

    let listed = app.get(&format!("/v1/admin/nodes?pool_id={pool_a}"), &op).await.expect(StatusCode::OK);
    let ready = listed.body["items"].as_array().unwrap().iter().filter(|n| n["state"] == "ready").count() as i64;
    assert_eq!(ready, 2, "nodes created by an operator start ready");
    let before = app.get("/v1/admin/fleet", &op).await.expect(StatusCode::OK);
    let a = fleet(&before.body, &pool_a);
    assert_eq!((a["nodes"].as_i64(), a["gpus"].as_i64(), a["gpus_unhealthy"].as_i64()), (Some(2), Some(12), Some(0)));
    assert_eq!(a["nodes_ready"].as_i64(), Some(ready), "the node list's `ready` is the fleet's");
    let b = fleet(&before.body, &pool_b);
    assert_eq!((b["nodes"].as_i64(), b["nodes_ready"].as_i64(), b["gpus"].as_i64()), (Some(0), Some(0), Some(0)));

    app.post(&format!("/v1/admin/nodes/{a0}/cordon"), &op, json!({})).await.expect(StatusCode::OK);
    sqlx::query("UPDATE gpus SET healthy = false WHERE node_id = $1::uuid AND idx < 3")
        .bind(&a0)
        .execute(&db)
        .await
        .unwrap();
    let after = app.get("/v1/admin/fleet", &op).await.expect(StatusCode::OK);
    let a = fleet(&after.body, &pool_a);
    assert_eq!(a["gpus_unhealthy"].as_i64(), Some(3));
    assert_eq!(a["nodes_ready"].as_i64(), Some(1), "a cordoned node is not ready");

    let (_, tenant) = app.tenant_admin(&op, "fleet-tenant").await;
    app.get("/v1/admin/fleet", &tenant).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
}

/// What docs/console.md says a form post gets: with the session cookie, the CSRF check answers first (403
/// `csrf_failed`, as a cross-site form can never carry the token); with the token, or on sign-in (no session
/// to check), the body's type is refused (415). Nothing is created.
#[sqlx::test]
async fn a_form_post_is_refused_by_the_csrf_check_first_then_by_its_content_type(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let res = sign_in(&app, &key).await.expect(StatusCode::OK);
    let token = cookie_value(&set_cookie(&res.headers, "gp_session"));
    let csrf = res.body["csrf_token"].as_str().unwrap().to_string();
    let form = |path: &str, csrf: Option<&str>, cookie: bool| {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("content-type", "application/x-www-form-urlencoded");
        if cookie {
            req = req.header("cookie", format!("gp_csrf=x; gp_session={token}"));
        }
        if let Some(csrf) = csrf {
            req = req.header("x-csrf-token", csrf);
        }
        req.body(Body::from("name=forged&role=tenant_admin")).unwrap()
    };
    let keys = "/v1/tenant/api-keys";
    app.send(form(keys, None, true)).await.expect_problem(StatusCode::FORBIDDEN, "csrf_failed");
    app.send(form(keys, None, false)).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    app.send(form(keys, Some(&csrf), true))
        .await
        .expect_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    app.send(form("/v1/console/session", None, false))
        .await
        .expect_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let (count,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM api_keys WHERE name = 'forged'").fetch_one(&app.db).await.unwrap();
    assert_eq!(count, 0);
}
