//! The committed OpenAPI document must equal what the code generates. Regenerate with
//! `UPDATE_OPENAPI=1 cargo test openapi` (or `cargo run -- openapi > openapi/openapi.json`).

use serde_json::Value;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");

#[test]
fn committed_openapi_matches_the_code() {
    let generated = serde_json::to_string_pretty(&gpuplane::router::openapi_document()).unwrap() + "\n";
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(COMMITTED, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: run `UPDATE_OPENAPI=1 cargo test openapi` and commit the result"
    );
}

#[test]
fn every_operation_is_described_for_client_generators() {
    let doc: Value = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    let cookie = &doc["components"]["securitySchemes"]["console_session"];
    assert_eq!(
        (&cookie["type"], &cookie["in"], &cookie["name"]),
        (&"apiKey".into(), &"cookie".into(), &"gp_session".into())
    );
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has an operationId"));
            assert!(ids.insert(id.to_string()), "operationId {id} is unique");
            assert!(op["tags"].as_array().is_some_and(|t| !t.is_empty()), "{id} is tagged");
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.contains_key("500"), "{id} documents 500");
            for (status, response) in responses {
                let described = response.get("description").is_some() || response.get("$ref").is_some();
                assert!(described, "{id} {status} has a description");
            }
            let public = [
                "create_token",
                "create_console_session",
                "delete_console_session",
                "get_healthz",
                "get_readyz",
                "get_metrics",
                "register_agent",
            ]
            .contains(&id);
            if id == "register_agent" {
                // Anonymous (a join token in the body), or the node's own credential as proof of identity.
                assert_eq!(op["security"], serde_json::json!([{}, { "bearer": [] }]), "{id} security");
            } else if public {
                assert!(op.get("security").is_none(), "{id} security");
            } else if path.starts_with("/v1/agent/") {
                // Agent credentials only: the console's session cookie is a user's.
                assert_eq!(op["security"], serde_json::json!([{ "bearer": [] }]), "{id} security");
            } else {
                let security = serde_json::json!([{ "bearer": [] }, { "console_session": [] }]);
                assert_eq!(op["security"], security, "{id} security: a bearer token or the console's cookie");
            }
            if !public {
                assert!(responses.contains_key("401") && responses.contains_key("403"), "{id} documents auth errors");
            }
            if op.get("requestBody").is_some() {
                assert!(responses.contains_key("422"), "{id} documents validation errors");
            }
        }
    }
    assert!(ids.len() >= 20, "{} operations", ids.len());
}

#[test]
fn every_reference_resolves() {
    let doc: Value = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    let mut refs = Vec::new();
    fn walk(v: &Value, refs: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    refs.push(r.clone());
                }
                map.values().for_each(|v| walk(v, refs));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, refs)),
            _ => {}
        }
    }
    walk(&doc, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("external reference {r}"));
        assert!(doc.pointer(pointer).is_some(), "{r} points nowhere");
    }
}

/// Every string a request can carry states what the server accepts: a pattern (at least "no control
/// characters"), a format or an enum. Otherwise generated clients and fuzzers send text the server refuses.
#[test]
fn every_request_string_is_constrained() {
    let doc: Value = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let mut loose = Vec::new();
    fn walk(v: &Value, path: &str, schemas: &Value, seen: &mut Vec<String>, loose: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    let name = r.trim_start_matches("#/components/schemas/").to_string();
                    if !seen.contains(&name) {
                        seen.push(name.clone());
                        walk(&schemas[&name], &name, schemas, seen, loose);
                    }
                    return;
                }
                let is_string = match map.get("type") {
                    Some(Value::String(t)) => t == "string",
                    Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                    _ => false,
                };
                if is_string && !["pattern", "format", "enum", "const"].iter().any(|k| map.contains_key(*k)) {
                    loose.push(path.to_string());
                }
                for (k, child) in map {
                    walk(child, &format!("{path}/{k}"), schemas, seen, loose);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, path, schemas, seen, loose)),
            _ => {}
        }
    }
    let mut seen = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let here = format!("{method} {path}");
            walk(&op["requestBody"], &here, schemas, &mut seen, &mut loose);
            walk(&op["parameters"], &here, schemas, &mut seen, &mut loose);
        }
    }
    assert!(seen.len() > 20, "request schemas were walked: {seen:?}");
    assert!(loose.is_empty(), "request strings without pattern, format or enum: {loose:?}");
}
