//! Strict requests: every JSON request body refuses the fields its schema does not name. The document states it
//! (`additionalProperties: false` on every object a request body can hold) and the server agrees: each operation
//! with a JSON body, sent one unknown field, answers 422 naming that field and changes nothing.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

/// Objects a request may carry with fields of their own: a Hugging Face `config.json` is the checkpoint's file,
/// sent as it is (the planner reads the fields it names and ignores the rest).
const OPEN_SCHEMAS: &[&str] = &["HfConfig"];

fn document() -> Value {
    serde_json::to_value(gpuplane::router::openapi_document()).unwrap()
}

/// Every object schema reachable from `schema`, with the first path that reaches it; open ones are not entered.
fn objects<'a>(
    doc: &'a Value,
    schema: &'a Value,
    at: &str,
    seen: &mut Vec<String>,
    out: &mut Vec<(String, &'a Value)>,
) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        if seen.iter().any(|s| s == name) || OPEN_SCHEMAS.contains(&name) {
            return;
        }
        seen.push(name.to_string());
        return objects(doc, &doc["components"]["schemas"][name], name, seen, out);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for branch in schema[key].as_array().into_iter().flatten() {
            objects(doc, branch, at, seen, out);
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        out.push((at.to_string(), schema));
        for (name, property) in properties {
            objects(doc, property, &format!("{at}.{name}"), seen, out);
        }
    }
    if schema["additionalProperties"].is_object() {
        objects(doc, &schema["additionalProperties"], &format!("{at}.*"), seen, out);
    }
    if schema["items"].is_object() {
        objects(doc, &schema["items"], &format!("{at}[]"), seen, out);
    }
}

/// (method, path, operation) of every operation with a JSON request body.
fn operations_with_bodies(doc: &Value) -> Vec<(String, String, Value)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op["requestBody"]["content"]["application/json"].is_object() {
                ops.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    ops
}

#[test]
fn every_object_a_request_body_holds_refuses_other_fields() {
    let doc = document();
    let mut open = Vec::new();
    let mut checked = 0;
    for (method, path, op) in operations_with_bodies(&doc) {
        let mut found = Vec::new();
        objects(&doc, &op["requestBody"]["content"]["application/json"]["schema"], "body", &mut Vec::new(), &mut found);
        for (at, schema) in found {
            checked += 1;
            if schema["additionalProperties"] != json!(false) {
                open.push(format!("{method} {path}: {at}"));
            }
        }
    }
    assert!(checked > 40, "the walk reached the request schemas: {checked}");
    assert!(open.is_empty(), "request objects that do not state additionalProperties: false:\n{}", open.join("\n"));
}

#[sqlx::test]
async fn the_server_refuses_an_unknown_field_in_every_request_body(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "strict").await;
    let pool = app.pool(&op, "strict-pool", "h100").await;
    let (_, agent) = app.agent_node(&op, &pool, "strict-node", 2).await;
    let doc = document();
    let mut wrong = Vec::new();
    let ops = operations_with_bodies(&doc);
    for (method, path, operation) in &ops {
        // Ids in the path: any well-formed one (the body is read before anything is looked up).
        let uri = path
            .split('/')
            .map(|part| if part.starts_with('{') { "01a20000-0000-7000-8000-000000000000" } else { part })
            .collect::<Vec<_>>()
            .join("/");
        let secured = operation["security"].as_array().is_none_or(|s| !s.is_empty());
        let token = if !secured {
            None
        } else if path.starts_with("/v1/admin/") {
            Some(op.as_str())
        } else if path.starts_with("/v1/agent/") {
            Some(agent.as_str())
        } else {
            Some(tenant.as_str())
        };
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let res = app.call(method.clone(), &uri, token, Some(json!({ "zz_not_a_field": 1 }))).await;
        let named = res.error_fields().iter().any(|f| f == "zz_not_a_field");
        if res.status != StatusCode::UNPROCESSABLE_ENTITY || !named {
            wrong.push(format!("{method} {path}: {} {}", res.status, res.body));
        }
    }
    assert!(ops.len() > 30, "{} operations with a body", ops.len());
    assert!(wrong.is_empty(), "operations that did not refuse the unknown field:\n{}", wrong.join("\n"));
}

#[sqlx::test]
async fn a_misspelt_pin_is_refused_where_it_is_and_plans_nothing(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "typo").await;
    let body = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "train" },
                       "cluster": { "gpu": "h100", "gpus": 8 }, "pins": { "TP": 2 } });
    let res = app
        .post("/v1/plans", &tenant, body)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), ["pins.TP"], "{}", res.body);
    let message = res.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("unknown field; expected one of") && message.contains("`tp`"), "{message}");
    // A nested architecture field and a top-level one are named at their own paths.
    let body = json!({ "model": { "architecture": { "layers": 2, "hidden": 64, "heads": 2, "kv_heads": 2, "ffn": 128,
                       "vocab": 100, "hiden": 64 } }, "workload": { "kind": "train" }, "cluster": { "gpu": "h100", "gpus": 8 } });
    let res = app.post("/v1/plans", &tenant, body).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(res.error_fields(), ["model.architecture.hiden"], "{}", res.body);
    // A checkpoint's config.json keeps its own fields.
    let body = json!({ "model": { "hf_config": { "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
                       "rope_theta": 10000.0, "torch_dtype": "bfloat16", "architectures": ["LlamaForCausalLM"] } },
                       "workload": { "kind": "train" }, "cluster": { "gpu": "h100", "gpus": 8 } });
    app.post("/v1/plans", &tenant, body).await.expect(StatusCode::OK);
}

#[sqlx::test]
async fn an_empty_lease_change_is_refused_as_the_schema_says(db: PgPool) {
    let doc = document();
    let required = &doc["components"]["schemas"]["UpdateLeaseRequest"]["required"];
    assert_eq!(required, &json!(["idle_release_after_minutes"]), "the schema states the field the server requires");
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "patch").await;
    let pool = app.pool(&op, "patch-pool", "h100").await;
    app.node(&op, &pool, "patch-node", 2).await;
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let id = lease["id"].as_str().unwrap();
    let res = app.patch(&format!("/v1/leases/{id}"), &tenant, json!({})).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(res.error_fields(), ["idle_release_after_minutes"], "{}", res.body);
}

/// A checkpoint's config.json with hostile numbers (past every bound, past u64, negative, fractional, zero) is a
/// 422 naming the field, never a 500 or a panic, from every endpoint that plans.
#[sqlx::test]
async fn a_config_json_with_hostile_numbers_is_422_never_500(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "hostile").await;
    let base = json!({ "model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000 });
    let hostile: [(&str, Value); 8] = [
        ("hidden_size", json!(u64::MAX)),
        ("num_hidden_layers", json!(1u64 << 62)),
        ("vocab_size", json!(1e300)),
        ("intermediate_size", json!(-1)),
        ("num_attention_heads", json!(0)),
        ("num_key_value_heads", json!(3)),
        ("head_dim", json!(0.5)),
        ("num_local_experts", json!(u64::MAX)),
    ];
    for (field, value) in hostile {
        let mut config = base.clone();
        config[field] = value.clone();
        for path in ["/v1/plans", "/v1/advice"] {
            let body = if path == "/v1/plans" {
                json!({ "model": { "hf_config": config }, "workload": { "kind": "train" },
                        "cluster": { "gpu": "h100", "gpus": 8 } })
            } else {
                json!({ "model": { "hf_config": config }, "workload": { "kind": "train" },
                        "target": { "training_tokens": 1000000 } })
            };
            let res = app.post(path, &tenant, body).await;
            assert!(res.status.is_client_error(), "{path} {field}={value}: {} {}", res.status, res.body);
            assert!(
                res.error_fields().iter().any(|f| f.starts_with("model")),
                "{path} {field}={value}: names the model: {}",
                res.body
            );
        }
    }
}
