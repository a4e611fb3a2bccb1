//! Idempotency keys: replayed responses.
