//! Operators' custom launch templates, versioned by name.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

use crate::StoreResult;

/// A custom template's version as stored (its parameters as JSON: their type is the server's).
pub struct TemplateRow {
    pub name: String,
    pub version: i32,
    pub description: String,
    pub argv: Vec<String>,
    pub parameters: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// The latest version of each custom template, by name.
pub async fn latest_templates(conn: &mut PgConnection) -> StoreResult<Vec<TemplateRow>> {
    let rows = sqlx::query!(
        r#"SELECT DISTINCT ON (name) name, version, description, argv AS "argv: Json<Vec<String>>", parameters,
             created_at FROM job_templates
         ORDER BY name, version DESC"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| TemplateRow {
            name: r.name,
            version: r.version,
            description: r.description,
            argv: r.argv.0,
            parameters: r.parameters,
            created_at: r.created_at,
        })
        .collect())
}

/// Take the transaction's lock on a template name, so that its versions are numbered one at a time.
pub async fn lock_template_name(conn: &mut PgConnection, name: &str) -> StoreResult<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtextextended('template:' || $1, 0))", name).execute(conn).await?;
    Ok(())
}

/// Insert the next version of a custom template (the first under a new name); the caller holds the name's lock.
pub async fn insert_template_version(
    conn: &mut PgConnection,
    id: Uuid,
    name: &str,
    description: &str,
    argv: &[String],
    parameters: &(impl Serialize + Sync),
    created_by: Uuid,
) -> StoreResult<TemplateRow> {
    let r = sqlx::query!(
        r#"INSERT INTO job_templates (id, name, version, description, argv, parameters, created_by)
         SELECT $1, $2, COALESCE(max(version), 0) + 1, $3, $4, $5, $6 FROM job_templates WHERE name = $2
         RETURNING name, version, description, argv AS "argv: Json<Vec<String>>", parameters, created_at"#,
        id,
        name,
        description,
        Json(argv) as _,
        Json(parameters) as _,
        created_by
    )
    .fetch_one(conn)
    .await?;
    Ok(TemplateRow {
        name: r.name,
        version: r.version,
        description: r.description,
        argv: r.argv.0,
        parameters: r.parameters,
        created_at: r.created_at,
    })
}

/// A custom template's version (the latest without `version`): its number, argv and parameters (as JSON).
pub async fn template_version(
    conn: &mut PgConnection,
    name: &str,
    version: Option<i32>,
) -> StoreResult<Option<(i32, Vec<String>, serde_json::Value)>> {
    let row = sqlx::query!(
        r#"SELECT version, argv AS "argv: Json<Vec<String>>", parameters FROM job_templates
         WHERE name = $1 AND ($2::int IS NULL OR version = $2)
         ORDER BY version DESC LIMIT 1"#,
        name,
        version
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.version, r.argv.0, r.parameters)))
}
