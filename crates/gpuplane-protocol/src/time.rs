//! Instants on the wire: every timestamp a request names lies within years 1970-9999, for the service and the
//! agent alike.

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Deserializer};

/// Earliest instant any request may name: the Unix epoch. Nothing in this service predates it.
pub const MIN_TIME: &str = "1970-01-01T00:00:00Z";
/// Latest instant any request may name: the end of year 9999, so every date prints as four digits and every
/// sum of a request date and a lease term stays far inside what chrono and PostgreSQL represent.
pub const MAX_TIME: &str = "9999-12-31T23:59:59Z";

/// Is `t` within [`MIN_TIME`, `MAX_TIME`]?
pub fn is_sane_time(t: &DateTime<Utc>) -> bool {
    (1970..=9999).contains(&t.year())
}

/// `#[serde(deserialize_with = "gpuplane_protocol::time::sane_time")]`: an RFC 3339 instant within years 1970-9999.
pub fn sane_time<'de, D: Deserializer<'de>>(de: D) -> Result<DateTime<Utc>, D::Error> {
    let t = DateTime::<Utc>::deserialize(de)?;
    if is_sane_time(&t) {
        Ok(t)
    } else {
        Err(serde::de::Error::custom(format!("must be between {MIN_TIME} and {MAX_TIME}")))
    }
}

/// [`sane_time`] for optional fields (`#[serde(default, deserialize_with = "gpuplane_protocol::time::sane_time_opt")]`).
pub fn sane_time_opt<'de, D: Deserializer<'de>>(de: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    #[derive(Deserialize)]
    struct Wrapper(#[serde(deserialize_with = "sane_time")] DateTime<Utc>);
    Ok(Option::<Wrapper>::deserialize(de)?.map(|w| w.0))
}
