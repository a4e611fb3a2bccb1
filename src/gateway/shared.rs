//! What the gateway's handlers share: the application's state, and this process's balancer and rate limits.

use std::sync::Arc;

use crate::state::AppState;

#[derive(Clone)]
pub struct Gateway {
    pub state: AppState,
    pub balancer: Arc<super::balancer::Balancer>,
    pub limits: Arc<super::limits::Limits>,
    pub connections: Arc<super::connections::Connections>,
    pub tally: Arc<super::tally::Tally>,
}

impl Gateway {
    pub fn new(state: AppState) -> Self {
        Gateway {
            state,
            balancer: Arc::default(),
            limits: Arc::default(),
            connections: Arc::default(),
            tally: Arc::default(),
        }
    }
}
