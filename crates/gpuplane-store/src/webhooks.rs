//! Webhooks: where a delivery stands.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its first attempt or a retry.
    Pending,
    Succeeded,
    /// Every scheduled attempt failed (a manual retry makes it pending again).
    Failed,
}
