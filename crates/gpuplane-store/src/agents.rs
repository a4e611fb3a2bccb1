//! What node agents write and read: registration, heartbeats, telemetry, holds.
