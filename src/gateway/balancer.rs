//! Which replica takes the next request: the fewest requests outstanding (from this gateway process), ties taken
//! in turn; a replica that could not be reached is left out for a while and tried again after. Pure state, no I/O.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

/// How long a replica that could not be reached is passed over (unless every replica is).
pub const EJECT_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct ReplicaState {
    outstanding: u32,
    ejected_until: Option<Instant>,
    /// When it last took a request: ties go to the one idle longest.
    last_picked: Option<Instant>,
}

#[derive(Debug, Default)]
pub struct Balancer {
    replicas: Mutex<HashMap<Uuid, ReplicaState>>,
}

/// Counts one request outstanding on a replica until dropped (the answer's body ended or the caller left).
pub struct Outstanding {
    balancer: Arc<Balancer>,
    replica: Uuid,
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        if let Ok(mut replicas) = self.balancer.replicas.lock()
            && let Some(state) = replicas.get_mut(&self.replica)
        {
            state.outstanding = state.outstanding.saturating_sub(1);
        }
    }
}

impl Balancer {
    /// The ready replicas in the order to try them: those not left out, fewest outstanding first (ties: the one
    /// picked longest ago); then those left out, soonest back first (a last resort, not a refusal).
    pub fn order(&self, ready: &[Uuid], now: Instant) -> Vec<Uuid> {
        let Ok(mut replicas) = self.replicas.lock() else { return ready.to_vec() };
        // Forget replicas that are gone and idle (the map stays the size of what is served).
        replicas.retain(|id, s| s.outstanding > 0 || ready.contains(id));
        // (left out, until when, outstanding, last picked, id): sorted, the order to try them in.
        type Rank = (bool, Option<Instant>, u32, Option<Instant>, Uuid);
        let mut candidates: Vec<Rank> = ready
            .iter()
            .map(|id| {
                let s = replicas.entry(*id).or_default();
                let ejected = s.ejected_until.is_some_and(|until| until > now);
                (ejected, s.ejected_until.filter(|_| ejected), s.outstanding, s.last_picked, *id)
            })
            .collect();
        candidates.sort();
        candidates.into_iter().map(|c| c.4).collect()
    }

    /// A request goes to `replica`: counted until the guard drops.
    pub fn begin(self: &Arc<Self>, replica: Uuid, now: Instant) -> Outstanding {
        if let Ok(mut replicas) = self.replicas.lock() {
            let state = replicas.entry(replica).or_default();
            state.outstanding += 1;
            state.last_picked = Some(now);
        }
        Outstanding { balancer: self.clone(), replica }
    }

    /// `replica` could not be reached: pass it over until `now + EJECT_FOR`.
    pub fn eject(&self, replica: Uuid, now: Instant) {
        if let Ok(mut replicas) = self.replicas.lock() {
            replicas.entry(replica).or_default().ejected_until = Some(now + EJECT_FOR);
        }
    }

    /// `replica` answered: it is back (its ejection, if any, ends).
    pub fn reached(&self, replica: Uuid) {
        if let Ok(mut replicas) = self.replicas.lock()
            && let Some(state) = replicas.get_mut(&replica)
        {
            state.ejected_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_busy_replica_goes_first_and_an_unreachable_one_last_until_its_time_is_up() {
        let balancer = Arc::new(Balancer::default());
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let t0 = Instant::now();
        let ready = [a, b, c];
        let first = balancer.order(&ready, t0)[0];
        let g1 = balancer.begin(first, t0);
        let second = balancer.order(&ready, t0)[0];
        assert_ne!(first, second, "a busy replica is not picked while another is idle");
        let g2 = balancer.begin(second, t0 + Duration::from_millis(1));
        let third = balancer.order(&ready, t0)[0];
        assert!(third != first && third != second);
        let _g3 = balancer.begin(third, t0 + Duration::from_millis(2));
        // All have one: the one picked longest ago is next.
        assert_eq!(balancer.order(&ready, t0)[0], first);
        drop(g2);
        assert_eq!(balancer.order(&ready, t0)[0], second, "its answer ended: it is the least busy now");
        drop(g1);

        balancer.eject(second, t0);
        let order = balancer.order(&ready, t0 + Duration::from_secs(1));
        assert_eq!(*order.last().unwrap(), second, "left out while ejected, but still a last resort");
        assert_eq!(order.len(), 3);
        let later = balancer.order(&ready, t0 + EJECT_FOR + Duration::from_secs(1));
        assert_eq!(later[..2], [first, second], "back after its time: idle, so before the busy one");
        balancer.eject(first, t0);
        balancer.reached(first);
        assert_ne!(*balancer.order(&ready, t0).last().unwrap(), first, "an answer ends the ejection");
    }

    #[test]
    fn replicas_that_left_are_forgotten_once_idle() {
        let balancer = Arc::new(Balancer::default());
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = Instant::now();
        let guard = balancer.begin(a, now);
        assert_eq!(balancer.order(&[b], now), vec![b]);
        assert_eq!(balancer.replicas.lock().unwrap().len(), 2, "a is busy: kept");
        drop(guard);
        balancer.order(&[b], now);
        assert_eq!(balancer.replicas.lock().unwrap().len(), 1);
    }
}
