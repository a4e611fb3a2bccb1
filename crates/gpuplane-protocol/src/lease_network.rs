//! Where a lease's processes sit on each node's network: every lease has a network namespace of its own on each
//! of its nodes, with one IPv4 address from that node's lease subnet (reported by the agent at registration).
//!
//! The address is a pure function of the node's subnet and the lease's GPUs there, so the service (which renders
//! `MASTER_ADDR` and tells agents their peers) and the agent (which gives the namespace its address) cannot
//! disagree: the `k`-th address of the subnet, `k = 2 + the lowest GPU index the lease holds on the node`. Two
//! leases never hold the same GPU of a node, so two leases of a node never get the same address; `.1` is the
//! gateway side, `.0` the network.

use std::net::Ipv4Addr;

/// A node's lease subnet, `a.b.c.d/p`, with room for every GPU index it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSubnet {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

/// The shortest subnet accepted: a /24 holds 254 addresses, more than any node has GPUs (indices 0-63).
pub const MAX_PREFIX: u8 = 24;
/// The widest accepted: one node never needs more.
pub const MIN_PREFIX: u8 = 16;

impl LeaseSubnet {
    /// `10.233.7.0/24`: an IPv4 network address with a prefix of 16-24 and no host bits set.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("expected an IPv4 network such as 100.64.7.0/24, got `{text}`"))?;
        let network: Ipv4Addr = address.parse().map_err(|_| format!("`{address}` is not an IPv4 address"))?;
        let prefix: u8 = prefix.parse().map_err(|_| format!("`{prefix}` is not a prefix length"))?;
        if !(MIN_PREFIX..=MAX_PREFIX).contains(&prefix) {
            return Err(format!("the prefix must be /{MIN_PREFIX} to /{MAX_PREFIX}, got /{prefix}"));
        }
        let host_bits = u32::MAX >> prefix;
        if u32::from(network) & host_bits != 0 {
            return Err(format!("`{text}` has host bits set: use the network address"));
        }
        Ok(Self { network, prefix })
    }

    /// The gateway of every lease namespace on the node: the subnet's first address, on the host's side.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    /// The lease's address on this node, from the GPU indices it holds there; `None` without GPUs or with an
    /// index outside 0-63.
    pub fn lease_address(&self, gpu_indices: &[i32]) -> Option<Ipv4Addr> {
        let lowest = *gpu_indices.iter().min()?;
        if !(0..64).contains(&lowest) {
            return None;
        }
        Some(Ipv4Addr::from(u32::from(self.network) + 2 + lowest as u32))
    }
}

impl std::fmt::Display for LeaseSubnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The lease's address on a node whose subnet is `subnet` (as stored: it was validated when the node registered).
pub fn lease_address(subnet: Option<&str>, gpu_indices: &[i32]) -> Option<Ipv4Addr> {
    LeaseSubnet::parse(subnet?).ok()?.lease_address(gpu_indices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_are_networks_of_16_to_24_bits() {
        assert_eq!(LeaseSubnet::parse("100.64.7.0/24").unwrap().to_string(), "100.64.7.0/24");
        assert!(LeaseSubnet::parse("100.64.7.1/24").unwrap_err().contains("host bits"));
        assert!(LeaseSubnet::parse("100.64.0.0/25").is_err());
        assert!(LeaseSubnet::parse("100.64.0.0/8").is_err());
        assert!(LeaseSubnet::parse("fd00::/64").is_err());
        assert!(LeaseSubnet::parse("100.64.7.0").is_err());
    }

    #[test]
    fn leases_of_a_node_get_distinct_addresses_from_their_lowest_gpu() {
        let subnet = LeaseSubnet::parse("10.233.7.0/24").unwrap();
        assert_eq!(subnet.gateway(), Ipv4Addr::new(10, 233, 7, 1));
        assert_eq!(subnet.lease_address(&[3, 2]), Some(Ipv4Addr::new(10, 233, 7, 4)));
        assert_eq!(subnet.lease_address(&[0, 1]), Some(Ipv4Addr::new(10, 233, 7, 2)));
        assert_eq!(subnet.lease_address(&[63]), Some(Ipv4Addr::new(10, 233, 7, 65)));
        assert_eq!(subnet.lease_address(&[]), None);
        assert_eq!(subnet.lease_address(&[64]), None);
        assert_eq!(lease_address(Some("10.233.7.0/24"), &[1]), Some(Ipv4Addr::new(10, 233, 7, 3)));
        assert_eq!(lease_address(None, &[1]), None);
    }
}
