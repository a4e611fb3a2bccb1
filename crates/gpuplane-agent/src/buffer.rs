//! Reports waiting for delivery (GPU samples, jobs' measured steps): a bounded queue that drops the oldest when
//! the service stays away too long.

use std::collections::VecDeque;

use gpuplane_protocol::agent::GpuSample;

/// Oldest first. Bounded, so an agent cut off from the service for days cannot exhaust the host's memory.
#[derive(Debug)]
pub struct Bounded<T> {
    samples: VecDeque<T>,
    capacity: usize,
    dropped_total: u64,
}

/// GPU samples waiting for a heartbeat.
pub type SampleBuffer = Bounded<GpuSample>;

impl<T: Clone> Bounded<T> {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self { samples: VecDeque::with_capacity(capacity.min(4096)), capacity, dropped_total: 0 }
    }

    /// Append `samples`; returns how many of the oldest were dropped to stay within the capacity.
    pub fn push_all(&mut self, samples: impl IntoIterator<Item = T>) -> usize {
        let mut dropped = 0;
        for sample in samples {
            if self.samples.len() == self.capacity {
                self.samples.pop_front();
                dropped += 1;
            }
            self.samples.push_back(sample);
        }
        self.dropped_total += dropped as u64;
        dropped
    }

    /// The oldest `max` samples, left in place until [`Self::remove_oldest`] confirms their delivery.
    pub fn oldest(&self, max: usize) -> Vec<T> {
        self.samples.iter().take(max).cloned().collect()
    }

    /// Forget the oldest `count` samples (delivered, or rejected by the service).
    pub fn remove_oldest(&mut self, count: usize) {
        self.samples.drain(..count.min(self.samples.len()));
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Samples lost to the bound since the agent started.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn sample(gpu_index: i32) -> GpuSample {
        GpuSample {
            gpu_index,
            at: Utc::now(),
            gpu_util: 0.0,
            mem_copy_util: 0.0,
            fb_used_mib: 0,
            fb_free_mib: 0,
            power_w: 0.0,
            energy_mj: 0,
            gpu_temp_c: 30.0,
            mem_temp_c: None,
            sm_clock_mhz: 1400,
            nvlink_bandwidth_gbps: None,
            xid_count: 0,
            xid_codes: vec![],
        }
    }

    fn indexes(samples: &[GpuSample]) -> Vec<i32> {
        samples.iter().map(|s| s.gpu_index).collect()
    }

    #[test]
    fn bounded_and_drops_the_oldest() {
        let mut buffer = SampleBuffer::new(3);
        assert_eq!(buffer.push_all((0..2).map(sample)), 0);
        assert_eq!(buffer.push_all((2..5).map(sample)), 2);
        assert_eq!(buffer.len(), 3);
        assert_eq!(indexes(&buffer.oldest(10)), vec![2, 3, 4]);
        assert_eq!(buffer.push_all([sample(5)]), 1);
        assert_eq!(buffer.dropped_total(), 3);
        assert_eq!(indexes(&buffer.oldest(10)), vec![3, 4, 5]);
    }

    #[test]
    fn sends_oldest_first_and_keeps_them_until_confirmed() {
        let mut buffer = SampleBuffer::new(100);
        buffer.push_all((0..10).map(sample));
        let batch = buffer.oldest(4);
        assert_eq!(indexes(&batch), vec![0, 1, 2, 3]);
        assert_eq!(buffer.len(), 10, "a failed send loses nothing");
        // Sampling continues while a batch is in flight; confirming removes exactly the batch.
        buffer.push_all([sample(10)]);
        buffer.remove_oldest(batch.len());
        assert_eq!(indexes(&buffer.oldest(100)), (4..=10).collect::<Vec<_>>());
        buffer.remove_oldest(1000);
        assert!(buffer.is_empty());
    }
}
