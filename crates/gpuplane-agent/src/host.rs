//! What the agent can learn about its host when not told: the default route's interface, its address and link
//! speed, and RDMA devices. The readers take the root of the file system (`/` on a host, a fake tree in tests) so
//! every rule here is a pure function over files.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::path::Path;

/// Inter-node bandwidth reported when neither given nor detected (Gbit/s).
pub const DEFAULT_NETWORK_GBPS: i32 = 100;

/// Where a fact about the host came from: said at start, one line per fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A flag or its environment variable.
    Given,
    /// Read from the host; the text says from where.
    Detected(String),
    /// Neither given nor detectable; the text says why.
    Default(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Given => f.write_str("given"),
            Self::Detected(from) => write!(f, "detected ({from})"),
            Self::Default(why) => write!(f, "default ({why})"),
        }
    }
}

/// One fact and its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact<T> {
    pub value: T,
    pub source: Source,
}

/// The host's network description: given values win, then what `root` shows, then defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNetwork {
    pub address: Fact<String>,
    pub network_gbps: Fact<i32>,
    pub rdma: Fact<bool>,
}

/// What was given (flags or environment); `None` means "detect".
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub address: Option<String>,
    pub network_gbps: Option<i32>,
    pub rdma: Option<bool>,
}

/// Resolve the host's network facts. `route_address` is the address of the default route's interface (looked up
/// by the caller: [`default_route_address`] on a host); `root` is where `proc/net/route` and `sys/class/...` are.
pub fn describe(given: &Given, hostname: &str, root: &Path, route_address: Option<IpAddr>) -> HostNetwork {
    let iface = default_route_interface(root);
    let address = match (&given.address, &iface, route_address) {
        (Some(address), _, _) => Fact { value: address.clone(), source: Source::Given },
        (None, Some(iface), Some(ip)) => {
            Fact { value: ip.to_string(), source: Source::Detected(format!("default route via {iface}")) }
        }
        (None, _, _) => Fact {
            value: hostname.to_owned(),
            source: Source::Default("the host name: no default route with an address".to_owned()),
        },
    };
    let network_gbps = match (given.network_gbps, &iface) {
        (Some(gbps), _) => Fact { value: gbps, source: Source::Given },
        (None, Some(iface)) => match link_speed_gbps(root, iface) {
            Some(gbps) => Fact { value: gbps, source: Source::Detected(format!("/sys/class/net/{iface}/speed")) },
            None => {
                Fact { value: DEFAULT_NETWORK_GBPS, source: Source::Default(format!("{iface} reports no link speed")) }
            }
        },
        (None, None) => Fact { value: DEFAULT_NETWORK_GBPS, source: Source::Default("no default route".to_owned()) },
    };
    let rdma = match given.rdma {
        Some(rdma) => Fact { value: rdma, source: Source::Given },
        None => {
            let devices = rdma_devices(root);
            let source = if devices.is_empty() {
                "no device in /sys/class/infiniband".to_owned()
            } else {
                format!("/sys/class/infiniband: {}", devices.join(", "))
            };
            Fact { value: !devices.is_empty(), source: Source::Detected(source) }
        }
    };
    HostNetwork { address, network_gbps, rdma }
}

fn given_or<T>(given: Option<T>, default: T, why: &str) -> Fact<T> {
    match given {
        Some(value) => Fact { value, source: Source::Given },
        None => Fact { value: default, source: Source::Default(why.to_owned()) },
    }
}

/// A simulated host (`--simulate`) reports what it is given, else the defaults: the host it runs on is not the
/// one it pretends to be.
pub fn describe_simulated(given: &Given, hostname: &str) -> HostNetwork {
    HostNetwork {
        address: given_or(given.address.clone(), hostname.to_owned(), "simulated host"),
        network_gbps: given_or(given.network_gbps, DEFAULT_NETWORK_GBPS, "simulated host"),
        rdma: given_or(given.rdma, false, "simulated host"),
    }
}

/// The interface of the IPv4 default route (destination and mask 0) with the lowest metric, from
/// `proc/net/route`.
pub fn default_route_interface(root: &Path) -> Option<String> {
    default_route(root).map(|route| route.iface)
}

/// The IPv4 default route: its interface and gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultRoute {
    pub iface: String,
    /// 0.0.0.0 for a point-to-point default route.
    pub gateway: Ipv4Addr,
}

pub fn default_route(root: &Path) -> Option<DefaultRoute> {
    let table = std::fs::read_to_string(root.join("proc/net/route")).ok()?;
    parse_default_route(&table)
}

/// `/proc/net/route`: `Iface Destination Gateway Flags RefCnt Use Metric Mask ...`, hex fields, a header line.
pub fn parse_default_route(table: &str) -> Option<DefaultRoute> {
    const RTF_UP: u32 = 0x1;
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (iface, destination, gateway, flags, metric, mask) =
                (fields.first()?, fields.get(1)?, fields.get(2)?, fields.get(3)?, fields.get(6)?, fields.get(7)?);
            // The kernel prints addresses in host byte order (little-endian on the hosts this runs on).
            let gateway = Ipv4Addr::from(u32::from_str_radix(gateway, 16).ok()?.swap_bytes());
            let flags = u32::from_str_radix(flags, 16).ok()?;
            let is_default =
                u32::from_str_radix(destination, 16).ok()? == 0 && u32::from_str_radix(mask, 16).ok()? == 0;
            let metric = metric.parse::<u32>().unwrap_or(u32::MAX);
            (is_default && flags & RTF_UP != 0).then(|| (metric, iface.to_string(), gateway))
        })
        .min()
        .map(|(_, iface, gateway)| DefaultRoute { iface, gateway })
}

/// The link speed of `iface` in Gbit/s (sysfs gives Mbit/s; -1 or nothing when the driver does not know, as for
/// virtual interfaces). Below 1 Gbit/s counts as 1.
pub fn link_speed_gbps(root: &Path, iface: &str) -> Option<i32> {
    if iface.contains('/') || iface.starts_with('.') {
        return None;
    }
    let text = std::fs::read_to_string(root.join("sys/class/net").join(iface).join("speed")).ok()?;
    let mbits: i64 = text.trim().parse().ok().filter(|mbits| *mbits > 0)?;
    i32::try_from((mbits + 999) / 1000).ok()
}

/// RDMA-capable devices (InfiniBand HCAs, RoCE NICs): the entries of `sys/class/infiniband`, sorted.
pub fn rdma_devices(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join("sys/class/infiniband")) else { return Vec::new() };
    let mut devices: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    devices.sort();
    devices
}

/// The address of the default route's interface: the source address the kernel picks to reach its gateway (a
/// UDP socket "connected" to it; no packet is sent). `None` without a default route.
pub fn default_route_address(root: &Path) -> Option<IpAddr> {
    let route = default_route(root)?;
    // A point-to-point default route has no gateway: any address outside local networks goes through it.
    let target = if route.gateway.is_unspecified() { Ipv4Addr::new(198, 51, 100, 1) } else { route.gateway };
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((target, 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
        wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n\
        ens5f0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
        ens5f0\t0000000A\t00000000\t0001\t0\t0\t100\t0000FFFF\t0\t0\t0\n";

    /// A fake root: `proc/net/route`, `sys/class/net/IFACE/speed`, `sys/class/infiniband/DEV`.
    fn fake_root(route: Option<&str>, speeds: &[(&str, &str)], rdma: &[&str]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("gpuplane-host-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("proc/net")).unwrap();
        if let Some(route) = route {
            std::fs::write(root.join("proc/net/route"), route).unwrap();
        }
        for (iface, speed) in speeds {
            std::fs::create_dir_all(root.join("sys/class/net").join(iface)).unwrap();
            std::fs::write(root.join("sys/class/net").join(iface).join("speed"), speed).unwrap();
        }
        for device in rdma {
            std::fs::create_dir_all(root.join("sys/class/infiniband").join(device)).unwrap();
        }
        root
    }

    #[test]
    fn the_default_route_is_the_lowest_metric_up_route_to_zero() {
        let route = parse_default_route(ROUTE).unwrap();
        assert_eq!((route.iface.as_str(), route.gateway), ("ens5f0", Ipv4Addr::new(10, 0, 0, 1)));
        let down =
            "Iface Destination Gateway Flags RefCnt Use Metric Mask\neth0 00000000 0100000A 0002 0 0 0 00000000\n";
        assert_eq!(parse_default_route(down), None, "a route that is not up");
        assert_eq!(parse_default_route("Iface Destination\n"), None);
        assert_eq!(parse_default_route("garbage\nnot a table at all\n"), None);
    }

    #[test]
    fn detects_speed_rdma_and_address_of_the_default_route() {
        let root = fake_root(Some(ROUTE), &[("ens5f0", "400000\n"), ("wlan0", "300")], &["mlx5_1", "mlx5_0"]);
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        let host = describe(&Given::default(), "gpu-07", &root, Some(ip));
        assert_eq!(host.address.value, "10.0.0.7");
        assert_eq!(host.address.source, Source::Detected("default route via ens5f0".into()));
        assert_eq!(host.network_gbps.value, 400);
        assert_eq!(host.network_gbps.source.to_string(), "detected (/sys/class/net/ens5f0/speed)");
        assert!(host.rdma.value);
        assert_eq!(host.rdma.source.to_string(), "detected (/sys/class/infiniband: mlx5_0, mlx5_1)");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn given_values_win_over_what_the_host_shows() {
        let root = fake_root(Some(ROUTE), &[("ens5f0", "400000")], &["mlx5_0"]);
        let given = Given { address: Some("gpu-07.dc1".into()), network_gbps: Some(200), rdma: Some(false) };
        let host = describe(&given, "gpu-07", &root, Some("10.0.0.7".parse().unwrap()));
        assert_eq!((host.address.value.as_str(), host.network_gbps.value, host.rdma.value), ("gpu-07.dc1", 200, false));
        assert!(
            [&host.address.source, &host.network_gbps.source, &host.rdma.source].iter().all(|s| **s == Source::Given)
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn without_a_route_or_a_known_speed_the_defaults_say_why() {
        let root = fake_root(None, &[], &[]);
        let host = describe(&Given::default(), "gpu-07", &root, None);
        assert_eq!(host.address.value, "gpu-07");
        assert!(matches!(host.address.source, Source::Default(_)));
        assert_eq!(host.network_gbps.value, DEFAULT_NETWORK_GBPS);
        assert_eq!(host.network_gbps.source.to_string(), "default (no default route)");
        assert!(!host.rdma.value);
        std::fs::remove_dir_all(root).unwrap();
        // A virtual NIC reports -1; a 1500 Mbit/s one rounds up; a sub-gigabit one counts as 1.
        let root = fake_root(Some(ROUTE), &[("ens5f0", "-1")], &[]);
        let host = describe(&Given::default(), "gpu-07", &root, None);
        assert_eq!(host.network_gbps.value, DEFAULT_NETWORK_GBPS);
        assert_eq!(host.network_gbps.source.to_string(), "default (ens5f0 reports no link speed)");
        assert_eq!(host.address.value, "gpu-07", "a route but no address for it");
        std::fs::write(root.join("sys/class/net/ens5f0/speed"), "1500").unwrap();
        assert_eq!(link_speed_gbps(&root, "ens5f0"), Some(2));
        std::fs::write(root.join("sys/class/net/ens5f0/speed"), "100").unwrap();
        assert_eq!(link_speed_gbps(&root, "ens5f0"), Some(1));
        assert_eq!(link_speed_gbps(&root, "../../etc"), None);
        std::fs::remove_dir_all(root).unwrap();
    }
}
