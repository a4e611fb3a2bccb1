use axum::http::{Request, StatusCode};
use chrono::{DateTime, Duration, SubsecRound, Utc};
use gpuplane::billing::metering::{enforce_balances, meter_once};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

/// Operator, funded tenant admin, pool (price `price` per GPU-hour) with one 8-GPU node.
async fn setup(app: &TestApp, price: i64) -> (String, String, String, String) {
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": price }))
        .await
        .expect(StatusCode::OK);
    app.node(&op, &pool, "node-0", 8).await;
    (op, tenant_id, tenant, pool)
}

async fn lease(app: &TestApp, token: &str, pool: &str, gpus: i64) -> String {
    let res = app.post("/v1/leases", token, json!({ "pool_id": pool, "gpu_count": gpus, "duration_hours": 2 })).await;
    res.expect(StatusCode::CREATED).body["id"].as_str().unwrap().to_string()
}

/// Make a lease look as if it ran from `start` and ended at `end` (state `to`, GPUs returned), nothing metered yet.
async fn pin_period(db: &PgPool, lease: &str, start: DateTime<Utc>, end: Option<DateTime<Utc>>, to: &str) {
    if end.is_some() {
        // The GPUs go back as a release gives them back (held_by cleared, the node's counter raised), no event.
        sqlx::query(
            "WITH released AS (UPDATE gpus SET held_by = NULL WHERE held_by = $1::uuid RETURNING node_id) \
             UPDATE nodes n SET free_gpus = n.free_gpus + r.n \
             FROM (SELECT node_id, count(*) AS n FROM released GROUP BY node_id) r WHERE n.id = r.node_id",
        )
        .bind(lease)
        .execute(db)
        .await
        .unwrap();
    }
    sqlx::query(
        "UPDATE leases SET starts_at = $2, metered_until = $2, ends_at = $2 + interval '2 hours', ended_at = $3, \
         state = $4, end_reason = CASE WHEN $3 IS NULL THEN NULL ELSE 'test' END WHERE id = $1::uuid",
    )
    .bind(lease)
    .bind(start)
    .bind(end)
    .bind(to)
    .execute(db)
    .await
    .unwrap();
}

/// Let the whole pool's price history start long ago, so back-dated leases are priced by it.
/// An instant to pin test periods before: now, unless a month began less than six hours ago, then the last
/// second of the previous month. Periods of up to six hours before it fall in one calendar month (the month of
/// the instant), so the per-month figures these tests check do not depend on the time of day they run.
fn one_month_base() -> DateTime<Utc> {
    let now = Utc::now();
    let start = month_start(now);
    if now - Duration::hours(6) >= start { now } else { start - Duration::seconds(1) }
}

/// The last second of the previous month: periods of up to a day before it lie in a month that has ended, so
/// its invoices can be issued once its usage is metered.
fn previous_month_base() -> DateTime<Utc> {
    month_start(Utc::now()) - Duration::seconds(1)
}

fn month_start(at: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::{Datelike, TimeZone};
    Utc.with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0).unwrap()
}

async fn backdate_prices(db: &PgPool) {
    sqlx::query("UPDATE pool_prices SET effective_from = effective_from - interval '30 days'")
        .execute(db)
        .await
        .unwrap();
}

async fn charged(db: &PgPool, lease: &str) -> i64 {
    let (sum,): (Option<i64>,) = sqlx::query_as(
        "SELECT (-sum(amount_minor))::bigint FROM ledger_entries WHERE lease_id = $1::uuid AND kind = 'usage'",
    )
    .bind(lease)
    .fetch_one(db)
    .await
    .unwrap();
    sum.unwrap_or(0)
}

async fn ledger_matches_balances(db: &PgPool) -> bool {
    let (ok,): (Option<bool>,) = sqlx::query_as(
        "SELECT bool_and(b.balance_minor = (SELECT COALESCE(sum(e.amount_minor), 0) FROM ledger_entries e \
             WHERE e.tenant_id = b.tenant_id AND e.currency = b.currency)) FROM tenant_balances b",
    )
    .fetch_one(db)
    .await
    .unwrap();
    ok.unwrap_or(true)
}

#[sqlx::test]
async fn usage_is_charged_per_second_across_price_changes(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, tenant, pool) = setup(&app, 360).await;
    backdate_prices(&db).await;
    let id = lease(&app, &tenant, &pool, 2).await;
    let t0 = one_month_base() - Duration::seconds(1000);
    // 100 s at 360/h, then the price doubles for the last 50 s. Ended 150 s after the start.
    pin_period(&db, &id, t0, Some(t0 + Duration::seconds(150)), "released").await;
    sqlx::query("INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor) VALUES (gen_random_uuid(), $1::uuid, $2, 720)")
        .bind(&pool)
        .bind(t0 + Duration::seconds(100))
        .execute(&db)
        .await
        .unwrap();
    meter_once(&db).await.unwrap();
    // 2 GPUs x (100 s x 360 + 50 s x 720) / 3600 = 20 + 20.
    assert_eq!(charged(&db, &id).await, 40);
    let records: Vec<(i64, i64, i64)> =
        sqlx::query_as("SELECT gpu_seconds, unit_price_minor, amount_minor FROM usage_records WHERE lease_id = $1::uuid ORDER BY period_start")
            .bind(&id)
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(records, [(200, 360, 20), (100, 720, 20)]);
    // Metering again charges nothing more, and a later price change rewrites nothing.
    meter_once(&db).await.unwrap();
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": 99999 }))
        .await
        .expect(StatusCode::OK);
    meter_once(&db).await.unwrap();
    assert_eq!(charged(&db, &id).await, 40);
    assert!(ledger_matches_balances(&db).await);
}

#[sqlx::test]
async fn interrupted_released_and_expired_leases_are_charged_to_their_end_only(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, _, tenant, pool) = setup(&app, 3600).await; // 1 minor unit per GPU-second
    backdate_prices(&db).await;
    let t0 = Utc::now() - Duration::seconds(600);
    let cases = [("interrupted", 40), ("released", 75), ("expired", 120), ("terminated", 9)];
    let mut ids = Vec::new();
    for (state, seconds) in cases {
        let id = lease(&app, &tenant, &pool, 1).await;
        pin_period(&db, &id, t0, Some(t0 + Duration::seconds(seconds)), state).await;
        ids.push((id, seconds));
    }
    meter_once(&db).await.unwrap();
    for (id, seconds) in &ids {
        assert_eq!(charged(&db, id).await, *seconds, "charged exactly to the end");
    }
    // An active lease is charged up to now, in whole seconds, and keeps going.
    let active = lease(&app, &tenant, &pool, 1).await;
    pin_period(&db, &active, Utc::now() - Duration::seconds(30), None, "active").await;
    meter_once(&db).await.unwrap();
    let first = charged(&db, &active).await;
    assert!((29..=31).contains(&first), "{first}");
}

#[sqlx::test]
async fn metering_twice_on_two_replicas_and_across_a_restart_charges_once(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, _, tenant, pool) = setup(&app, 3600).await;
    backdate_prices(&db).await;
    let t0 = Utc::now() - Duration::seconds(5000);
    let mut ids = Vec::new();
    for _ in 0..6 {
        let id = lease(&app, &tenant, &pool, 1).await;
        pin_period(&db, &id, t0, Some(t0 + Duration::seconds(1000)), "released").await;
        ids.push(id);
    }
    // Two "replicas" meter at once.
    let (a, b) = tokio::join!(meter_once(&db), meter_once(&db));
    a.unwrap();
    b.unwrap();
    meter_once(&db).await.unwrap();
    for id in &ids {
        assert_eq!(charged(&db, id).await, 1000);
    }
    // A restart in the middle of a lease: half metered, then a new process carries on from metered_until.
    let id = lease(&app, &tenant, &pool, 1).await;
    pin_period(&db, &id, t0, Some(t0 + Duration::seconds(777)), "released").await;
    sqlx::query("UPDATE leases SET ended_at = NULL, state = 'active', ends_at = $2 WHERE id = $1::uuid")
        .bind(&id)
        .bind(t0 + Duration::seconds(300))
        .execute(&db)
        .await
        .unwrap();
    meter_once(&db).await.unwrap(); // meters to ends_at (300 s)
    assert_eq!(charged(&db, &id).await, 300);
    sqlx::query("UPDATE leases SET ends_at = $2, ended_at = $2, state = 'released' WHERE id = $1::uuid")
        .bind(&id)
        .bind(t0 + Duration::seconds(777))
        .execute(&db)
        .await
        .unwrap();
    let restarted = TestApp::new(db.clone());
    meter_once(&restarted.db).await.unwrap();
    assert_eq!(charged(&db, &id).await, 777, "nothing lost, nothing twice");
    assert!(ledger_matches_balances(&db).await);
}

#[sqlx::test]
async fn leases_need_balance_and_end_when_it_runs_out(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": 3600 }))
        .await
        .expect(StatusCode::OK);
    app.node(&op, &pool, "node-0", 8).await;
    backdate_prices(&db).await;
    let (tenant_id, key) = app.tenant_key_without_balance(&op, "poor", gpuplane::auth::Role::TenantAdmin).await;
    let tenant = app.token_for(&key).await;
    let res = app.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 5 })).await;
    let res = res.expect_problem(StatusCode::PAYMENT_REQUIRED, "insufficient_balance");
    assert_eq!(res.body["context"]["required_minor"], 3600);
    let (leases,): (i64,) = sqlx::query_as("SELECT count(*) FROM leases").fetch_one(&db).await.unwrap();
    assert_eq!(leases, 0);

    app.top_up(&op, &tenant_id, 5000).await;
    let id = lease(&app, &tenant, &pool, 1).await;
    // Extending needs the balance too (a monthly-sized extension is out of reach).
    app.post(&format!("/v1/leases/{id}/extend"), &tenant, json!({ "hours": 1 })).await.expect(StatusCode::OK);
    // 3,000 s used: 2,000 left, less than an hour at 3,600/h: warned.
    pin_period(&db, &id, Utc::now() - Duration::seconds(3000), None, "active").await;
    sqlx::query("UPDATE leases SET ends_at = now() + interval '1 hour' WHERE id = $1::uuid")
        .bind(&id)
        .execute(&db)
        .await
        .unwrap();
    let touched = meter_once(&db).await.unwrap();
    enforce_balances(&db, &touched, std::time::Duration::from_secs(15)).await.unwrap();
    let events = app.get(&format!("/v1/leases/{id}/events"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(events.body.as_array().unwrap().last().unwrap()["kind"], "balance_low");
    // The warning is also the tenant's `balance.low` event (the webhook outbox), written with it.
    let outbox = app.get("/v1/events", &tenant).await.expect(StatusCode::OK).body;
    let warned = outbox["items"].as_array().unwrap().iter().filter(|e| e["type"] == "balance.low");
    assert_eq!(warned.filter(|e| e["data"]["lease_id"] == id.as_str()).count(), 1, "{outbox}");
    assert_eq!(app.get(&format!("/v1/leases/{id}"), &tenant).await.body["state"], "active");
    // 2,500 s more: the balance is gone; the lease ends.
    sqlx::query("UPDATE leases SET metered_until = metered_until - interval '2500 seconds' WHERE id = $1::uuid")
        .bind(&id)
        .execute(&db)
        .await
        .unwrap();
    let touched = meter_once(&db).await.unwrap();
    enforce_balances(&db, &touched, std::time::Duration::from_secs(15)).await.unwrap();
    let ended = app.get(&format!("/v1/leases/{id}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(ended.body["state"], "terminated");
    assert!(ended.body["end_reason"].as_str().unwrap().contains("balance exhausted"));
    let balance = app.get("/v1/billing/balance", &tenant).await.expect(StatusCode::OK);
    assert!(balance.body[0]["balance_minor"].as_i64().unwrap() <= 0);
    assert!(ledger_matches_balances(&db).await);
}

#[sqlx::test]
async fn export_invoice_and_ledger_reconcile_to_the_minor_unit(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, tenant, pool) = setup(&app, 249).await;
    let (_, other) = app.tenant_admin(&op, "other").await;
    backdate_prices(&db).await;
    let base = previous_month_base();
    let month_start = month_start(base);
    let mut seconds = 97;
    for token in [&tenant, &tenant, &other] {
        for gpus in [1, 3] {
            let id = lease(&app, token, &pool, gpus).await;
            // Ends 1.5 h before the base at the latest, all in the base's month.
            let start = base - Duration::hours(3) + Duration::seconds(seconds);
            pin_period(&db, &id, start, Some(start + Duration::seconds(seconds * 13)), "released").await;
            seconds += 61;
        }
    }
    meter_once(&db).await.unwrap();
    let month = base.format("%Y-%m").to_string();
    let invoices = app.post("/v1/admin/invoices", &op, json!({ "month": month })).await.expect(StatusCode::OK);
    let invoice_total: i64 = invoices.body.as_array().unwrap().iter().map(|i| i["usage_minor"].as_i64().unwrap()).sum();
    let to = (month_start + Duration::days(40)).to_rfc3339().replace('+', "%2B");
    let from = month_start.to_rfc3339().replace('+', "%2B");
    let csv = app
        .get(&format!("/v1/admin/billing/usage/export?from={from}&to={to}&format=csv"), &op)
        .await
        .expect(StatusCode::OK);
    let text = csv.body.as_str().unwrap().to_string();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert_eq!(header, gpuplane::billing::export::CSV_HEADER.trim_end());
    let amount = header.split(',').position(|c| c == "amount_minor").unwrap();
    let export_total: i64 = lines.map(|l| l.split(',').nth(amount).unwrap().parse::<i64>().unwrap()).sum();
    let (ledger_total,): (i64,) = sqlx::query_as(
        "SELECT (-sum(amount_minor))::bigint FROM ledger_entries WHERE kind = 'usage' AND period_at >= $1 AND period_at < $2",
    )
    .bind(month_start)
    .bind(month_start + Duration::days(40))
    .fetch_one(&db)
    .await
    .unwrap();
    assert!(ledger_total > 0);
    assert_eq!(export_total, ledger_total, "export = ledger");
    assert_eq!(invoice_total, ledger_total, "invoice = ledger");
    // The tenant's own export holds only its rows, and JSON lines carry the same totals.
    let own = app
        .get(&format!("/v1/billing/usage/export?from={from}&to={to}&format=jsonl"), &tenant)
        .await
        .expect(StatusCode::OK);
    let rows: Vec<Value> = own.body.as_str().unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let tenant_invoices = app.get("/v1/billing/invoices", &tenant).await.expect(StatusCode::OK);
    let tenant_invoice = &tenant_invoices.body[0];
    assert_eq!(
        rows.iter().map(|r| r["amount_minor"].as_i64().unwrap()).sum::<i64>(),
        tenant_invoice["usage_minor"].as_i64().unwrap()
    );
    assert!(rows.iter().all(|r| r["tenant_id"] == tenant_invoice["tenant_id"]));
    assert!(!tenant_invoice["lines"].as_array().unwrap().is_empty());
    // The other tenant cannot read this invoice; the lifecycle goes draft -> issued -> paid.
    let invoice_id = tenant_invoice["id"].as_str().unwrap();
    app.get(&format!("/v1/billing/invoices/{invoice_id}"), &other)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&format!("/v1/admin/invoices/{invoice_id}/pay"), &op, json!({}))
        .await
        .expect_problem(StatusCode::CONFLICT, "invoice_state");
    assert!(tenant_invoice["issued_at"].is_null() && tenant_invoice["paid_at"].is_null());
    let issued =
        app.post(&format!("/v1/admin/invoices/{invoice_id}/issue"), &op, json!({})).await.expect(StatusCode::OK);
    assert_eq!(issued.body["state"], "issued");
    // Each transition stamps its own column and leaves the other as it was.
    assert!(issued.body["issued_at"].is_string() && issued.body["paid_at"].is_null(), "{}", issued.body);
    let paid = app.post(&format!("/v1/admin/invoices/{invoice_id}/pay"), &op, json!({})).await.expect(StatusCode::OK);
    assert_eq!(paid.body["state"], "paid");
    assert_eq!(paid.body["issued_at"], issued.body["issued_at"]);
    assert!(paid.body["paid_at"].is_string(), "{}", paid.body);
    let revenue = app.get(&format!("/v1/admin/billing/revenue?from={from}&to={to}"), &op).await.expect(StatusCode::OK);
    let revenue_total: i64 =
        revenue.body["tenants"].as_array().unwrap().iter().map(|t| t["amount_minor"].as_i64().unwrap()).sum();
    assert_eq!(revenue_total, ledger_total);
}

#[sqlx::test]
async fn bad_billing_input_is_4xx_and_posts_nothing(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant_id, tenant, _) = setup(&app, 100).await;
    let path = format!("/v1/admin/tenants/{tenant_id}/ledger");
    let (before,): (i64,) = sqlx::query_as("SELECT count(*) FROM ledger_entries").fetch_one(&db).await.unwrap();
    for (body, field) in [
        (json!({ "kind": "topup", "amount_minor": -5, "currency": "USD" }), "amount_minor"),
        (json!({ "kind": "topup", "amount_minor": 0, "currency": "USD" }), "amount_minor"),
        (json!({ "kind": "topup", "amount_minor": 10_000_000_000_000i64, "currency": "USD" }), "amount_minor"),
        (json!({ "kind": "usage", "amount_minor": -5, "currency": "USD" }), "kind"),
        (json!({ "kind": "topup", "amount_minor": 5, "currency": "usd" }), "currency"),
        (json!({ "kind": "gift", "amount_minor": 5, "currency": "USD" }), "kind"),
    ] {
        let res =
            app.post(&path, &op, body).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), [field]);
    }
    app.post(
        "/v1/admin/tenants/00000000-0000-7000-8000-000000000000/ledger",
        &op,
        json!({ "kind": "topup", "amount_minor": 5, "currency": "USD" }),
    )
    .await
    .expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&path, &tenant, json!({ "kind": "topup", "amount_minor": 5, "currency": "USD" }))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let (after,): (i64,) = sqlx::query_as("SELECT count(*) FROM ledger_entries").fetch_one(&db).await.unwrap();
    assert_eq!(before, after);
    let now = Utc::now();
    let inverted =
        format!("from={}&to={}", now.to_rfc3339(), (now - Duration::days(1)).to_rfc3339()).replace('+', "%2B");
    app.get(&format!("/v1/billing/usage/export?{inverted}"), &tenant)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    app.get("/v1/billing/usage/export?format=xlsx", &tenant)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    app.post("/v1/admin/invoices", &op, json!({ "month": "2026-13" }))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // The ledger is append-only, whatever the code does.
    let err = sqlx::query("UPDATE ledger_entries SET amount_minor = 1").execute(&db).await.unwrap_err();
    assert!(err.to_string().contains("append-only"));
}

#[sqlx::test]
async fn top_ups_are_idempotent_and_concurrent_ones_never_lose_an_update(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant_id, tenant, _) = setup(&app, 100).await;
    let path = format!("/v1/admin/tenants/{tenant_id}/ledger");
    let post = |key: &str| {
        Request::post(path.clone())
            .header("authorization", format!("Bearer {op}"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(axum::body::Body::from(
                json!({ "kind": "topup", "amount_minor": 700, "currency": "USD" }).to_string(),
            ))
            .unwrap()
    };
    let first = app.send(post("wire-1")).await.expect(StatusCode::CREATED);
    let again = app.send(post("wire-1")).await.expect(StatusCode::CREATED);
    assert_eq!(first.body["id"], again.body["id"]);
    let before = app.get("/v1/billing/balance", &tenant).await.body[0]["balance_minor"].as_i64().unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let router = app.router.clone();
        let req = post(&format!("concurrent-{i}"));
        tasks.push(tokio::spawn(async move { tower::ServiceExt::oneshot(router, req).await.unwrap().status() }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::CREATED);
    }
    let after = app.get("/v1/billing/balance", &tenant).await.body[0]["balance_minor"].as_i64().unwrap();
    assert_eq!(after - before, 20 * 700);
    assert!(ledger_matches_balances(&db).await);
}

#[sqlx::test]
async fn monthly_leases_below_the_sla_get_a_credit(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, tenant, pool) = setup(&app, 100).await;
    app.post(
        &format!("/v1/admin/pools/{pool}/prices"),
        &op,
        json!({ "price_per_gpu_hour_minor": 100, "price_per_gpu_month_minor": 2_592_000 }),
    )
    .await
    .expect(StatusCode::CREATED);
    app.put(&format!("/v1/admin/pools/{pool}/sla"), &op, json!({ "target_percent": 99.5, "credit_percent": 10 }))
        .await
        .expect(StatusCode::OK);
    backdate_prices(&db).await;
    let res = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "months": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let id = res.body["id"].as_str().unwrap().to_string();
    // It ran 10,000 s of last month, then its node failed (interrupted) with the month still due.
    let base = previous_month_base();
    let start = base - Duration::seconds(20_000);
    pin_period(&db, &id, start, Some(start + Duration::seconds(10_000)), "interrupted").await;
    sqlx::query("UPDATE leases SET ends_at = starts_at + interval '30 days' WHERE id = $1::uuid")
        .bind(&id)
        .execute(&db)
        .await
        .unwrap();
    meter_once(&db).await.unwrap();
    assert_eq!(charged(&db, &id).await, 10_000, "1 minor unit per second at 2,592,000 per 30 days");
    let month = base.format("%Y-%m").to_string();
    let invoices = app.post("/v1/admin/invoices", &op, json!({ "month": month })).await.expect(StatusCode::OK);
    let invoice = &invoices.body[0];
    let credit = invoice["credits_minor"].as_i64().unwrap();
    assert_eq!(credit, invoice["usage_minor"].as_i64().unwrap() / 10);
    assert!(credit > 0);
    // Generating again posts no second credit.
    let again = app.post("/v1/admin/invoices", &op, json!({ "month": month })).await.expect(StatusCode::OK);
    assert_eq!(again.body[0]["credits_minor"], credit);
}

/// The node was last heard from at `at` (its agent's heartbeat bounds what metering charges).
async fn hear_from(db: &PgPool, node: &str, at: DateTime<Utc>) {
    sqlx::query("UPDATE nodes SET last_heartbeat_at = $2 WHERE id = $1::uuid")
        .bind(node)
        .bind(at)
        .execute(db)
        .await
        .unwrap();
}

/// The lease's metering state: (metered_until, ended_at).
async fn metering_state(db: &PgPool, lease: &str) -> (DateTime<Utc>, Option<DateTime<Utc>>) {
    sqlx::query_as("SELECT metered_until, ended_at FROM leases WHERE id = $1::uuid")
        .bind(lease)
        .fetch_one(db)
        .await
        .unwrap()
}

#[sqlx::test]
async fn an_interrupted_lease_is_charged_exactly_to_the_last_heartbeat(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    // 36,000 per GPU-hour: 10 minor units per GPU-second.
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": 36_000 }))
        .await
        .expect(StatusCode::OK);
    backdate_prices(&db).await;
    let (node, _) = app.agent_node(&op, &pool, "gpu-a", 8).await;
    let id = lease(&app, &tenant, &pool, 8).await;
    // The lease started 1000 s ago; the agent's last heartbeat was 3.5 s after the start, then silence.
    let t0 = Utc::now().trunc_subsecs(6) - Duration::seconds(1000);
    let last = t0 + Duration::milliseconds(3_500);
    pin_period(&db, &id, t0, None, "active").await;
    hear_from(&db, &node, last).await;
    // While the node is silent, metering stops at its last heartbeat (3 whole seconds), not at now.
    meter_once(&db).await.unwrap();
    assert_eq!(charged(&db, &id).await, 8 * 3 * 10);
    assert_eq!(metering_state(&db, &id).await.0, t0 + Duration::seconds(3));
    // Offline: interrupted at that heartbeat, and the final metering charges floor(exact cost to ended_at).
    app.sweep().await;
    let (metered_until, ended_at) = metering_state(&db, &id).await;
    assert_eq!(ended_at, Some(last));
    meter_once(&db).await.unwrap();
    assert_eq!(charged(&db, &id).await, 8 * 3 * 10, "the last half second is free, nothing past it is charged");
    assert!(metered_until <= last);
    assert_eq!(metering_state(&db, &id).await.0, last);
    assert!(ledger_matches_balances(&db).await);
}

#[sqlx::test]
async fn a_lease_across_a_price_change_and_a_month_boundary_is_charged_exactly(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, _, tenant, pool) = setup(&app, 3600).await; // 1 minor unit per GPU-second
    let id = lease(&app, &tenant, &pool, 2).await;
    // Starts a quarter second into a second; the price doubles on a whole second; October ends mid-lease.
    let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
    let start = at("2026-10-31T23:59:00.250Z");
    let end = at("2026-11-01T00:01:30.750Z");
    sqlx::query(
        "UPDATE pool_prices SET effective_from = effective_from - interval '400 days' WHERE pool_id = $1::uuid",
    )
    .bind(&pool)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query("INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor) VALUES (gen_random_uuid(), $1::uuid, $2, 7200)")
        .bind(&pool)
        .bind(at("2026-10-31T23:59:30Z"))
        .execute(&db)
        .await
        .unwrap();
    pin_period(&db, &id, start, Some(end), "released").await;
    meter_once(&db).await.unwrap();
    // 150 whole seconds: the 30 that begin before 23:59:30 at 1, the other 120 at 2; 2 GPUs.
    assert_eq!(charged(&db, &id).await, 2 * (30 + 2 * 120));
    let records: Vec<(DateTime<Utc>, i64, i64, i64)> = sqlx::query_as(
        "SELECT period_start, gpu_seconds, unit_price_minor, amount_minor FROM usage_records \
         WHERE lease_id = $1::uuid ORDER BY period_start",
    )
    .bind(&id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(
        records,
        [
            (start, 60, 3600, 60),
            (at("2026-10-31T23:59:30.250Z"), 60, 7200, 120),
            // November's part starts at the first second that begins in November.
            (at("2026-11-01T00:00:00.250Z"), 180, 7200, 360),
        ]
    );
    assert!(ledger_matches_balances(&db).await);
}

/// One randomized lease history: when it starts (µs after the base time), its GPUs, the pool's price changes
/// (µs after the base, price per GPU-hour), when the node's heartbeats let metering run (µs after the start),
/// and how and when it ends (µs after the last heartbeat).
#[derive(Debug, Clone)]
struct History {
    start_us: i64,
    gpus: i32,
    changes: Vec<(i64, i64)>,
    heartbeats_us: Vec<i64>,
    ending: &'static str,
    end_after_us: i64,
}

fn history() -> impl proptest::strategy::Strategy<Value = History> {
    use proptest::prelude::*;
    (
        0i64..3_600_000_000,
        1i32..=8,
        proptest::collection::vec((0i64..21_600_000_000, 1i64..50_000), 0..6),
        proptest::collection::vec(0i64..2_400_000_000, 0..6),
        prop_oneof![Just("released"), Just("interrupted"), Just("expired"), Just("terminated")],
        0i64..1_800_000_000,
    )
        .prop_map(|(start_us, gpus, changes, heartbeats_us, ending, end_after_us)| History {
            start_us,
            gpus,
            changes,
            heartbeats_us,
            ending,
            end_after_us,
        })
}

/// The README's rule, by brute force: floor(sum over the whole seconds from `start` to `end` of GPUs x the
/// price in force when the second begins / 3600).
fn exact_charge(start: DateTime<Utc>, end: DateTime<Utc>, gpus: i32, prices: &[(DateTime<Utc>, i64)]) -> i64 {
    let per_hour: i128 = (0..(end - start).num_seconds())
        .map(|k| {
            let at = start + Duration::seconds(k);
            prices.iter().rev().find(|p| p.0 <= at).map_or(prices[0].1, |p| p.1) as i128 * gpus as i128
        })
        .sum();
    (per_hour / 3600) as i64
}

#[sqlx::test]
async fn billing_invariants_hold_for_random_start_stop_interrupt_and_price_change_histories(db: PgPool) {
    use proptest::strategy::{Strategy, ValueTree};
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let mut runner = proptest::test_runner::TestRunner::default();
    // Histories around the end of October, so many cross into November.
    let base = DateTime::parse_from_rfc3339("2026-10-31T21:00:00Z").unwrap().with_timezone(&Utc);
    for case in 0..12 {
        let h = history().new_tree(&mut runner).unwrap().current();
        let pool = app.pool(&op, &format!("pool-{case}"), "h100").await;
        sqlx::query(
            "UPDATE pool_prices SET effective_from = $2, price_per_gpu_hour_minor = 3600 WHERE pool_id = $1::uuid",
        )
        .bind(&pool)
        .bind(base - Duration::days(1))
        .execute(&db)
        .await
        .unwrap();
        let mut prices = vec![(base - Duration::days(1), 3600)];
        for (at, price) in &h.changes {
            let at = base + Duration::microseconds(*at);
            sqlx::query(
                "INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor) \
                         VALUES (gen_random_uuid(), $1::uuid, $2, $3) ON CONFLICT DO NOTHING",
            )
            .bind(&pool)
            .bind(at)
            .bind(price)
            .execute(&db)
            .await
            .unwrap();
            prices.push((at, *price));
        }
        prices.sort();
        let (node, _) = app.agent_node(&op, &pool, &format!("node-{case}"), 8).await;
        let id = lease(&app, &tenant, &pool, h.gpus as i64).await;
        let start = base + Duration::microseconds(h.start_us);
        sqlx::query(
            "UPDATE leases SET starts_at = $2, metered_until = $2, ends_at = $2 + interval '1 day' WHERE id = $1::uuid",
        )
        .bind(&id)
        .bind(start)
        .execute(&db)
        .await
        .unwrap();
        // Metering runs as the node's heartbeats arrive: after each, charged = floor(exact cost so far).
        let mut heard = start;
        for step in &h.heartbeats_us {
            heard += Duration::microseconds(*step);
            hear_from(&db, &node, heard).await;
            meter_once(&db).await.unwrap();
            let (metered_until,) = (metering_state(&db, &id).await.0,);
            assert!(metered_until <= heard, "{h:?}");
            assert_eq!(
                charged(&db, &id).await,
                exact_charge(start, metered_until, h.gpus, &prices),
                "{h:?} after a heartbeat"
            );
        }
        // It ends: released or terminated by someone, expired at its end time, or interrupted because the node
        // went silent after `heard` (then it ends at `heard`).
        let end = heard + Duration::microseconds(h.end_after_us);
        let lease_id = uuid::Uuid::parse_str(&id).unwrap();
        match h.ending {
            "interrupted" => {
                hear_from(&db, &node, heard).await;
                app.sweep().await;
            }
            "expired" => {
                sqlx::query("UPDATE leases SET ends_at = $2 WHERE id = $1::uuid")
                    .bind(&id)
                    .bind(end)
                    .execute(&db)
                    .await
                    .unwrap();
                gpuplane::leases::lifecycle::expire_due(&db, 100).await.unwrap();
            }
            state => {
                let to = if state == "released" {
                    gpuplane_store::leases::LeaseState::Released
                } else {
                    gpuplane_store::leases::LeaseState::Terminated
                };
                let mut conn = db.acquire().await.unwrap();
                let actor = gpuplane_store::leases::Actor::System;
                gpuplane_store::leases::ending::end_lease(&mut conn, lease_id, None, to, "test", &actor, Some(end))
                    .await
                    .unwrap()
                    .expect("ended");
            }
        }
        meter_once(&db).await.unwrap();
        meter_once(&db).await.unwrap();
        let (metered_until, ended_at) = metering_state(&db, &id).await;
        let ended_at = ended_at.unwrap_or_else(|| panic!("{h:?}: not ended"));
        let expected_end = if h.ending == "interrupted" { heard } else { end };
        assert_eq!(ended_at, expected_end, "{h:?}");
        assert_eq!(metered_until, ended_at, "{h:?}");
        assert_eq!(charged(&db, &id).await, exact_charge(start, ended_at, h.gpus, &prices), "{h:?} when ended");
        // The usage records say the same: their amounts add up to the charge, their seconds to the lease's.
        let (amount, gpu_seconds): (i64, i64) = sqlx::query_as(
            "SELECT COALESCE(sum(amount_minor), 0)::bigint, COALESCE(sum(gpu_seconds), 0)::bigint FROM usage_records \
             WHERE lease_id = $1::uuid",
        )
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
        assert_eq!(amount, charged(&db, &id).await, "{h:?}");
        assert_eq!(gpu_seconds, (ended_at - start).num_seconds() * h.gpus as i64, "{h:?}");
    }
    assert!(ledger_matches_balances(&db).await);
}

/// POST the month's invoices and try to issue each draft: (issued invoices, refusals because the month is open).
async fn invoice_month(app: &TestApp, op: &str, month: &str) -> (Vec<Value>, usize) {
    let drafts = app.post("/v1/admin/invoices", op, json!({ "month": month })).await.expect(StatusCode::OK);
    let (mut issued, mut open) = (Vec::new(), 0);
    for invoice in drafts.body.as_array().unwrap().iter().filter(|i| i["state"] == "draft") {
        assert_eq!(invoice["month"], month, "an invoice names its month as asked");
        let res =
            app.post(&format!("/v1/admin/invoices/{}/issue", invoice["id"].as_str().unwrap()), op, json!({})).await;
        if res.status == StatusCode::CONFLICT {
            res.expect_problem(StatusCode::CONFLICT, "month_open");
            assert_eq!(invoice["month_closed"], false, "{invoice}");
            open += 1;
        } else {
            let body = res.expect(StatusCode::OK).body;
            assert_eq!(body["month_closed"], true, "{body}");
            issued.push(body);
        }
    }
    (issued, open)
}

/// Usage charged to `tenant` in the month that starts at `start`: (usage records, ledger usage charges).
async fn month_usage(db: &PgPool, tenant: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT COALESCE(sum(amount_minor), 0) FROM usage_records WHERE tenant_id = $1::uuid \
                 AND period_start >= $2 AND period_start < $3)::bigint, \
                (SELECT COALESCE(-sum(amount_minor), 0) FROM ledger_entries WHERE tenant_id = $1::uuid \
                 AND kind = 'usage' AND period_at >= $2 AND period_at < $3)::bigint",
    )
    .bind(tenant)
    .bind(start)
    .bind(end)
    .fetch_one(db)
    .await
    .unwrap()
}

#[sqlx::test]
async fn an_open_month_cannot_be_issued_and_its_late_usage_lands_on_its_invoice(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": 3600 }))
        .await
        .expect(StatusCode::OK);
    backdate_prices(&db).await;
    let (node, _) = app.agent_node(&op, &pool, "node-0", 8).await;
    // A lease that started an hour before this month; its node was last heard from 40 minutes before the month
    // ended, so 20 minutes of last month are not metered yet.
    let this_month = month_start(Utc::now());
    let id = lease(&app, &tenant, &pool, 1).await;
    let start = this_month - Duration::hours(1);
    sqlx::query(
        "UPDATE leases SET starts_at = $2, metered_until = $2, ends_at = $2 + interval '2 days' WHERE id = $1::uuid",
    )
    .bind(&id)
    .bind(start)
    .execute(&db)
    .await
    .unwrap();
    hear_from(&db, &node, start + Duration::minutes(40)).await;
    meter_once(&db).await.unwrap();
    assert_eq!(charged(&db, &id).await, 40 * 60);
    let last = (this_month - Duration::days(1)).format("%Y-%m").to_string();
    let (issued, open) = invoice_month(&app, &op, &last).await;
    assert!(issued.is_empty() && open == 1, "last month is still open: 20 minutes are not metered");
    // This month has not ended: it cannot be issued whatever is metered.
    hear_from(&db, &node, Utc::now()).await;
    meter_once(&db).await.unwrap();
    let (issued, open) = invoice_month(&app, &op, &this_month.format("%Y-%m").to_string()).await;
    assert!(issued.is_empty() && open == 1);
    // Now every second of last month is metered: the draft is refreshed to the whole hour and issued.
    let (issued, open) = invoice_month(&app, &op, &last).await;
    assert_eq!(open, 0);
    assert_eq!(issued.len(), 1);
    assert_eq!(issued[0]["usage_minor"], 3600, "{}", issued[0]);
    assert_eq!(month_usage(&db, &tenant_id, this_month - Duration::days(1), this_month).await, (3600, 3600));
    // Whatever is metered from now on belongs to this month: the issued invoice never changes again.
    hear_from(&db, &node, Utc::now()).await;
    meter_once(&db).await.unwrap();
    let again = app.get(&format!("/v1/billing/invoices/{}", issued[0]["id"].as_str().unwrap()), &tenant).await;
    assert_eq!(again.expect(StatusCode::OK).body["usage_minor"], 3600);
}

/// One step of a random billing history on one agent node (see the property test below).
#[derive(Debug, Clone)]
enum Step {
    /// Time passes: the node is heard from `seconds` later and metering runs.
    Advance { seconds: i64 },
    /// A tenant (0 or 1) leases GPUs now.
    Start { tenant: usize, gpus: i64 },
    /// The `pick`-th running lease (not the first) ends now.
    End { pick: usize },
    /// An operator generates the invoices of a month (0..=3 of the history's months) and issues every draft.
    Invoice { month: usize },
}

fn steps() -> impl proptest::strategy::Strategy<Value = Vec<Step>> {
    use proptest::prelude::*;
    let step = prop_oneof![
        4 => (3_600i64..20 * 86_400).prop_map(|seconds| Step::Advance { seconds }),
        2 => (0usize..2, 1i64..=2).prop_map(|(tenant, gpus)| Step::Start { tenant, gpus }),
        2 => (0usize..8).prop_map(|pick| Step::End { pick }),
        3 => (0usize..4).prop_map(|month| Step::Invoice { month }),
    ];
    proptest::collection::vec(step, 12..30)
}

/// The billing rule of the issue "money on no invoice": whenever invoices are generated and issued during a
/// history, once its months are closed every usage charge is on exactly one issued invoice, an issued invoice
/// never changes, and the invoices add up to the ledger's usage charges. Each history runs in a year of its own
/// in the past, on its own node; its first lease runs throughout, so time ends where the node was last heard from.
#[sqlx::test]
async fn every_usage_charge_lands_on_exactly_one_issued_invoice(db: PgPool) {
    use chrono::TimeZone;
    use proptest::strategy::{Strategy, ValueTree};
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (a_id, a) = app.tenant_admin(&op, "acme").await;
    let (b_id, b) = app.tenant_admin(&op, "bolt").await;
    for id in [&a_id, &b_id] {
        app.top_up(&op, id, 900_000_000_000).await;
    }
    let tenants = [(a_id.clone(), a.clone()), (b_id.clone(), b.clone())];
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut issued_midway, mut refused) = (0, 0);
    for case in 0..4 {
        let history = steps().new_tree(&mut runner).unwrap().current();
        // A pool of its own, so each history's leases go to its node. 37 per GPU-hour: charges round, so a
        // split invoice would show in the minor units.
        let pool = app.pool(&op, &format!("h100-{case}"), "h100").await;
        sqlx::query(
            "UPDATE pool_prices SET effective_from = '1990-01-01', price_per_gpu_hour_minor = 37 WHERE pool_id = $1::uuid",
        )
        .bind(&pool)
        .execute(&db)
        .await
        .unwrap();
        let (node, _) = app.agent_node(&op, &pool, &format!("node-{case}"), 8).await;
        let base = Utc.with_ymd_and_hms(2001 + case, 1, 1, 0, 0, 0).unwrap() + Duration::hours(5);
        let months: Vec<DateTime<Utc>> =
            (1..=5).map(|m| Utc.with_ymd_and_hms(2001 + case, m, 1, 0, 0, 0).unwrap()).collect();
        let mut clock = base;
        let mut running: Vec<(String, i64)> = Vec::new();
        let mut issued: Vec<Value> = Vec::new();
        let start_lease = async |tenant: &str, gpus: i64, at: DateTime<Utc>| {
            let id = lease(&app, tenant, &pool, gpus).await;
            sqlx::query(
                "UPDATE leases SET starts_at = $2, metered_until = $2, ends_at = $2 + interval '400 days' WHERE id = $1::uuid",
            )
            .bind(&id)
            .bind(at)
            .execute(&db)
            .await
            .unwrap();
            id
        };
        hear_from(&db, &node, clock).await;
        running.push((start_lease(&a, 1, clock).await, 1));
        let end_at = async |id: &str, at: DateTime<Utc>| {
            let mut conn = db.acquire().await.unwrap();
            let lease_id = uuid::Uuid::parse_str(id).unwrap();
            let (to, actor) = (gpuplane_store::leases::LeaseState::Released, gpuplane_store::leases::Actor::System);
            gpuplane_store::leases::ending::end_lease(&mut conn, lease_id, None, to, "test", &actor, Some(at))
                .await
                .unwrap()
                .expect("ended");
        };
        for step in &history {
            match *step {
                Step::Advance { seconds } => {
                    clock = (clock + Duration::seconds(seconds)).min(months[4] - Duration::hours(1));
                    hear_from(&db, &node, clock).await;
                    meter_once(&db).await.unwrap();
                }
                Step::Start { tenant, gpus } => {
                    if running.iter().map(|r| r.1).sum::<i64>() + gpus <= 8 {
                        running.push((start_lease(&tenants[tenant].1, gpus, clock).await, gpus));
                    }
                }
                Step::End { pick } => {
                    if running.len() > 1 {
                        let (id, _) = running.remove(1 + pick % (running.len() - 1));
                        // Metering may have stopped up to a second before the clock: the lease ends at the clock.
                        end_at(&id, clock).await;
                    }
                }
                Step::Invoice { month } => {
                    let (done, open) = invoice_month(&app, &op, &months[month].format("%Y-%m").to_string()).await;
                    issued_midway += done.len();
                    refused += open;
                    issued.extend(done);
                }
            }
        }
        // The history ends: every lease ends at the clock, all is metered, and every month closes.
        for (id, _) in running.drain(..) {
            end_at(&id, clock).await;
        }
        meter_once(&db).await.unwrap();
        for month in &months[..4] {
            let (done, open) = invoice_month(&app, &op, &month.format("%Y-%m").to_string()).await;
            assert_eq!(open, 0, "{history:?}: every month is closed once all is metered");
            issued.extend(done);
        }
        // An issued invoice never changed, and its lines add up to it.
        for invoice in &issued {
            let id = invoice["id"].as_str().unwrap();
            let now = app.get(&format!("/v1/admin/invoices?month={}", invoice["month"].as_str().unwrap()), &op).await;
            let now = now.body.as_array().unwrap().iter().find(|i| i["id"] == id).unwrap().clone();
            assert_eq!(now["usage_minor"], invoice["usage_minor"], "{history:?}: issued invoice {id} changed");
            let lines: i64 = now["lines"].as_array().unwrap().iter().map(|l| l["amount_minor"].as_i64().unwrap()).sum();
            assert_eq!(lines, now["usage_minor"].as_i64().unwrap());
        }
        // Every month's usage is on exactly one issued invoice per tenant, equal to the ledger's usage charges.
        for (tenant_id, _) in &tenants {
            for window in months.windows(2).take(4) {
                let (records, ledger) = month_usage(&db, tenant_id, window[0], window[1]).await;
                assert_eq!(records, ledger);
                let on_invoices: Vec<i64> = issued
                    .iter()
                    .filter(|i| {
                        i["tenant_id"] == tenant_id.as_str() && i["month"] == window[0].format("%Y-%m").to_string()
                    })
                    .map(|i| i["usage_minor"].as_i64().unwrap())
                    .collect();
                if records == 0 {
                    assert!(on_invoices.iter().all(|u| *u == 0), "{history:?}");
                } else {
                    assert_eq!(on_invoices, [records], "{history:?}: {tenant_id} {}", window[0]);
                }
            }
        }
    }
    // The histories both issued invoices before they ended and were refused while a month was open.
    assert!(issued_midway > 0 && refused > 0, "issued midway {issued_midway}, refused {refused}");
    assert!(ledger_matches_balances(&db).await);
}
