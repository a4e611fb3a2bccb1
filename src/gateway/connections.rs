//! Idle HTTP/1.1 connections to replicas' forwarders, kept for the next request to the same replica: a request
//! then costs no TCP connection, token exchange or server connection of the forwarder's.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::body::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use uuid::Uuid;

/// Idle connections kept per replica (more at once are closed when their answer ends).
const IDLE_PER_REPLICA: usize = 64;

pub type Sender = SendRequest<Full<Bytes>>;

#[derive(Default)]
pub struct Connections {
    idle: Mutex<HashMap<Uuid, Vec<Sender>>>,
}

impl Connections {
    /// An idle connection to `replica` that is still open, if any.
    pub fn take(&self, replica: Uuid) -> Option<Sender> {
        let mut idle = self.idle.lock().ok()?;
        let senders = idle.get_mut(&replica)?;
        while let Some(sender) = senders.pop() {
            if !sender.is_closed() && sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    /// A connection whose answer was read to its end goes back for the next request.
    pub fn put(&self, replica: Uuid, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            let senders = idle.entry(replica).or_default();
            if senders.len() < IDLE_PER_REPLICA {
                senders.push(sender);
            }
        }
    }

    /// Forget replicas that are no longer ready (their connections close as they drop).
    pub fn retain(&self, ready: &[Uuid]) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.retain(|id, senders| {
                senders.retain(|s| !s.is_closed());
                ready.contains(id) && !senders.is_empty()
            });
        }
    }
}
