//! The client address of a request: the peer's, or, when the peer is a
//! trusted proxy (`proxy.trusted`), the one its forwarding header names.
//!
//! Each proxy appends the address it received the request from, so the
//! header reads `client, proxy1, proxy2` and the peer is the last proxy.
//! Only hops appended by trusted proxies can be believed: the walk goes
//! from the right, skips trusted addresses, and stops at the first
//! untrusted one (RFC 7239 §7.4; the usual "rightmost untrusted" rule of
//! nginx's `real_ip_recursive`). A client that sends its own header only
//! adds hops to the left of that one.

use actix_http::header::HeaderMap;
use std::net::{IpAddr, SocketAddr};
use switchboard_config::{canonical, ClientHeader, ProxySettings};

/// The client address of a request from `peer` with `headers`.
///
/// `peer` itself unless it is trusted. Then the rightmost hop of the
/// configured header that is not trusted; when every hop is trusted, the
/// leftmost; when a hop cannot be read (`unknown`, an obfuscated
/// identifier, garbage), the trusted hop to its right (nothing left of an
/// unreadable hop can be attributed). No header: `peer`.
pub fn resolve(
    proxy: &ProxySettings,
    peer: Option<SocketAddr>,
    headers: &HeaderMap,
) -> Option<IpAddr> {
    let peer = canonical(peer?.ip());
    if !proxy.trusts(peer) {
        return Some(peer);
    }
    let hops = match proxy.client_header {
        ClientHeader::XForwardedFor => x_forwarded_for(headers),
        ClientHeader::Forwarded => forwarded_for(headers),
    };
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop {
            Some(ip) => {
                client = canonical(*ip);
                if !proxy.trusts(client) {
                    break;
                }
            }
            None => break,
        }
    }
    Some(client)
}

/// The hops of every `X-Forwarded-For` line, in order; `None` for an
/// entry that is no address.
fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("x-forwarded-for")
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(|hop| node(hop.trim()))
        .collect()
}

/// The `for=` of every element of every `Forwarded` line (RFC 7239 §4),
/// in order; `None` for an element without one or one that is no address
/// (`unknown`, `_hidden`).
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("forwarded")
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(|element| {
            element.split(';').find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| node(value.trim().trim_matches('"')))
                    .flatten()
            })
        })
        .collect()
}

/// A node of either header: `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`,
/// `[2001:db8::1]:4711` or a bare IPv6 address (RFC 7239 §6).
fn node(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sock) = s.parse::<SocketAddr>() {
        return Some(sock.ip());
    }
    s.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_http::header::{HeaderName, HeaderValue};

    fn proxy(header: ClientHeader, trusted: &[&str]) -> ProxySettings {
        ProxySettings {
            trusted: trusted
                .iter()
                .map(|t| switchboard_config::parse_net(t).unwrap())
                .collect(),
            client_header: header,
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn at(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 5000))
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_sends() {
        let p = proxy(ClientHeader::XForwardedFor, &["10.0.0.0/8"]);
        let h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(resolve(&p, at("192.0.2.9"), &h), ip("192.0.2.9"));
        let none = proxy(ClientHeader::XForwardedFor, &[]);
        assert_eq!(resolve(&none, at("10.0.0.1"), &h), ip("10.0.0.1"));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let p = proxy(ClientHeader::XForwardedFor, &["10.0.0.0/8"]);
        // The client forged "6.6.6.6"; the trusted proxy appended what it saw.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6, 198.51.100.7"),
            ("x-forwarded-for", "10.0.0.5"),
        ]);
        assert_eq!(resolve(&p, at("10.0.0.1"), &h), ip("198.51.100.7"));
        // Every hop trusted: the leftmost.
        let h = headers(&[("x-forwarded-for", "10.1.1.1, 10.0.0.5")]);
        assert_eq!(resolve(&p, at("10.0.0.1"), &h), ip("10.1.1.1"));
        // No header: the proxy itself.
        assert_eq!(
            resolve(&p, at("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // An unreadable hop stops the walk at the trusted hop to its right.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, garbage, 10.0.0.5")]);
        assert_eq!(resolve(&p, at("10.0.0.1"), &h), ip("10.0.0.5"));
    }

    #[test]
    fn forwarded_for_values_of_every_form_are_read() {
        let p = proxy(ClientHeader::Forwarded, &["127.0.0.1", "::1"]);
        let h = headers(&[(
            "forwarded",
            r#"for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711""#,
        )]);
        assert_eq!(resolve(&p, at("127.0.0.1"), &h), ip("2001:db8:cafe::17"));
        let h = headers(&[("forwarded", r#"for="198.51.100.1:80", for=::1"#)]);
        assert_eq!(resolve(&p, at("::1"), &h), ip("198.51.100.1"));
        // `unknown` and obfuscated identifiers cannot be attributed.
        let h = headers(&[("forwarded", "for=unknown, for=_hidden")]);
        assert_eq!(resolve(&p, at("127.0.0.1"), &h), ip("127.0.0.1"));
        // The other header is ignored: the proxy passes it through.
        let h = headers(&[("x-forwarded-for", "6.6.6.6")]);
        assert_eq!(resolve(&p, at("127.0.0.1"), &h), ip("127.0.0.1"));
    }

    #[test]
    fn an_ipv4_mapped_peer_matches_its_ipv4_network() {
        let p = proxy(ClientHeader::XForwardedFor, &["127.0.0.0/8"]);
        let h = headers(&[("x-forwarded-for", "203.0.113.5")]);
        assert_eq!(resolve(&p, at("::ffff:127.0.0.1"), &h), ip("203.0.113.5"));
    }
}
