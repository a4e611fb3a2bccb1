//! The pure rules of volumes: names, sizes, which kind a create gets, and which node holds a new volume.
//! No I/O: the handlers read the facts and apply these.

use gpuplane_protocol::volumes::{VolumeKind, VolumeStore};
use gpuplane_store::volumes::{GIB, StoreNode};
use uuid::Uuid;

/// The largest volume, GiB (64 TiB).
pub const MAX_SIZE_GIB: i32 = 65_536;
/// The longest idle policy, days.
pub const MAX_IDLE_DAYS: i32 = 365;

/// A volume name: 1-63 characters, lowercase letters, digits, `.`, `_`, `-`, starting with a letter or digit
/// (the schema's check says the same).
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if gpuplane_protocol::volumes::is_name(name) {
        Ok(())
    } else {
        Err("1-63 characters: a-z, 0-9, '.', '_', '-', starting with a letter or digit")
    }
}

/// The kind a create gets: the one asked for if the pool offers it, else the pool's only (or `pool` first).
pub fn choose_kind(asked: Option<VolumeKind>, offered: &[String], pool: &str) -> Result<VolumeKind, String> {
    let offered: Vec<VolumeKind> = offered.iter().filter_map(|k| VolumeKind::parse(k)).collect();
    match asked {
        Some(kind) if offered.contains(&kind) => Ok(kind),
        Some(kind) => Err(format!(
            "pool {pool} offers {} volumes, not {}",
            if offered.is_empty() { "no".to_string() } else { list(&offered) },
            kind.as_str()
        )),
        None if offered.contains(&VolumeKind::Pool) => Ok(VolumeKind::Pool),
        None => offered.first().copied().ok_or_else(|| format!("pool {pool} offers no volumes")),
    }
}

fn list(kinds: &[VolumeKind]) -> String {
    kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" and ")
}

fn store(node: &StoreNode, kind: VolumeKind) -> Option<&VolumeStore> {
    node.stores.iter().find(|s| s.kind == kind)
}

/// Which node holds a new volume of `size_gib`: one whose agent reports a store of that kind with room for it.
///
/// Images are sparse, so space promised to volumes is not yet used on the store: a store has room when its
/// free space covers everything promised on it plus the new volume, so a store never fills under its
/// volumes and a full volume gives ENOSPC to its own users only. A host volume goes to the host with the
/// most room; a pool volume's store is the pool's shared filesystem, promised `pool_promised_gib` already,
/// and its maker is the reporting node with the most free space. Ties: the lowest node id.
pub fn place(kind: VolumeKind, size_gib: i32, nodes: &[StoreNode], pool_promised_gib: i64) -> Result<Uuid, String> {
    let room = |node: &StoreNode| -> Option<i64> {
        let store = store(node, kind)?;
        let promised = match kind {
            VolumeKind::Host => node.host_promised_gib,
            VolumeKind::Pool => pool_promised_gib,
        };
        Some(store.free_bytes / GIB - promised)
    };
    let best = nodes
        .iter()
        .filter_map(|n| room(n).map(|r| (r, n)))
        .max_by(|(a, na), (b, nb)| a.cmp(b).then(nb.node_id.cmp(&na.node_id)));
    match best {
        Some((room, node)) if room >= i64::from(size_gib) => Ok(node.node_id),
        Some((room, _)) => Err(format!(
            "no ready host has room for {size_gib} GiB in a {} volume store (the most room: {} GiB)",
            kind.as_str(),
            room.max(0)
        )),
        None => Err(format!("no ready host of the pool reports a {} volume store", kind.as_str())),
    }
}

/// What a tenant's balance must cover to create or grow a volume: its first day at its size and the storage price
/// in force (per GiB and 30-day month), rounded up to a minor unit.
pub fn first_day_minor(size_gib: i32, price_per_gib_month_minor: i64) -> i64 {
    let units = i128::from(size_gib) * i128::from(price_per_gib_month_minor) * 86_400;
    (units.div_euclid(2_592_000) + i128::from(units.rem_euclid(2_592_000) != 0)).min(i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u128, stores: &[(VolumeKind, i64)], promised: i64) -> StoreNode {
        StoreNode {
            node_id: Uuid::from_u128(id),
            hostname: format!("h{id}"),
            stores: stores
                .iter()
                .map(|&(kind, free_gib)| VolumeStore { kind, total_bytes: 1000 * GIB, free_bytes: free_gib * GIB })
                .collect(),
            host_promised_gib: promised,
        }
    }

    #[test]
    fn names_are_checked_as_the_schema_does() {
        for good in ["data", "ckpt-7b", "a", "x.y_z-1", &"a".repeat(63)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", ".a", "Data", "a/b", "../x", "a b", &"a".repeat(64), "\u{e9}", "a\0"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_first_day_of_storage_rounds_up_to_a_minor_unit() {
        assert_eq!(first_day_minor(100, 7), 24, "100 GiB at 7 per GiB-month: 23.33 for a day");
        assert_eq!(first_day_minor(30, 30), 30, "exact: 30 GiB at 30 per month is 1 per GiB-day");
        assert_eq!(first_day_minor(1, 0), 0);
        assert_eq!(first_day_minor(65_536, 100_000_000), 218_453_333_334);
    }

    #[test]
    fn a_kind_is_one_the_pool_offers() {
        let both = ["host".to_string(), "pool".to_string()];
        assert_eq!(choose_kind(None, &both, "p"), Ok(VolumeKind::Pool));
        assert_eq!(choose_kind(Some(VolumeKind::Host), &both, "p"), Ok(VolumeKind::Host));
        assert_eq!(choose_kind(None, &["host".to_string()], "p"), Ok(VolumeKind::Host));
        assert_eq!(
            choose_kind(Some(VolumeKind::Pool), &["host".to_string()], "p").unwrap_err(),
            "pool p offers host volumes, not pool"
        );
        assert_eq!(choose_kind(None, &[], "p").unwrap_err(), "pool p offers no volumes");
    }

    #[test]
    fn a_host_volume_goes_where_there_is_room_for_everything_promised() {
        use VolumeKind::*;
        // h1 has 100 GiB free but 90 promised; h2 50 free, none promised; h3 offers only a pool store.
        let nodes = [node(1, &[(Host, 100)], 90), node(2, &[(Host, 50)], 0), node(3, &[(Pool, 500)], 0)];
        assert_eq!(place(Host, 20, &nodes, 0), Ok(Uuid::from_u128(2)));
        assert_eq!(place(Host, 50, &nodes, 0), Ok(Uuid::from_u128(2)));
        let err = place(Host, 51, &nodes, 0).unwrap_err();
        assert!(err.contains("the most room: 50 GiB"), "{err}");
        // Ties go to the lowest id, so concurrent readers agree.
        let tied = [node(5, &[(Host, 10)], 0), node(4, &[(Host, 10)], 0)];
        assert_eq!(place(Host, 1, &tied, 0), Ok(Uuid::from_u128(4)));
    }

    #[test]
    fn a_pool_volume_counts_what_the_pool_promised_and_never_uses_an_unreported_store() {
        use VolumeKind::*;
        let nodes = [node(1, &[(Host, 100)], 0), node(2, &[(Pool, 100)], 0), node(3, &[(Pool, 120)], 0)];
        assert_eq!(place(Pool, 10, &nodes, 0), Ok(Uuid::from_u128(3)));
        assert_eq!(place(Pool, 20, &nodes, 100), Ok(Uuid::from_u128(3)));
        assert!(place(Pool, 21, &nodes, 100).is_err());
        let err = place(Pool, 1, &nodes[..1], 0).unwrap_err();
        assert_eq!(err, "no ready host of the pool reports a pool volume store");
        assert!(place(Host, 1, &[], 0).is_err());
    }
}
