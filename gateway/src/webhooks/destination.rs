//! Which webhook URLs are accepted, and where a delivery may connect.
//!
//! Protocol §11 (`POST /webhook { url }`, "Webhook contract v2") lets an
//! agent name any URL, and the gateway then POSTs to it from inside the
//! deployment's network. Two checks keep that from reaching what the
//! agent should not (server-side request forgery):
//!
//! - [`check_url`], when the URL is set and before each attempt: its shape
//!   (absolute `https://`, a host, no userinfo, no fragment, at most
//!   2,048 characters). Refusals are 400 `INVALID_WEBHOOK_URL`.
//! - [`resolve`], when the URL is set and again before each attempt: the
//!   host's addresses, refused when any is loopback, private, link-local,
//!   CGNAT, multicast, broadcast, reserved, documentation or a cloud
//!   metadata address ([`is_forbidden`]). Refusals are 400
//!   `WEBHOOK_DESTINATION_FORBIDDEN`. The caller connects to exactly the
//!   addresses returned (no second lookup), so a DNS answer that changes
//!   in between (rebinding) cannot reach an internal address.
//!
//! `webhooks.allow_http` and `webhooks.allow_private_destinations` relax
//! them for tests and local development.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use switchboard_protocol::error::ErrorCode;
use url::{Host, Url};

/// Longest webhook URL accepted, in characters, as given and as normalized.
pub const MAX_URL_CHARS: usize = 2048;

/// Longest wait for the host's addresses; a slower answer counts as not
/// resolving.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a webhook URL is refused. Each refusal is its own variant;
/// [`DestinationError::code`] gives the wire code and `Display` a lowercase
/// message that never contains a resolved address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// Longer than [`MAX_URL_CHARS`] characters (as given or normalized).
    #[error("webhook url is {0} characters long; at most 2048 are allowed")]
    TooLong(usize),
    /// Contains whitespace or control characters (which URL parsing would
    /// otherwise silently strip).
    #[error("webhook url must not contain whitespace or control characters")]
    Whitespace,
    /// A relative URL (`/hook`, `example.com/hook`).
    #[error("webhook url must be absolute, e.g. https://example.com/hook")]
    NotAbsolute,
    /// Not a URL at all; the parser's reason.
    #[error("webhook url is not a valid url: {0}")]
    Malformed(String),
    /// A scheme other than `https` (or `http` when allowed).
    #[error("webhook url must use https, not {0}")]
    UnsupportedScheme(String),
    /// `http://` while `webhooks.allow_http` is off.
    #[error("webhook url must use https; http is not allowed on this server")]
    HttpNotAllowed,
    /// No host (`https://`, `https://:443/`).
    #[error("webhook url has no host")]
    MissingHost,
    /// A user name or password in the URL (`https://user:pw@host/`).
    #[error("webhook url must not contain a user name or password")]
    Userinfo,
    /// Port 0, which nothing can listen on.
    #[error("webhook url has port 0")]
    PortZero,
    /// A fragment (`#…`), which is never sent to the server.
    #[error("webhook url must not contain a fragment (#...)")]
    Fragment,
    /// The host has no address, or the lookup failed or timed out.
    #[error("webhook host {0} does not resolve")]
    Unresolvable(String),
    /// The host is, or resolves to, an address deliveries may not reach
    /// (see [`is_forbidden`]). The address is kept for logs but left out
    /// of the message, which the agent sees.
    #[error(
        "webhook destination is a loopback, private, link-local, metadata or otherwise \
         reserved address"
    )]
    Forbidden(IpAddr),
}

impl DestinationError {
    /// The [`ErrorCode`] of the refusal: [`ErrorCode::WebhookDestinationForbidden`]
    /// for [`DestinationError::Forbidden`], [`ErrorCode::InvalidWebhookUrl`]
    /// for every other (both 400).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            DestinationError::Forbidden(_) => ErrorCode::WebhookDestinationForbidden,
            _ => ErrorCode::InvalidWebhookUrl,
        }
    }

    /// The wire form of [`DestinationError::error_code`]:
    /// `INVALID_WEBHOOK_URL` or `WEBHOOK_DESTINATION_FORBIDDEN`.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }
}

/// Checks the shape of a webhook URL (protocol §11, `POST /webhook`) and
/// returns it parsed and normalized (what to store and deliver to).
///
/// Accepted: an absolute `https://` URL (`http://` too when `allow_http`)
/// with a host, no user name or password, no fragment, at most 2,048
/// characters both as given and normalized, without whitespace or control
/// characters. The host is not looked up here: see [`resolve`].
///
/// # Errors
///
/// The first rule broken, as a [`DestinationError`] whose code is
/// `INVALID_WEBHOOK_URL`.
pub fn check_url(raw: &str, allow_http: bool) -> Result<Url, DestinationError> {
    let chars = raw.chars().count();
    if chars > MAX_URL_CHARS {
        return Err(DestinationError::TooLong(chars));
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(DestinationError::Whitespace);
    }
    let url = Url::parse(raw).map_err(|e| match e {
        url::ParseError::RelativeUrlWithoutBase => DestinationError::NotAbsolute,
        url::ParseError::EmptyHost => DestinationError::MissingHost,
        other => DestinationError::Malformed(other.to_string()),
    })?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => return Err(DestinationError::HttpNotAllowed),
        other => return Err(DestinationError::UnsupportedScheme(other.to_owned())),
    }
    match url.host() {
        None => return Err(DestinationError::MissingHost),
        Some(Host::Domain("")) => return Err(DestinationError::MissingHost),
        Some(_) => {}
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(DestinationError::Userinfo);
    }
    if url.port() == Some(0) {
        return Err(DestinationError::PortZero);
    }
    if url.fragment().is_some() {
        return Err(DestinationError::Fragment);
    }
    let normalized = url.as_str().chars().count();
    if normalized > MAX_URL_CHARS {
        return Err(DestinationError::TooLong(normalized));
    }
    Ok(url)
}

/// The addresses a delivery to `url` may connect to: the host's, looked up
/// now (an IP literal is taken as it is), with the URL's port (443 / 80 when
/// absent), in the resolver's order without repeats.
///
/// Unless `allow_private`, the URL is refused when ANY address is
/// forbidden ([`is_forbidden`]): a host with one public and one internal
/// address is refused as a whole. The caller must connect only to the
/// addresses returned, never look the host up again (DNS-rebinding
/// defence), and resolve again before each attempt.
///
/// # Errors
///
/// [`DestinationError::Unresolvable`] (`INVALID_WEBHOOK_URL`) when the
/// lookup fails, answers nothing or takes longer than [`RESOLVE_TIMEOUT`];
/// [`DestinationError::Forbidden`] (`WEBHOOK_DESTINATION_FORBIDDEN`);
/// [`DestinationError::MissingHost`] for a URL without a host.
pub async fn resolve(url: &Url, allow_private: bool) -> Result<Vec<SocketAddr>, DestinationError> {
    let port = url.port_or_known_default().unwrap_or(443);
    let mut addrs: Vec<SocketAddr> = match url.host() {
        None => return Err(DestinationError::MissingHost),
        Some(Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(Host::Domain(domain)) => {
            let unresolvable = || DestinationError::Unresolvable(domain.to_owned());
            tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((domain, port)))
                .await
                .map_err(|_| unresolvable())?
                .map_err(|_| unresolvable())?
                .collect()
        }
    };
    let mut seen = std::collections::HashSet::new();
    addrs.retain(|addr| seen.insert(*addr));
    if addrs.is_empty() {
        return Err(DestinationError::Unresolvable(
            url.host_str().unwrap_or_default().to_owned(),
        ));
    }
    if !allow_private {
        if let Some(bad) = addrs.iter().find(|addr| is_forbidden(addr.ip())) {
            return Err(DestinationError::Forbidden(bad.ip()));
        }
    }
    Ok(addrs)
}

/// Whether deliveries may not connect to `ip` (unless
/// `webhooks.allow_private_destinations`): any address that is not a
/// public unicast one.
///
/// IPv4: 0.0.0.0/8 ("this network", unspecified), 10/8, 100.64/10 (CGNAT),
/// 127/8 (loopback), 169.254/16 (link-local, with the cloud metadata
/// address 169.254.169.254), 172.16/12, 192.0.0/24 (IETF protocol
/// assignments), 192.0.2/24, 198.51.100/24 and 203.0.113/24
/// (documentation), 192.168/16, 198.18/15 (benchmarking), 224/4
/// (multicast), 240/4 (reserved, with the broadcast 255.255.255.255).
///
/// IPv6: `::` and `::1`, every other address of ::/64 except
/// IPv4-mapped ones (`::ffff:a.b.c.d`), which are judged by their IPv4
/// address; 64:ff9b::/96 (NAT64) and 2002::/16 (6to4), judged by the IPv4
/// address they embed; 64:ff9b:1::/48 (local NAT64), 100::/64 (discard),
/// 2001::/23 (IETF protocol assignments, Teredo included), 2001:db8::/32
/// and 3fff::/20 (documentation), fc00::/7 (unique local, with the AWS
/// metadata address fd00:ec2::254), fe80::/10 (link-local), fec0::/10
/// (site-local), ff00::/8 (multicast).
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_forbidden(v4),
        IpAddr::V6(v6) => v6_forbidden(v6),
    }
}

fn v4_forbidden(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // "this network" (0/8), the unspecified address included
        || a == 10 // private
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || a == 127 // loopback
        || (a == 169 && b == 254) // link-local, metadata 169.254.169.254
        || (a == 172 && (16..32).contains(&b)) // private 172.16/12
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 168) // private
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18/15
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224 // multicast 224/4, reserved 240/4, broadcast
}

/// The IPv4 address in the last 32 bits of `ip`.
fn last_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let o = ip.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

fn v6_forbidden(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if s[..4] == [0, 0, 0, 0] {
        // ::ffff:a.b.c.d is that IPv4 address (an IPv4 socket on dual stack).
        if s[4..6] == [0, 0xffff] {
            return v4_forbidden(last_v4(ip));
        }
        // ::, ::1, IPv4-compatible ::a.b.c.d, IPv4-translated
        // ::ffff:0:a.b.c.d: none is a public unicast destination.
        return true;
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 well-known prefix: a gateway forwards to the IPv4 address.
        return v4_forbidden(last_v4(ip));
    }
    if s[0] == 0x2002 {
        // 6to4: the IPv4 address sits in bits 16..48.
        let [hi, lo] = [s[1].to_be_bytes(), s[2].to_be_bytes()];
        return v4_forbidden(Ipv4Addr::new(hi[0], hi[1], lo[0], lo[1]));
    }
    (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // local-use NAT64 64:ff9b:1::/48
        || s[..4] == [0x100, 0, 0, 0] // discard-only 100::/64
        || (s[0] == 0x2001 && s[1] < 0x200) // IETF protocol assignments 2001::/23
        || (s[0] == 0x2001 && s[1] == 0xdb8) // documentation 2001:db8::/32
        || (s[0] == 0x3fff && s[1] < 0x1000) // documentation 3fff::/20
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7, metadata fd00:ec2::254
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
        || (s[0] & 0xff00) == 0xff00 // multicast ff00::/8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_addresses() {
        let cases: &[(&str, bool)] = &[
            // IPv4, public.
            ("8.8.8.8", false),
            ("1.1.1.1", false),
            ("93.184.216.34", false),
            ("100.63.255.255", false), // just below CGNAT
            ("100.128.0.0", false),    // just above CGNAT
            ("172.15.255.255", false), // just below 172.16/12
            ("172.32.0.0", false),     // just above
            ("192.0.1.1", false),
            ("192.88.99.1", false),
            ("192.169.0.1", false),
            ("198.17.255.255", false),
            ("198.20.0.0", false),
            ("223.255.255.255", false),
            ("169.253.1.1", false),
            // IPv4, forbidden.
            ("0.0.0.0", true),
            ("0.1.2.3", true),
            ("10.0.0.1", true),
            ("10.255.255.255", true),
            ("100.64.0.1", true),
            ("100.100.100.200", true), // Alibaba Cloud metadata (CGNAT)
            ("100.127.255.255", true),
            ("127.0.0.1", true),
            ("127.255.0.1", true),
            ("169.254.0.1", true),
            ("169.254.169.254", true), // cloud metadata
            ("172.16.0.1", true),
            ("172.31.255.255", true),
            ("192.0.0.192", true),
            ("192.0.2.1", true),
            ("192.168.1.1", true),
            ("198.18.0.1", true),
            ("198.19.255.255", true),
            ("198.51.100.7", true),
            ("203.0.113.9", true),
            ("224.0.0.1", true),
            ("239.255.255.250", true),
            ("240.0.0.1", true),
            ("255.255.255.255", true),
            // IPv6, public.
            ("2606:4700:4700::1111", false),
            ("2001:4860:4860::8888", false),
            ("2a00:1450:4001:82a::200e", false),
            ("2001:200::1", false), // just past 2001::/23
            ("2003::1", false),
            ("3ffe::1", false),
            ("3ff0::1", false),
            ("3fff:1000::1", false), // just past 3fff::/20
            ("::ffff:8.8.8.8", false),
            ("64:ff9b::808:808", false), // NAT64 of 8.8.8.8
            ("2002:808:808::1", false),  // 6to4 of 8.8.8.8
            ("fbff::1", false),
            // IPv6, forbidden.
            ("::", true),
            ("::1", true),
            ("::7f00:1", true),         // IPv4-compatible 127.0.0.1
            ("::ffff:0:808:808", true), // IPv4-translated
            ("::ffff:127.0.0.1", true), // mapped loopback
            ("::ffff:10.1.2.3", true),  // mapped private
            ("::ffff:169.254.169.254", true),
            ("::ffff:100.64.0.1", true),
            ("::ffff:0.0.0.0", true),
            ("::ffff:255.255.255.255", true),
            ("64:ff9b::7f00:1", true),    // NAT64 of 127.0.0.1
            ("64:ff9b::a9fe:a9fe", true), // NAT64 of 169.254.169.254
            ("64:ff9b:1::1", true),
            ("2002:7f00:1::1", true),   // 6to4 of 127.0.0.1
            ("2002:c0a8:101::1", true), // 6to4 of 192.168.1.1
            ("100::1", true),
            ("2001::1", true), // Teredo
            ("2001:1ff:ffff::1", true),
            ("2001:db8::1", true),
            ("3fff::1", true),
            ("3fff:fff::1", true),
            ("fc00::1", true),
            ("fd12:3456::1", true),
            ("fd00:ec2::254", true), // AWS metadata
            ("fe80::1", true),
            ("febf::1", true),
            ("fec0::1", true),
            ("ff02::1", true),
            ("ff05::2", true),
        ];
        for (ip, forbidden) in cases {
            let parsed: IpAddr = ip.parse().unwrap_or_else(|_| panic!("{ip} parses"));
            assert_eq!(is_forbidden(parsed), *forbidden, "{ip}");
        }
    }

    #[test]
    fn url_shapes() {
        use DestinationError as E;
        let long_path = "a".repeat(MAX_URL_CHARS);
        let at_limit = format!("https://e.com/{}", "a".repeat(MAX_URL_CHARS - 14));
        let over_limit = format!("https://e.com/{}", "a".repeat(MAX_URL_CHARS - 13));
        // Fine as given, too long once normalized: each `é` of the path is
        // percent-encoded to 6 characters.
        let grows = format!("https://e.com/{}", "é".repeat(400));
        let cases: Vec<(&str, bool, Result<&str, E>)> = vec![
            (
                "https://example.com/hook",
                false,
                Ok("https://example.com/hook"),
            ),
            ("https://example.com", false, Ok("https://example.com/")),
            (
                "HTTPS://Example.COM:443/a?b=c",
                false,
                Ok("https://example.com/a?b=c"),
            ),
            (
                "https://example.com:8443/x",
                false,
                Ok("https://example.com:8443/x"),
            ),
            ("https://10.0.0.1/x", false, Ok("https://10.0.0.1/x")), // shape only
            ("https://[::1]:9/x", false, Ok("https://[::1]:9/x")),
            (
                "https://bücher.example/",
                false,
                Ok("https://xn--bcher-kva.example/"),
            ),
            (
                "http://localhost:8080/h",
                true,
                Ok("http://localhost:8080/h"),
            ),
            (at_limit.as_str(), false, Ok(at_limit.as_str())),
            ("http://example.com/", false, Err(E::HttpNotAllowed)),
            (
                "ftp://example.com/",
                true,
                Err(E::UnsupportedScheme("ftp".into())),
            ),
            (
                "ws://example.com/",
                false,
                Err(E::UnsupportedScheme("ws".into())),
            ),
            (
                "file:///etc/passwd",
                true,
                Err(E::UnsupportedScheme("file".into())),
            ),
            (
                "mailto:a@example.com",
                false,
                Err(E::UnsupportedScheme("mailto".into())),
            ),
            ("/hook", false, Err(E::NotAbsolute)),
            ("example.com/hook", false, Err(E::NotAbsolute)),
            ("", false, Err(E::NotAbsolute)),
            ("https://", false, Err(E::MissingHost)),
            ("https://:443/x", false, Err(E::MissingHost)),
            ("https://user@example.com/", false, Err(E::Userinfo)),
            ("https://user:pw@example.com/", false, Err(E::Userinfo)),
            ("https://:pw@example.com/", false, Err(E::Userinfo)),
            ("https://example.com/#frag", false, Err(E::Fragment)),
            ("https://example.com/#", false, Err(E::Fragment)),
            (" https://example.com/", false, Err(E::Whitespace)),
            ("https://example.com/a b", false, Err(E::Whitespace)),
            ("https://exa\tmple.com/", false, Err(E::Whitespace)),
            ("https://example.com/\n", false, Err(E::Whitespace)),
            (
                "https://example.com:99999/",
                false,
                Err(E::Malformed("invalid port number".into())),
            ),
            (
                "https://[::1/",
                false,
                Err(E::Malformed("invalid IPv6 address".into())),
            ),
            (
                over_limit.as_str(),
                false,
                Err(E::TooLong(MAX_URL_CHARS + 1)),
            ),
            (long_path.as_str(), false, Err(E::NotAbsolute)),
        ];
        for (raw, allow_http, expected) in cases {
            let got = check_url(raw, allow_http);
            match expected {
                Ok(normalized) => {
                    assert_eq!(got.as_ref().map(Url::as_str), Ok(normalized), "{raw}")
                }
                Err(error) => assert_eq!(got, Err(error), "{raw}"),
            }
        }
        assert!(grows.chars().count() <= MAX_URL_CHARS);
        assert!(matches!(check_url(&grows, false), Err(E::TooLong(n)) if n > MAX_URL_CHARS));
        assert_eq!(
            check_url(&format!("https://e.com/{}", "a".repeat(5000)), false),
            Err(E::TooLong(5000 + 14))
        );
    }

    #[test]
    fn codes_and_messages() {
        use DestinationError as E;
        let shape = [
            E::TooLong(3000),
            E::Whitespace,
            E::NotAbsolute,
            E::Malformed("invalid port number".into()),
            E::UnsupportedScheme("ftp".into()),
            E::HttpNotAllowed,
            E::MissingHost,
            E::Userinfo,
            E::Fragment,
            E::Unresolvable("nowhere.invalid".into()),
        ];
        let mut messages = std::collections::HashSet::new();
        for error in &shape {
            assert_eq!(error.code(), "INVALID_WEBHOOK_URL", "{error:?}");
            assert_eq!(error.error_code(), ErrorCode::InvalidWebhookUrl);
            assert_eq!(error.error_code().status(), 400);
            let message = error.to_string();
            assert!(message.starts_with("webhook "), "{message}");
            assert!(messages.insert(message), "{error:?}: not distinct");
        }
        let forbidden = E::Forbidden("10.0.0.1".parse().unwrap());
        assert_eq!(forbidden.code(), "WEBHOOK_DESTINATION_FORBIDDEN");
        assert_eq!(forbidden.error_code().status(), 400);
        let message = forbidden.to_string();
        assert!(!message.contains("10.0.0.1"), "{message}");
        assert_eq!(message, message.to_lowercase());
    }

    fn url(raw: &str) -> Url {
        check_url(raw, true).unwrap()
    }

    #[tokio::test]
    async fn ip_literals_resolve_to_themselves_with_the_port() {
        assert_eq!(
            resolve(&url("https://8.8.8.8/x"), false).await,
            Ok(vec!["8.8.8.8:443".parse().unwrap()])
        );
        assert_eq!(
            resolve(&url("http://[2606:4700:4700::1111]:8080/"), false).await,
            Ok(vec!["[2606:4700:4700::1111]:8080".parse().unwrap()])
        );
        assert_eq!(
            resolve(&url("http://1.1.1.1/"), false).await,
            Ok(vec!["1.1.1.1:80".parse().unwrap()])
        );
    }

    #[tokio::test]
    async fn private_destinations_are_refused_unless_allowed() {
        for raw in [
            "https://127.0.0.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://[fd00:ec2::254]/",
            "https://[::ffff:127.0.0.1]/",
            "https://0x7f.1/", // 127.0.0.1 in another spelling
            "https://2130706433/",
            "https://10.1.2.3:8443/",
        ] {
            let url = url(raw);
            let refused = resolve(&url, false).await.unwrap_err();
            assert!(matches!(refused, DestinationError::Forbidden(_)), "{raw}");
            assert_eq!(refused.code(), "WEBHOOK_DESTINATION_FORBIDDEN");
            let allowed = resolve(&url, true).await.expect(raw);
            assert_eq!(allowed.len(), 1, "{raw}");
        }
    }

    /// `localhost` is looked up, not matched by name, and refused for the
    /// address it resolves to.
    #[tokio::test]
    async fn names_are_resolved_and_judged_by_every_address() {
        let localhost = url("http://localhost:8080/hook");
        let refused = resolve(&localhost, false).await;
        assert!(
            matches!(refused, Err(DestinationError::Forbidden(ip)) if ip.is_loopback()),
            "{refused:?}"
        );
        let allowed = resolve(&localhost, true).await.expect("localhost resolves");
        assert!(!allowed.is_empty());
        assert!(allowed
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080));
        let distinct: std::collections::HashSet<_> = allowed.iter().collect();
        assert_eq!(distinct.len(), allowed.len(), "no repeats");
    }

    #[tokio::test]
    async fn unresolvable_hosts_are_invalid_urls() {
        // .invalid never resolves (RFC 6761).
        let refused = resolve(&url("https://no-such-host.invalid/"), true).await;
        assert_eq!(
            refused,
            Err(DestinationError::Unresolvable(
                "no-such-host.invalid".into()
            ))
        );
        assert_eq!(refused.unwrap_err().code(), "INVALID_WEBHOOK_URL");
    }
}
