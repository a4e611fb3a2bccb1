//! Sealed secrets at rest.
