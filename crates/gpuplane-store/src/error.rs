//! What a store call can fail with: the database's own error, with the two questions callers ask of it.

/// A failed statement. Callers map it to what it means for them: a named constraint to a precise client error,
/// an unavailable database to a retry, anything else to an internal error.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct StoreError(#[from] pub sqlx::Error);

impl StoreError {
    /// The named constraint the statement violated, if that is why it failed. Constraint names are the
    /// contract between the migrations and the callers (see `migrations/0001_foundation.sql`).
    pub fn constraint(&self) -> Option<&str> {
        constraint_name(&self.0)
    }

    /// Is this a lost or unobtainable connection, which may well succeed on retry? See [`is_unavailable`].
    pub fn is_unavailable(&self) -> bool {
        is_unavailable(&self.0)
    }
}

/// Is this database failure a lost or unobtainable connection (the request may well succeed on retry) rather
/// than a fault of the request or the code? Pool exhaustion, I/O and TLS failures, and the server refusing or
/// dropping connections (SQLSTATE classes 08 and 57P, 53300 too many connections).
pub fn is_unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|code| code.starts_with("08") || code.starts_with("57P") || code == "53300")
        }
        _ => false,
    }
}

/// The named constraint a failed statement violated, if that is why it failed.
pub fn constraint_name(err: &sqlx::Error) -> Option<&str> {
    match err {
        sqlx::Error::Database(db) => db.constraint(),
        _ => None,
    }
}

impl From<StoreError> for sqlx::Error {
    fn from(err: StoreError) -> Self {
        err.0
    }
}
