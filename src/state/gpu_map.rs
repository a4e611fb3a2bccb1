//! The heartbeat handlers' cache of each node's GPU ids, valid for one credential generation. A leaf.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

/// A node's GPUs as (index, GPU id), sorted by index.
pub type GpuMap = Arc<Vec<(i32, Uuid)>>;

/// GPU index -> GPU id for each node, valid for one credential generation. Shared by the heartbeat handlers
/// of one process; a stale entry is harmless because every write is also checked against the generation.
#[derive(Default)]
pub struct GpuMapCache {
    inner: RwLock<HashMap<Uuid, (i64, GpuMap)>>,
}

impl GpuMapCache {
    pub fn get(&self, node_id: Uuid, generation: i64) -> Option<GpuMap> {
        let map = self.inner.read().unwrap_or_else(|e| e.into_inner());
        map.get(&node_id).filter(|(g, _)| *g == generation).map(|(_, v)| v.clone())
    }

    /// Store the map (sorted by index) and return it.
    pub fn insert(&self, node_id: Uuid, generation: i64, mut gpus: Vec<(i32, Uuid)>) -> GpuMap {
        gpus.sort_unstable();
        let gpus = Arc::new(gpus);
        let mut map = self.inner.write().unwrap_or_else(|e| e.into_inner());
        map.insert(node_id, (generation, gpus.clone()));
        gpus
    }

    pub fn forget(&self, node_id: Uuid) {
        let mut map = self.inner.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&node_id);
    }
}
