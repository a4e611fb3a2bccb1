//! Whether a multi-node job's ranks can reach each other, judged from what the service knows before it starts one:
//! the address the lease gets on each node, and the agents' latest probes between the lease's nodes. A job whose
//! nodes cannot meet would otherwise sit in torchrun's rendezvous until its bound (`launch_specs`) fails it; this
//! refuses it up front, naming the nodes. Pure.

use gpuplane_store::leases::network::PairLatency;

use super::launch_specs::NodeSlot;

/// A pair whose latest report had every probe lost: the node cannot reach its peer at all.
pub fn is_unreachable(pair: &PairLatency) -> bool {
    pair.probes == 0 && pair.lost > 0
}

/// Why the ranks on these nodes cannot reach each other, or `None` when nothing known says so (one node; or
/// distinct addresses and no pair of them measured unreachable).
pub fn why_unreachable(nodes: &[NodeSlot], pairs: &[PairLatency]) -> Option<String> {
    if nodes.len() < 2 {
        return None;
    }
    // Two nodes that give the lease one address: each routes it to itself, so neither reaches the other.
    for (i, a) in nodes.iter().enumerate() {
        for b in &nodes[i + 1..] {
            if let (Some(x), Some(y)) = (&a.lease_address, &b.lease_address)
                && x == y
            {
                return Some(format!(
                    "nodes {} and {} both give this lease the address {x} (their lease subnets overlap), so its \
                     ranks there cannot reach each other; the operator gives each host its own --lease-subnet",
                    a.hostname, b.hostname
                ));
            }
        }
    }
    // A loopback address is reachable from its own host only.
    let first = nodes[0].rendezvous_address();
    if let Some(node) = nodes.iter().find(|n| is_loopback(n.rendezvous_address()))
        && nodes.iter().any(|n| n.rendezvous_address() != first)
    {
        return Some(format!(
            "node {} is reached at {}, a loopback address the lease's other nodes cannot reach; the operator gives \
             its agent a routable --address",
            node.hostname,
            node.rendezvous_address()
        ));
    }
    let on_lease = |id| nodes.iter().any(|n| n.node_id == id);
    let mut cut: Vec<&PairLatency> =
        pairs.iter().filter(|p| is_unreachable(p) && on_lease(p.node_id) && on_lease(p.peer_node_id)).collect();
    cut.sort_by(|a, b| (&a.node_hostname, &a.peer_hostname).cmp(&(&b.node_hostname, &b.peer_hostname)));
    let names: Vec<String> = cut
        .iter()
        .map(|p| {
            let lost = crate::planner::types::count(p.lost.max(0) as u32, "probe", "probes");
            format!(
                "{} -> {} ({lost} lost, at {})",
                p.node_hostname,
                p.peer_hostname,
                p.measured_at.format("%H:%M:%S UTC")
            )
        })
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "this lease's nodes cannot reach each other: every probe was lost on {}; a job across them could not \
             rendezvous (the hosts' network or firewall must let them reach each other)",
            names.join(", ")
        )
    })
}

fn is_loopback(address: &str) -> bool {
    address.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) || address == "localhost"
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use uuid::Uuid;

    fn node(n: u128, address: &str, lease_address: Option<&str>) -> NodeSlot {
        NodeSlot {
            node_id: Uuid::from_u128(n),
            hostname: format!("host-{n}"),
            address: address.into(),
            lease_address: lease_address.map(Into::into),
            gpu_indices: vec![0],
            rdma: false,
        }
    }

    fn pair(from: u128, to: u128, probes: i32, lost: i32) -> PairLatency {
        PairLatency {
            node_id: Uuid::from_u128(from),
            node_hostname: format!("host-{from}"),
            peer_node_id: Uuid::from_u128(to),
            peer_hostname: format!("host-{to}"),
            p50_us: if probes > 0 { 200 } else { 0 },
            p99_us: if probes > 0 { 400 } else { 0 },
            probes,
            lost,
            measured_at: Utc::now(),
        }
    }

    #[test]
    fn one_node_or_distinct_measured_nodes_are_reachable() {
        let a = node(1, "10.0.0.1", Some("100.64.1.2"));
        let b = node(2, "10.0.0.2", Some("100.64.2.2"));
        assert_eq!(why_unreachable(std::slice::from_ref(&a), &[pair(1, 2, 0, 5)]), None);
        assert_eq!(why_unreachable(&[a.clone(), b.clone()], &[]), None, "nothing measured yet");
        assert_eq!(why_unreachable(&[a, b], &[pair(1, 2, 3, 2), pair(2, 1, 5, 0)]), None, "some probes answered");
    }

    #[test]
    fn one_lease_address_on_two_nodes_is_unreachable_naming_both() {
        let why =
            why_unreachable(&[node(1, "10.0.0.1", Some("100.64.0.2")), node(2, "10.0.0.2", Some("100.64.0.2"))], &[])
                .unwrap();
        assert!(
            why.contains("host-1 and host-2") && why.contains("100.64.0.2") && why.contains("--lease-subnet"),
            "{why}"
        );
        // Without lease namespaces two agents of one host share its address, and reach each other there.
        assert_eq!(why_unreachable(&[node(1, "10.0.0.1", None), node(2, "10.0.0.1", None)], &[]), None);
    }

    #[test]
    fn a_loopback_address_is_unreachable_from_another_host() {
        let why = why_unreachable(&[node(1, "10.0.0.1", None), node(2, "127.0.0.1", None)], &[]).unwrap();
        assert!(why.contains("host-2") && why.contains("127.0.0.1"), "{why}");
        assert_eq!(why_unreachable(&[node(1, "127.0.0.1", None), node(2, "127.0.0.1", None)], &[]), None, "one host");
    }

    #[test]
    fn every_probe_lost_names_the_pairs_of_this_lease_only() {
        let nodes = [node(1, "10.0.0.1", Some("100.64.1.2")), node(2, "10.0.0.2", Some("100.64.2.2"))];
        let why = why_unreachable(&nodes, &[pair(2, 1, 0, 12), pair(1, 2, 4, 0)]).unwrap();
        assert!(why.contains("host-2 -> host-1 (12 probes lost, at "), "{why}");
        assert!(!why.contains("host-1 -> host-2"), "{why}");
        assert_eq!(why_unreachable(&nodes, &[pair(1, 3, 0, 12)]), None, "a node not on this lease");
    }
}
