//! Pure rating: split a metered window at price changes and month boundaries, price each piece, and turn
//! exact costs into whole-minor-unit charges. No I/O.
//!
//! Units: a "cost unit" is 1/2,592,000 of a minor unit (2,592,000 = seconds in a 30-day month). An hourly
//! price P costs P x 720 units per GPU-second; a monthly price M (per GPU per 30-day month) costs M units per
//! GPU-second. Both are exact integers, so no rounding happens until `charge_for`.
//!
//! The rule: a lease is billed for the whole seconds from its start (the last fraction of a second is free).
//! Those seconds lie on a grid anchored at the lease's start; each one is priced at the price in force when it
//! begins and belongs to the month it begins in. So a price change or a month boundary that falls inside a
//! second moves to the next grid point instead of cutting the second in two, and the pieces of a window add up
//! to exactly its whole seconds: no second is lost or counted twice, however the window is cut.

use chrono::{DateTime, Datelike, TimeZone, Utc};

use gpuplane_store::leases::Term;
/// Cost units in one minor unit.
pub const UNITS_PER_MINOR: i128 = 2_592_000;
/// Seconds in the 30-day month a monthly price is quoted for.
pub const SECONDS_PER_PRICED_MONTH: i128 = 2_592_000;

pub use gpuplane_store::billing::metering::Price;

/// One rated piece of a window: one price, one calendar month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub seconds: i64,
    /// The unit price charged: per GPU-hour for hourly leases, per GPU-month for monthly ones.
    pub unit_price_minor: i64,
    /// Exact cost of the piece in cost units.
    pub cost_units: i128,
}

/// Start of the calendar month (UTC) after `t`.
pub fn next_month_start(t: DateTime<Utc>) -> DateTime<Utc> {
    let (y, m) = if t.month() == 12 { (t.year() + 1, 1) } else { (t.year(), t.month() + 1) };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t)
}

/// The price in force at `t`: the latest that started at or before it (or the earliest, for time before any).
fn price_at(prices: &[Price], t: DateTime<Utc>) -> Option<(Price, Option<DateTime<Utc>>)> {
    let idx = prices.iter().rposition(|p| p.effective_from <= t).unwrap_or(0);
    let price = *prices.get(idx)?;
    Some((price, prices.get(idx + 1).map(|p| p.effective_from)))
}

/// The first point of the one-second grid through `anchor` that is at or after `t` (`t` > `anchor`).
fn grid_ceil(anchor: DateTime<Utc>, t: DateTime<Utc>) -> DateTime<Utc> {
    let micros = (t - anchor).num_microseconds().unwrap_or(i64::MAX);
    anchor + chrono::Duration::seconds(micros.div_euclid(1_000_000) + i64::from(micros.rem_euclid(1_000_000) != 0))
}

/// Rate the whole seconds of the window [from, from + floor(to - from)) of a lease of `gpus` GPUs on `term`.
/// `prices` sorted by `effective_from`. Pieces break at the first grid second at or after every price change
/// and every month boundary (UTC); see the module documentation for the rule.
pub fn rate_window(from: DateTime<Utc>, to: DateTime<Utc>, gpus: i32, term: Term, prices: &[Price]) -> Vec<Piece> {
    let to = from + chrono::Duration::seconds((to - from).num_seconds().max(0));
    let mut pieces = Vec::new();
    let mut start = from;
    while start < to {
        let Some((price, next_change)) = price_at(prices, start) else { break };
        let mut end = grid_ceil(start, next_month_start(start)).min(to);
        if let Some(change) = next_change
            && change > start
        {
            end = end.min(grid_ceil(start, change));
        }
        let seconds = (end - start).num_seconds();
        let (unit_price_minor, units_per_gpu_second) = match (term, price.per_gpu_month_minor) {
            (Term::Monthly, Some(month)) => (month, month as i128),
            // A pool without a monthly price sells monthly terms at the hourly price.
            _ => (price.per_gpu_hour_minor, price.per_gpu_hour_minor as i128 * (UNITS_PER_MINOR / 3600)),
        };
        pieces.push(Piece {
            start,
            end,
            seconds,
            unit_price_minor,
            cost_units: seconds as i128 * gpus as i128 * units_per_gpu_second,
        });
        start = end;
    }
    pieces
}

/// The charge that brings a lease from `charged_minor` to floor(`total_units`) minor units.
pub fn charge_for(total_units: i128, charged_minor: i64) -> i64 {
    let due = total_units.div_euclid(UNITS_PER_MINOR);
    (due - charged_minor as i128).clamp(0, i64::MAX as i128) as i64
}

/// Where a lease's metering stands: everything before `metered_until` is rated; `cost_units` is its exact
/// cost and `charged_minor` what the ledger holds for it, always floor(`cost_units` / `UNITS_PER_MINOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metered {
    pub metered_until: DateTime<Utc>,
    pub cost_units: i128,
    pub charged_minor: i64,
}

/// One rated piece and the whole minor units it adds to the lease's charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    pub piece: Piece,
    pub amount_minor: i64,
}

/// One metering step: rate the whole seconds from `state.metered_until` to `to` and charge each piece the
/// difference between floor(cumulative exact cost) and what was charged before it. An `ended` lease is then
/// closed at `to` (its last fraction of a second is free); a running one stays on its second grid.
pub fn meter(
    state: Metered,
    to: DateTime<Utc>,
    ended: bool,
    gpus: i32,
    term: Term,
    prices: &[Price],
) -> (Metered, Vec<Charge>) {
    let mut next = state;
    let mut charges = Vec::new();
    for piece in rate_window(state.metered_until, to, gpus, term, prices) {
        next.cost_units += piece.cost_units;
        let amount_minor = charge_for(next.cost_units, next.charged_minor);
        next.charged_minor += amount_minor;
        next.metered_until = piece.end;
        charges.push(Charge { piece, amount_minor });
    }
    if ended && to > next.metered_until {
        next.metered_until = to;
    }
    (next, charges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn price(at: &str, hour: i64) -> Price {
        Price { effective_from: t(at), per_gpu_hour_minor: hour, per_gpu_month_minor: Some(hour * 500) }
    }

    #[test]
    fn an_hour_of_eight_gpus_costs_eight_gpu_hours() {
        let prices = [price("2026-01-01T00:00:00Z", 250)];
        let pieces = rate_window(t("2026-11-29T10:00:00Z"), t("2026-11-29T11:00:00Z"), 8, Term::Hourly, &prices);
        assert_eq!(pieces.len(), 1);
        assert_eq!(charge_for(pieces[0].cost_units, 0), 8 * 250);
    }

    #[test]
    fn windows_split_at_price_changes_and_month_ends() {
        let prices = [price("2026-01-01T00:00:00Z", 100), price("2026-11-30T12:00:00Z", 200)];
        let pieces = rate_window(t("2026-11-30T11:00:00Z"), t("2026-12-01T01:00:00Z"), 1, Term::Hourly, &prices);
        let bounds: Vec<(DateTime<Utc>, i64)> = pieces.iter().map(|p| (p.start, p.unit_price_minor)).collect();
        assert_eq!(
            bounds,
            [(t("2026-11-30T11:00:00Z"), 100), (t("2026-11-30T12:00:00Z"), 200), (t("2026-12-01T00:00:00Z"), 200)]
        );
        let total: i128 = pieces.iter().map(|p| p.cost_units).sum();
        assert_eq!(charge_for(total, 0), 100 + 12 * 200 + 200);
    }

    #[test]
    fn monthly_terms_use_the_monthly_price_per_30_days() {
        let prices = [price("2026-01-01T00:00:00Z", 100)];
        let pieces = rate_window(t("2026-04-01T00:00:00Z"), t("2026-05-01T00:00:00Z"), 8, Term::Monthly, &prices);
        // 8 GPUs x 30 days at 50,000 per GPU-month.
        assert_eq!(charge_for(pieces.iter().map(|p| p.cost_units).sum(), 0), 8 * 50_000);
    }

    #[test]
    fn charging_in_steps_equals_charging_once() {
        let prices = [price("2026-01-01T00:00:00Z", 7)];
        let start = t("2026-11-29T00:00:00Z");
        let mut units = 0i128;
        let mut charged = 0i64;
        for step in 0..1000 {
            let from = start + chrono::Duration::seconds(step * 37);
            let to = from + chrono::Duration::seconds(37);
            for piece in rate_window(from, to, 3, Term::Hourly, &prices) {
                units += piece.cost_units;
                charged += charge_for(units, charged);
            }
        }
        let once = rate_window(start, start + chrono::Duration::seconds(37_000), 3, Term::Hourly, &prices);
        assert_eq!(charged, charge_for(once.iter().map(|p| p.cost_units).sum(), 0));
        // 3 GPUs x 37,000 s x 7 / 3600, rounded down.
        assert_eq!(charged, 3 * 37_000 * 7 / 3600);
    }

    proptest! {
        #[test]
        fn pieces_cover_the_window_exactly(start in 0i64..100_000_000, len in 0i64..10_000_000, gpus in 1i32..64) {
            let prices = [price("2026-01-01T00:00:00Z", 100), price("2027-03-01T00:00:00Z", 120)];
            let from = t("2026-01-01T00:00:00Z") + chrono::Duration::seconds(start);
            let to = from + chrono::Duration::seconds(len);
            let pieces = rate_window(from, to, gpus, Term::Hourly, &prices);
            prop_assert_eq!(pieces.iter().map(|p| p.seconds).sum::<i64>(), len);
            for w in pieces.windows(2) {
                prop_assert_eq!(w[0].end, w[1].start);
                prop_assert_eq!(w[0].start.month() == w[0].end.month() || w[0].end == next_month_start(w[0].start), true);
            }
        }
    }

    /// The exact-cost formula, by brute force: every whole second from `start` to `end`, at the price in force
    /// when it begins.
    fn exact_units(start: DateTime<Utc>, end: DateTime<Utc>, gpus: i32, prices: &[Price]) -> i128 {
        (0..(end - start).num_seconds())
            .map(|k| {
                let at = start + chrono::Duration::seconds(k);
                let price = prices.iter().rev().find(|p| p.effective_from <= at).unwrap_or(&prices[0]);
                gpus as i128 * price.per_gpu_hour_minor as i128 * (UNITS_PER_MINOR / 3600)
            })
            .sum()
    }

    #[test]
    fn a_price_change_inside_a_second_loses_no_second() {
        // Start half a second into a second; the price changes on a whole second, the month ends on one.
        let prices = [price("2026-01-01T00:00:00Z", 3600), price("2026-11-30T23:59:00Z", 7200)];
        let start = t("2026-11-30T23:58:30.500Z");
        let end = t("2026-12-01T00:00:31.250Z");
        let (after, charges) = meter(
            Metered { metered_until: start, cost_units: 0, charged_minor: 0 },
            end,
            true,
            8,
            Term::Hourly,
            &prices,
        );
        // 120 whole seconds: the 30 that begin before 23:59:00 at 1 per GPU-second, then 90 at 2.
        assert_eq!(after.charged_minor, 8 * (30 + 2 * 90));
        assert_eq!(charges.iter().map(|c| c.piece.seconds).sum::<i64>(), 120);
        assert_eq!(charges.len(), 3, "split at the price change and at the month boundary: {charges:?}");
        assert_eq!(charges[2].piece.start, t("2026-12-01T00:00:00.500Z"));
        assert_eq!(after.metered_until, end);
    }

    proptest! {
        /// Whatever the metering steps, price changes (at any microsecond), month boundaries and end time,
        /// an ended lease is charged floor(exact cost of its whole seconds), and after every step what was
        /// charged is floor(exact cost so far).
        #[test]
        fn metering_in_any_steps_charges_the_exact_cost_rounded_down_once(
            start_offset_us in 0i64..86_400_000_000,
            gpus in 1i32..16,
            changes in proptest::collection::vec((0i64..20_000_000_000, 1i64..100_000), 0..5),
            base_price in 1i64..100_000,
            steps in proptest::collection::vec(0i64..3_000_000_000, 0..12),
            length_us in 0i64..20_000_000_000,
        ) {
            // Leases start in the last day of November, so many cross into December.
            let start = t("2026-11-30T00:00:00Z") + chrono::Duration::microseconds(start_offset_us);
            let end = start + chrono::Duration::microseconds(length_us);
            let mut prices = vec![Price { effective_from: t("2026-01-01T00:00:00Z"), per_gpu_hour_minor: base_price, per_gpu_month_minor: None }];
            let mut at: Vec<(i64, i64)> = changes;
            at.sort();
            for (offset, hour) in at {
                prices.push(Price { effective_from: start + chrono::Duration::microseconds(offset), per_gpu_hour_minor: hour, per_gpu_month_minor: None });
            }
            let mut state = Metered { metered_until: start, cost_units: 0, charged_minor: 0 };
            let mut now = start;
            for step in steps {
                now += chrono::Duration::microseconds(step);
                if now >= end {
                    break;
                }
                let (next, charges) = meter(state, now, false, gpus, Term::Hourly, &prices);
                prop_assert_eq!(charges.iter().map(|c| c.amount_minor).sum::<i64>(), next.charged_minor - state.charged_minor);
                state = next;
                let exact = exact_units(start, state.metered_until, gpus, &prices);
                prop_assert_eq!(state.cost_units, exact);
                prop_assert_eq!(state.charged_minor as i128, exact.div_euclid(UNITS_PER_MINOR));
            }
            let (done, _) = meter(state, end, true, gpus, Term::Hourly, &prices);
            prop_assert_eq!(done.charged_minor as i128, exact_units(start, end, gpus, &prices).div_euclid(UNITS_PER_MINOR));
            prop_assert_eq!(done.metered_until, end);
        }
    }
}
