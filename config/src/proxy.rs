//! The `[proxy]` section: which peers are trusted reverse proxies, and
//! which header of theirs names the client.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Reverse proxies in front of the node (nginx, a load balancer).
///
/// Everything keyed per client IP (connection caps, held-poll caps, the
/// pairing and room buckets, request logs) uses the client address these
/// settings resolve: the peer address, unless the peer is in `trusted`;
/// then the rightmost address of `client_header` that is not in `trusted`
/// (RFC 7239 §7.4: the hops left of the first untrusted one may be forged).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySettings {
    /// Trusted proxy addresses and networks (`10.0.0.0/8`, `127.0.0.1`,
    /// `::1`). Empty (the default): no peer is trusted and the forwarding
    /// headers are ignored, so a client cannot choose its own address.
    #[serde(
        serialize_with = "serialize_nets",
        deserialize_with = "deserialize_nets"
    )]
    pub trusted: Vec<IpNet>,
    /// The header the trusted proxies set.
    pub client_header: ClientHeader,
}

impl ProxySettings {
    /// Whether `ip` is one of [`ProxySettings::trusted`]. An IPv4-mapped
    /// IPv6 address (`::ffff:10.0.0.1`, a dual-stack listener's view of an
    /// IPv4 peer) is matched as its IPv4 address.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.trusted.iter().any(|net| net.contains(&ip))
    }
}

/// `ip` with an IPv4-mapped IPv6 address turned into IPv4.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Which forwarding header names the client. Only one is read: a proxy
/// that sets one passes the other through from the client unchanged, so
/// reading both would let a client forge its address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClientHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx's
    /// `$proxy_add_x_forwarded_for`).
    #[default]
    #[serde(rename = "x-forwarded-for")]
    XForwardedFor,
    /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239).
    #[serde(rename = "forwarded")]
    Forwarded,
}

/// Parses one entry: a network in CIDR form or a bare address (a /32 or /128).
///
/// # Errors
/// A phrase saying what was expected.
pub fn parse_net(entry: &str) -> Result<IpNet, String> {
    let entry = entry.trim();
    entry
        .parse::<IpNet>()
        .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
        .map(|net| net.trunc())
        .map_err(|_| {
            format!("{entry:?} is not an IP address or network (e.g. 10.0.0.0/8, 127.0.0.1, ::1)")
        })
}

fn serialize_nets<S: Serializer>(nets: &[IpNet], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(nets.iter().map(ToString::to_string))
}

/// A list of entries, or one string of them separated by commas (the form
/// an environment variable takes: `SWITCHBOARD_PROXY__TRUSTED=10.0.0.0/8,::1`).
fn deserialize_nets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    struct Nets;
    impl<'de> Visitor<'de> for Nets {
        type Value = Vec<IpNet>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(
                "a list of IP addresses or networks, or one string of them separated by commas",
            )
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            v.split(',')
                .filter(|e| !e.trim().is_empty())
                .map(|e| parse_net(e).map_err(E::custom))
                .collect()
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(entry) = seq.next_element::<String>()? {
                out.push(parse_net(&entry).map_err(de::Error::custom)?);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Nets)
}
