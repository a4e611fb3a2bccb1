//! The SSRF guard: webhook URLs must be https and resolve only to public addresses, unless the service runs with
//! `--webhook-allow-private`. Deliveries connect to the address that was checked (no second DNS lookup).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use reqwest::Url;

/// A URL that passed the guard, and the address to connect to (None: resolve normally, private allowed).
#[derive(Debug, Clone)]
pub struct Vetted {
    pub url: Url,
    pub pin: Option<SocketAddr>,
}

/// Whether an address is one a webhook must never reach: loopback, RFC 1918 private, CGNAT, link-local (cloud
/// metadata included), ULA, multicast, broadcast, documentation, unspecified, or an IPv4 address in IPv6 clothing.
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_forbidden_v4(v4);
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local, fd00:ec2::254 (AWS metadata) included
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0x64 && s[1] == 0xff9b) // NAT64 to anything
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || s[..6] == [0; 6] // IPv4-compatible
                || s[0] == 0x2002 // 6to4 wraps an IPv4 address
        }
    }
}

fn is_forbidden_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local() // 169.254.0.0/16: 169.254.169.254 metadata
        || v4.is_unspecified()
        || v4.is_multicast()
        || v4.is_broadcast()
        || v4.is_documentation()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // CGNAT 100.64.0.0/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking
        || o[0] >= 240 // reserved
}

/// Check a URL's form (no resolution): absolute http(s) with a host and no credentials; https unless
/// `allow_private`.
pub fn check_form(text: &str, allow_private: bool) -> Result<Url, String> {
    if text.len() > 2048 {
        return Err("at most 2048 characters".into());
    }
    // The URL parser would quietly drop or encode these; the client must see the URL it gave refused instead.
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters".into());
    }
    let url = Url::parse(text).map_err(|e| format!("not an absolute URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => return Err("must use https".into()),
        _ => return Err("must be an https URL".into()),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".into());
    }
    if url.fragment().is_some() {
        return Err("must not have a fragment".into());
    }
    Ok(url)
}

/// Check a URL and resolve its host once. Without `allow_private`, every address it resolves to must be public,
/// and the first one is pinned for the connection.
pub async fn vet(text: &str, allow_private: bool) -> Result<Vetted, String> {
    let url = check_form(text, allow_private)?;
    if allow_private {
        return Ok(Vetted { url, pin: None });
    }
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            tokio::time::timeout(std::time::Duration::from_secs(5), tokio::net::lookup_host((host.as_str(), port)))
                .await
                .map_err(|_| format!("resolving {host} timed out"))?
                .map_err(|e| format!("{host} does not resolve: {e}"))?
                .collect()
        }
    };
    if let Some(bad) = addrs.iter().find(|a| is_forbidden(a.ip())) {
        return Err(format!(
            "resolves to {}, a loopback, private, link-local or otherwise non-public address",
            bad.ip()
        ));
    }
    let pin = *addrs.first().ok_or_else(|| format!("{host} resolves to no address"))?;
    Ok(Vetted { url, pin: Some(pin) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_metadata_addresses_are_forbidden_public_ones_are_not() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(is_forbidden(bad.parse().unwrap()), "{bad}");
        }
        for good in ["1.1.1.1", "8.8.8.8", "100.128.0.1", "2606:4700:4700::1111"] {
            assert!(!is_forbidden(good.parse().unwrap()), "{good}");
        }
    }

    #[test]
    fn url_form_rules() {
        assert!(check_form("https://hooks.example.com/x", false).is_ok());
        assert!(check_form("http://hooks.example.com/x", false).unwrap_err().contains("https"));
        assert!(check_form("http://hooks.example.com/x", true).is_ok());
        assert!(check_form("ftp://hooks.example.com/x", true).is_err());
        assert!(check_form("https://user:pw@hooks.example.com/", false).unwrap_err().contains("credentials"));
        assert!(check_form("/relative", false).is_err());
        assert!(check_form("https://a.example/x y", false).unwrap_err().contains("whitespace"));
        assert!(check_form(" https://a.example/", false).is_err());
        assert!(check_form(&format!("https://a.example/{}", "x".repeat(2100)), false).is_err());
    }

    #[tokio::test]
    async fn vetting_refuses_loopback_unless_private_is_allowed() {
        assert!(vet("https://127.0.0.1:9/hook", false).await.unwrap_err().contains("127.0.0.1"));
        assert!(vet("https://[::1]/hook", false).await.is_err());
        assert!(vet("https://localhost/hook", false).await.is_err());
        let ok = vet("https://8.8.8.8/hook", false).await.unwrap();
        assert_eq!(ok.pin.unwrap().to_string(), "8.8.8.8:443");
        assert!(vet("http://127.0.0.1:9/hook", true).await.unwrap().pin.is_none());
    }
}
