//! The packed form of raw telemetry: one fixed-width little-endian record of [`RECORD_LEN`] bytes per GPU, a
//! node's GPUs at one instant concatenated (ordered by GPU index) into the `samples` bytea of one
//! `telemetry_raw` row (`migrations/0014_packed_telemetry.sql`). Per-field arrays cost a ~24-byte header each
//! and 2-4 bytes per value; this costs 25 bytes per GPU in all, which keeps a stored GPU sample (heap and
//! primary key) under 40 bytes.
//!
//! | offset | bytes | field | unit / encoding |
//! |---:|---:|---|---|
//! | 0 | 1 | GPU index | 0-63 |
//! | 1 | 1 | gpu_util | half percent (0-200) |
//! | 2 | 1 | mem_copy_util | half percent (0-200) |
//! | 3 | 4 | fb_used_mib | MiB |
//! | 7 | 4 | fb_free_mib | MiB |
//! | 11 | 2 | power_w | 1/10 W (0-6553.5 W) |
//! | 13 | 4 | energy | joules modulo 2^32 (a counter: differences modulo 2^32 stay exact through one wrap) |
//! | 17 | 1 | gpu_temp_c | Celsius + 40 (-40 to 214 C) |
//! | 18 | 1 | mem_temp_c | Celsius + 40; 255: not reported |
//! | 19 | 2 | sm_clock_mhz | MHz |
//! | 21 | 2 | nvlink_bandwidth_gbps | 1/10 GB/s (0-6553.4); 65535: no NVLink |
//! | 23 | 2 | xid_count | events |
//!
//! Values are rounded to the nearest step; what the heartbeat validation lets through but a field cannot hold
//! is clamped to the field's range: NVLink bandwidth above 6553.4 GB/s, more than 65,535 XID events in one
//! interval (the codes themselves go in the row's `xids` column, uncapped). DCGM reports utilization and
//! temperatures as whole numbers, so for real agents only power, NVLink bandwidth and energy (to the joule) are
//! rounded at all.
//!
//! This module is the writer and the reference reader; SQL reads the same layout with the function
//! `telemetry_decode(bytea)` (migration 0014), and a database test checks that both read alike.

use super::protocol::GpuSample;

/// Bytes per GPU record.
pub const RECORD_LEN: usize = 25;

/// `mem_temp_c` not reported.
const NO_TEMP: u8 = u8::MAX;
/// No NVLink.
const NO_NVLINK: u16 = u16::MAX;

/// One GPU's sample as stored: the protocol's fields in their units, after rounding and clamping.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoredSample {
    pub gpu_index: i32,
    pub gpu_util: f32,
    pub mem_copy_util: f32,
    pub fb_used_mib: i64,
    pub fb_free_mib: i64,
    pub power_w: f32,
    /// Joules modulo 2^32.
    pub energy_j: u32,
    pub gpu_temp_c: f32,
    pub mem_temp_c: Option<f32>,
    pub sm_clock_mhz: i32,
    pub nvlink_bandwidth_gbps: Option<f32>,
    pub xid_count: i32,
}

/// `v * scale` rounded, clamped to `0..=max` (NaN: 0).
fn quantize(v: f32, scale: f32, max: u16) -> u16 {
    ((v * scale).round() as i64).clamp(0, i64::from(max)) as u16
}

fn celsius(v: f32) -> u8 {
    quantize(v + 40.0, 1.0, u16::from(NO_TEMP) - 1) as u8
}

/// Append the record of GPU `gpu_index`'s sample `s` to `out`.
pub fn encode(gpu_index: i32, s: &GpuSample, out: &mut Vec<u8>) {
    out.push(gpu_index.clamp(0, 255) as u8);
    out.push(quantize(s.gpu_util, 2.0, 200) as u8);
    out.push(quantize(s.mem_copy_util, 2.0, 200) as u8);
    out.extend_from_slice(&(s.fb_used_mib.clamp(0, i64::from(u32::MAX)) as u32).to_le_bytes());
    out.extend_from_slice(&(s.fb_free_mib.clamp(0, i64::from(u32::MAX)) as u32).to_le_bytes());
    out.extend_from_slice(&quantize(s.power_w, 10.0, u16::MAX).to_le_bytes());
    // Joules modulo 2^32: the counter's low bits, so a difference stays exact through one wrap.
    out.extend_from_slice(&((s.energy_mj.max(0) / 1000) as u64 as u32).to_le_bytes());
    out.push(celsius(s.gpu_temp_c));
    out.push(s.mem_temp_c.map_or(NO_TEMP, celsius));
    out.extend_from_slice(&(s.sm_clock_mhz.clamp(0, i32::from(u16::MAX)) as u16).to_le_bytes());
    let nvlink = s.nvlink_bandwidth_gbps.map_or(NO_NVLINK, |b| quantize(b, 10.0, NO_NVLINK - 1));
    out.extend_from_slice(&nvlink.to_le_bytes());
    out.extend_from_slice(&(s.xid_count.clamp(0, i32::from(u16::MAX)) as u16).to_le_bytes());
}

/// Encode one instant's samples of a node's GPUs, given as (GPU index, sample), into one row's bytes, ordered
/// by GPU index.
pub fn encode_instant(samples: &mut [(i32, &GpuSample)]) -> Vec<u8> {
    samples.sort_by_key(|(idx, _)| *idx);
    let mut out = Vec::with_capacity(samples.len() * RECORD_LEN);
    for (idx, s) in samples.iter() {
        encode(*idx, s, &mut out);
    }
    out
}

/// Read a row's records back; `None` when the length is not a whole number of records.
pub fn decode(bytes: &[u8]) -> Option<Vec<StoredSample>> {
    if !bytes.len().is_multiple_of(RECORD_LEN) {
        return None;
    }
    let u16_at = |r: &[u8], o: usize| u16::from_le_bytes([r[o], r[o + 1]]);
    let u32_at = |r: &[u8], o: usize| u32::from_le_bytes([r[o], r[o + 1], r[o + 2], r[o + 3]]);
    Some(
        bytes
            .chunks_exact(RECORD_LEN)
            .map(|r| StoredSample {
                gpu_index: i32::from(r[0]),
                gpu_util: f32::from(r[1]) / 2.0,
                mem_copy_util: f32::from(r[2]) / 2.0,
                fb_used_mib: i64::from(u32_at(r, 3)),
                fb_free_mib: i64::from(u32_at(r, 7)),
                power_w: f32::from(u16_at(r, 11)) / 10.0,
                energy_j: u32_at(r, 13),
                gpu_temp_c: f32::from(r[17]) - 40.0,
                mem_temp_c: (r[18] != NO_TEMP).then(|| f32::from(r[18]) - 40.0),
                sm_clock_mhz: i32::from(u16_at(r, 19)),
                nvlink_bandwidth_gbps: (u16_at(r, 21) != NO_NVLINK).then(|| f32::from(u16_at(r, 21)) / 10.0),
                xid_count: i32::from(u16_at(r, 23)),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use proptest::prelude::*;

    fn sample() -> GpuSample {
        GpuSample {
            gpu_index: 3,
            at: Utc::now(),
            gpu_util: 87.0,
            mem_copy_util: 31.5,
            fb_used_mib: 71_234,
            fb_free_mib: 10_325,
            power_w: 612.34,
            energy_mj: 123_456_789_012,
            gpu_temp_c: 64.0,
            mem_temp_c: Some(71.0),
            sm_clock_mhz: 1980,
            nvlink_bandwidth_gbps: Some(450.25),
            xid_count: 2,
            xid_codes: vec![13, 31],
        }
    }

    #[test]
    fn a_record_is_25_bytes_and_reads_back() {
        let s = sample();
        let bytes = encode_instant(&mut [(3, &s)]);
        assert_eq!(bytes.len(), RECORD_LEN);
        let back = decode(&bytes).unwrap();
        assert_eq!(
            back,
            vec![StoredSample {
                gpu_index: 3,
                gpu_util: 87.0,
                mem_copy_util: 31.5,
                fb_used_mib: 71_234,
                fb_free_mib: 10_325,
                power_w: 612.3,
                energy_j: 123_456_789,
                gpu_temp_c: 64.0,
                mem_temp_c: Some(71.0),
                sm_clock_mhz: 1980,
                nvlink_bandwidth_gbps: Some(450.3),
                xid_count: 2,
            }]
        );
    }

    #[test]
    fn records_are_ordered_by_gpu_index_and_absent_fields_stay_absent() {
        let mut a = sample();
        a.mem_temp_c = None;
        a.nvlink_bandwidth_gbps = None;
        let b = sample();
        let back = decode(&encode_instant(&mut [(7, &b), (0, &a)])).unwrap();
        assert_eq!(back.iter().map(|r| r.gpu_index).collect::<Vec<_>>(), [0, 7]);
        assert_eq!((back[0].mem_temp_c, back[0].nvlink_bandwidth_gbps), (None, None));
        assert_eq!(back[1].mem_temp_c, Some(71.0));
        assert_eq!(decode(&[0u8; RECORD_LEN + 1]), None);
        assert_eq!(decode(&[]), Some(vec![]));
    }

    #[test]
    fn out_of_range_values_are_clamped_not_wrapped() {
        let mut s = sample();
        s.nvlink_bandwidth_gbps = Some(100_000.0);
        s.xid_count = 100_000;
        s.power_w = f32::NAN;
        s.gpu_temp_c = -300.0;
        s.mem_temp_c = Some(1e9);
        let back = decode(&encode_instant(&mut [(0, &s)])).unwrap()[0];
        assert_eq!(back.nvlink_bandwidth_gbps, Some(6553.4));
        assert_eq!(back.xid_count, 65_535);
        assert_eq!(back.power_w, 0.0);
        assert_eq!(back.gpu_temp_c, -40.0);
        assert_eq!(back.mem_temp_c, Some(214.0), "clamped below the 'not reported' marker");
    }

    #[test]
    fn the_energy_counter_keeps_its_low_32_bits() {
        let mut s = sample();
        s.energy_mj = (u64::from(u32::MAX) + 11) as i64 * 1000 + 999;
        assert_eq!(decode(&encode_instant(&mut [(0, &s)])).unwrap()[0].energy_j, 10);
    }

    /// Any sample the heartbeat validation accepts.
    fn valid_sample() -> impl Strategy<Value = (i32, GpuSample)> {
        (
            (0..=63i32, 0.0..=100.0f32, 0.0..=100.0f32, 0..=4_194_304i64, 0..=4_194_304i64, 0.0..=5000.0f32),
            (0..=i64::MAX / 2, -40.0..=150.0f32, proptest::option::of(-40.0..=150.0f32), 0..=10_000i32),
            (proptest::option::of(0.0..=100_000.0f32), 0..=100_000i32),
        )
            .prop_map(
                |((idx, util, mem, used, free, power), (energy, temp, mem_temp, clock), (nvlink, xids))| {
                    let s = GpuSample {
                        gpu_index: idx,
                        at: Utc::now(),
                        gpu_util: util,
                        mem_copy_util: mem,
                        fb_used_mib: used,
                        fb_free_mib: free,
                        power_w: power,
                        energy_mj: energy,
                        gpu_temp_c: temp,
                        mem_temp_c: mem_temp,
                        sm_clock_mhz: clock,
                        nvlink_bandwidth_gbps: nvlink,
                        xid_count: xids,
                        xid_codes: vec![],
                    };
                    (idx, s)
                },
            )
    }

    proptest! {
        #[test]
        fn valid_samples_read_back_within_half_a_step((idx, s) in valid_sample()) {
            let back = decode(&encode_instant(&mut [(idx, &s)])).unwrap()[0];
            prop_assert_eq!(back.gpu_index, idx);
            prop_assert!((back.gpu_util - s.gpu_util).abs() <= 0.25 + 1e-4);
            prop_assert!((back.mem_copy_util - s.mem_copy_util).abs() <= 0.25 + 1e-4);
            prop_assert_eq!(back.fb_used_mib, s.fb_used_mib);
            prop_assert_eq!(back.fb_free_mib, s.fb_free_mib);
            prop_assert!((back.power_w - s.power_w).abs() <= 0.05 + 1e-3);
            prop_assert_eq!(back.energy_j, (s.energy_mj / 1000) as u64 as u32);
            prop_assert!((back.gpu_temp_c - s.gpu_temp_c).abs() <= 0.5 + 1e-4);
            prop_assert_eq!(back.mem_temp_c.is_some(), s.mem_temp_c.is_some());
            if let (Some(b), Some(t)) = (back.mem_temp_c, s.mem_temp_c) {
                prop_assert!((b - t).abs() <= 0.5 + 1e-4);
            }
            prop_assert_eq!(back.sm_clock_mhz, s.sm_clock_mhz);
            prop_assert_eq!(back.nvlink_bandwidth_gbps.is_some(), s.nvlink_bandwidth_gbps.is_some());
            if let (Some(b), Some(n)) = (back.nvlink_bandwidth_gbps, s.nvlink_bandwidth_gbps) {
                prop_assert!((b - n.min(6553.4)).abs() <= 0.05 + 1e-3);
            }
            prop_assert_eq!(back.xid_count, s.xid_count.min(65_535));
        }

        #[test]
        fn a_whole_node_round_trips_and_storing_twice_changes_nothing(
            gpus in proptest::collection::btree_map(0..=63i32, valid_sample(), 1..=16)
        ) {
            let samples: Vec<(i32, GpuSample)> = gpus.into_iter().map(|(idx, (_, s))| (idx, s)).collect();
            let mut refs: Vec<(i32, &GpuSample)> = samples.iter().rev().map(|(i, s)| (*i, s)).collect();
            let bytes = encode_instant(&mut refs);
            prop_assert_eq!(bytes.len(), samples.len() * RECORD_LEN);
            let back = decode(&bytes).unwrap();
            prop_assert_eq!(back.iter().map(|r| r.gpu_index).collect::<Vec<_>>(),
                samples.iter().map(|(i, _)| *i).collect::<Vec<_>>());
            // Re-encoding what was stored gives the same bytes: rounding is idempotent.
            let again: Vec<GpuSample> = back.iter().map(|r| GpuSample {
                gpu_index: r.gpu_index, at: Utc::now(), gpu_util: r.gpu_util, mem_copy_util: r.mem_copy_util,
                fb_used_mib: r.fb_used_mib, fb_free_mib: r.fb_free_mib, power_w: r.power_w,
                energy_mj: i64::from(r.energy_j) * 1000, gpu_temp_c: r.gpu_temp_c, mem_temp_c: r.mem_temp_c,
                sm_clock_mhz: r.sm_clock_mhz, nvlink_bandwidth_gbps: r.nvlink_bandwidth_gbps,
                xid_count: r.xid_count, xid_codes: vec![],
            }).collect();
            let mut refs: Vec<(i32, &GpuSample)> = again.iter().map(|s| (s.gpu_index, s)).collect();
            prop_assert_eq!(encode_instant(&mut refs), bytes);
        }
    }
}
