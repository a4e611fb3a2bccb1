use axum::http::StatusCode;
use gpuplane::auth::Role;
use serde_json::json;
use sqlx::PgPool;

use crate::support::app::TestApp;

#[sqlx::test]
async fn operators_create_list_get_update_tenants(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let res = app
            .post(
                "/v1/admin/tenants",
                &op,
                json!({ "name": format!("tenant-{i}"), "quotas": { "max_concurrent_leases": 3 } }),
            )
            .await
            .expect(StatusCode::CREATED);
        assert_eq!(res.body["status"], "active");
        assert_eq!(res.body["quotas"]["max_concurrent_leases"], 3);
        ids.push(res.body["id"].as_str().unwrap().to_string());
    }
    // Paginated in creation order.
    let page1 = app.get("/v1/admin/tenants?limit=2", &op).await.expect(StatusCode::OK);
    let names: Vec<&str> =
        page1.body["items"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tenant-0", "tenant-1"]);
    let after = page1.body["next_after"].as_str().unwrap();
    let page2 = app.get(&format!("/v1/admin/tenants?limit=2&after={after}"), &op).await.expect(StatusCode::OK);
    assert_eq!(page2.body["items"][0]["name"], "tenant-2");
    let last = app.get(&format!("/v1/admin/tenants?limit=10&after={after}"), &op).await.expect(StatusCode::OK);
    assert_eq!(last.body["items"].as_array().unwrap().len(), 3);
    assert!(last.body["next_after"].is_null());

    let got = app.get(&format!("/v1/admin/tenants/{}", ids[0]), &op).await.expect(StatusCode::OK);
    assert_eq!(got.body["name"], "tenant-0");
    let renamed = app
        .patch(&format!("/v1/admin/tenants/{}", ids[0]), &op, json!({ "name": "renamed" }))
        .await
        .expect(StatusCode::OK);
    assert_eq!(renamed.body["name"], "renamed");
    // Names are unique.
    app.patch(&format!("/v1/admin/tenants/{}", ids[1]), &op, json!({ "name": "renamed" }))
        .await
        .expect_problem(StatusCode::CONFLICT, "tenant_name_taken");
    app.post("/v1/admin/tenants", &op, json!({ "name": "tenant-1" }))
        .await
        .expect_problem(StatusCode::CONFLICT, "tenant_name_taken");
    // Unknown tenant.
    app.get("/v1/admin/tenants/00000000-0000-7000-8000-000000000000", &op)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get("/v1/admin/tenants?limit=0", &op)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
}

#[sqlx::test]
async fn operators_set_quotas_per_pool(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, admin) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let res = app
        .put(
            &format!("/v1/admin/tenants/{tenant_id}/quotas"),
            &op,
            json!({ "max_concurrent_leases": 4, "max_gpus_per_pool": 16, "pools": [{ "pool_id": pool, "max_gpus": 8 }] }),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(res.body["quotas"]["max_gpus_per_pool"], 16);
    assert_eq!(res.body["quotas"]["pools"][0]["max_gpus"], 8);
    // The tenant sees its own quotas.
    let me = app.get("/v1/tenant", &admin).await.expect(StatusCode::OK);
    assert_eq!(me.body["quotas"]["max_concurrent_leases"], 4);
    assert_eq!(me.body["quotas"]["pools"][0]["pool_id"], pool.as_str());

    // Bad quotas change nothing.
    let bad = app
        .put(
            &format!("/v1/admin/tenants/{tenant_id}/quotas"),
            &op,
            json!({ "max_concurrent_leases": -1, "pools": [{ "pool_id": "00000000-0000-7000-8000-000000000000", "max_gpus": 1 }] }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["quotas.max_concurrent_leases"]);
    let unknown_pool = app
        .put(
            &format!("/v1/admin/tenants/{tenant_id}/quotas"),
            &op,
            json!({ "pools": [{ "pool_id": "00000000-0000-7000-8000-000000000000", "max_gpus": 1 }] }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(unknown_pool.error_fields(), ["quotas.pools[0].pool_id"]);
    let me = app.get("/v1/tenant", &admin).await.expect(StatusCode::OK);
    assert_eq!(me.body["quotas"]["max_concurrent_leases"], 4, "a failed update changes nothing");
    assert_eq!(me.body["quotas"]["pools"].as_array().unwrap().len(), 1);
}

/// The operator's tenant list and a tenant's own record carry its balance per currency, as the tenant's
/// `GET /v1/billing/balance` gives it (the console's tenants page shows them without a request per tenant).
#[sqlx::test]
async fn tenants_carry_their_balances(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (rich, admin) = app.tenant_admin(&op, "rich").await;
    let (poor, _) = app.tenant_key_without_balance(&op, "poor", Role::TenantAdmin).await;
    let before = app.get(&format!("/v1/admin/tenants/{rich}"), &op).await.expect(StatusCode::OK);
    let usd = |body: &serde_json::Value| {
        body["balances"].as_array().unwrap().iter().find(|b| b["currency"] == "USD").unwrap()["balance_minor"].as_i64()
    };
    let start = usd(&before.body).unwrap();
    app.top_up(&op, &rich, 1234).await;
    app.post(
        &format!("/v1/admin/tenants/{rich}/ledger"),
        &op,
        json!({ "kind": "topup", "amount_minor": 500, "currency": "EUR", "reason": "test top-up" }),
    )
    .await
    .expect(StatusCode::CREATED);

    let own = app.get("/v1/billing/balance", &admin).await.expect(StatusCode::OK);
    let list = app.get("/v1/admin/tenants", &op).await.expect(StatusCode::OK);
    let by_name =
        |name: &str| list.body["items"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap().clone();
    assert_eq!(by_name("rich")["balances"], own.body, "the list agrees with the tenant's own balance");
    assert_eq!(
        by_name("rich")["balances"],
        json!([
            { "currency": "EUR", "balance_minor": 500 },
            { "currency": "USD", "balance_minor": start + 1234 },
        ]),
        "in currency order"
    );
    assert_eq!(by_name("poor")["balances"], json!([]), "no ledger entry, no balance; another tenant's not mixed in");
    assert_eq!(by_name("poor")["id"], poor.as_str());
    let got = app.get(&format!("/v1/admin/tenants/{rich}"), &op).await.expect(StatusCode::OK);
    assert_eq!(got.body["balances"], own.body);
    let me = app.get("/v1/tenant", &admin).await.expect(StatusCode::OK);
    assert_eq!(me.body["balances"], own.body);
}

/// Every tenant-scoped route answers 404 for another tenant's objects, never revealing them.
#[sqlx::test]
async fn another_tenants_objects_are_404(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (a_id, a_admin) = app.tenant_admin(&op, "tenant-a").await;
    let (_b_id, b_admin) = app.tenant_admin(&op, "tenant-b").await;
    let a_keys = app.get("/v1/tenant/api-keys", &a_admin).await.expect(StatusCode::OK);
    let a_key_id = a_keys.body[0]["id"].as_str().unwrap().to_string();

    // B cannot see or revoke A's key.
    let b_keys = app.get("/v1/tenant/api-keys", &b_admin).await.expect(StatusCode::OK);
    assert!(b_keys.body.as_array().unwrap().iter().all(|k| k["id"] != a_key_id.as_str()));
    app.delete(&format!("/v1/tenant/api-keys/{a_key_id}"), &b_admin)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    // A's key still works.
    app.get("/v1/tenant/api-keys", &a_admin).await.expect(StatusCode::OK);
    // Each tenant reads only itself.
    let me = app.get("/v1/tenant", &b_admin).await.expect(StatusCode::OK);
    assert_ne!(me.body["id"], a_id.as_str());
}

#[sqlx::test]
async fn creating_a_key_for_an_unknown_tenant_is_404(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    app.post(
        "/v1/admin/tenants/00000000-0000-7000-8000-000000000000/api-keys",
        &op,
        json!({ "name": "k", "role": Role::TenantAdmin.as_str() }),
    )
    .await
    .expect_problem(StatusCode::NOT_FOUND, "not_found");
}
