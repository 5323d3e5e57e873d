//! Connections counted per client address, so that one address cannot hold the whole connection
//! ceiling: at most [`ServeConfig::max_connections_per_address`](super::ServeConfig) open from
//! one address at once. An IPv6 client is counted by its /64 prefix (a host usually holds a whole
//! /64, so its addresses are one client); an IPv4-mapped IPv6 address is its IPv4 address.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// Open connections per client, with a ceiling; an [`AddressSlot`] gives its place back when
/// dropped.
#[derive(Debug)]
pub struct PerAddress {
    max: usize,
    /// Only clients with a connection open have an entry, so the map is as small as the set of
    /// connected clients (itself bounded by the connection ceiling).
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerAddress {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self { max: max.max(1), open: Mutex::new(HashMap::new()) })
    }

    /// A place for one more connection from `peer`, or `None` when its client holds the most.
    pub fn take(self: &Arc<Self>, peer: IpAddr) -> Option<AddressSlot> {
        let client = client_of(peer);
        let mut open = self.open.lock().unwrap();
        let n = open.entry(client).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot { counts: self.clone(), client })
    }

    /// Connections open from `peer`'s client now.
    pub fn open(&self, peer: IpAddr) -> usize {
        self.open.lock().unwrap().get(&client_of(peer)).copied().unwrap_or(0)
    }
}

/// One connection's place among its client's.
#[derive(Debug)]
pub struct AddressSlot {
    counts: Arc<PerAddress>,
    client: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().unwrap();
        if let Some(n) = open.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.client);
            }
        }
    }
}

/// The client an address is counted as: an IPv4 address itself, an IPv6 address's /64.
pub fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_another_still_gets_in() {
        let counts = PerAddress::new(2);
        let a: Vec<_> = (0..2).map(|_| counts.take(ip("10.0.0.1")).unwrap()).collect();
        assert!(counts.take(ip("10.0.0.1")).is_none(), "a third from the same address is refused");
        let b = counts.take(ip("10.0.0.2")).expect("another address gets in");
        drop(a);
        assert_eq!(counts.open(ip("10.0.0.1")), 0, "closed connections give their places back");
        assert!(counts.take(ip("10.0.0.1")).is_some());
        drop(b);
        assert!(counts.open.lock().unwrap().len() <= 1, "clients without connections leave the map");
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_address_is_the_ipv4_address() {
        assert_eq!(client_of(ip("2001:db8:1:2:aaaa::1")), client_of(ip("2001:db8:1:2:bbbb::9")));
        assert_ne!(client_of(ip("2001:db8:1:2::1")), client_of(ip("2001:db8:1:3::1")));
        assert_eq!(client_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        let counts = PerAddress::new(1);
        let _held = counts.take(ip("2001:db8::1")).unwrap();
        assert!(counts.take(ip("2001:db8::2")).is_none(), "another address of the same /64 is the same client");
    }
}
