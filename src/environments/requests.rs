//! What the environments API accepts.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartEnvironmentRequest {
    /// Run the SSH server from this image (it must have `/usr/sbin/sshd`); default: the host's, in the sandbox.
    #[serde(default)]
    #[schema(max_length = 255, pattern = "^[A-Za-z0-9._/:@][A-Za-z0-9._/:@-]*$")]
    pub image: Option<String>,
}
