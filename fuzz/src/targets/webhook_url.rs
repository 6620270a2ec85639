//! `webhook_url`: the `url` of `POST /webhook` (`SetWebhook`, protocol §11)
//! through its public validation layer in gateway/src/webhooks/
//! destination.rs: [`check_url`] (the shape, checked when the URL is set
//! AND again before every delivery attempt, on the stored normalized form)
//! and [`is_forbidden`] (the SSRF address filter).
//!
//! Properties:
//! - nothing panics; `check_url` is deterministic;
//! - an accepted URL is `https` (or `http` when allowed), has a non-empty
//!   host, no user name or password, no fragment, no port 0, at most 2,048
//!   characters as given and as normalized, and the given text had no
//!   whitespace or control character; every refusal is
//!   `INVALID_WEBHOOK_URL`;
//! - normalizing is idempotent: the stored form passes `check_url` again
//!   and normalizes to itself (otherwise a webhook accepted once would fail
//!   before every delivery);
//! - what is accepted without `allow_http` is accepted the same with it;
//! - `is_forbidden` judges an IPv4 address, its IPv4-mapped form
//!   (`::ffff:a.b.c.d`), its NAT64 form (`64:ff9b::a.b.c.d`) and its 6to4
//!   form (`2002:aabb:ccdd::`) alike, and an accepted IP-literal host the
//!   same as its parsed address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use switchboard_gateway::webhooks::destination::{check_url, is_forbidden, MAX_URL_CHARS};
use switchboard_protocol::error::ErrorCode;

const DICT: &[&[u8]] = &[
    b"https://",
    b"http://",
    b"ftp://",
    b"file:///",
    b"data:",
    b"HTTPS://",
    b"//",
    b"example.com",
    b"hooks.example.com",
    b"xn--",
    "bücher.example".as_bytes(),
    b"127.0.0.1",
    b"0x7f.1",
    b"2130706433",
    b"[::1]",
    b"[::ffff:127.0.0.1]",
    b"[::ffff:8.8.8.8]",
    b"[64:ff9b::a00:1]",
    b"[2002:c0a8:101::]",
    b"[fd00:ec2::254]",
    b"169.254.169.254",
    b"user:pw@",
    b"@",
    b":0",
    b":443",
    b":65536",
    b":",
    b"#frag",
    b"?q=1",
    b"/hook",
    b"/../",
    b"/./",
    b"%2e%2e",
    b"%00",
    b"%",
    b"\\",
    b".",
    b"[",
    b"]",
];

fn check_ip_forms(v4: Ipv4Addr) {
    let verdict = is_forbidden(IpAddr::V4(v4));
    let o = v4.octets();
    let mapped = v4.to_ipv6_mapped();
    let nat64 = Ipv6Addr::new(
        0x64,
        0xff9b,
        0,
        0,
        0,
        0,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
    );
    let six_to_four = Ipv6Addr::new(
        0x2002,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
        0,
        0,
        0,
        0,
        1,
    );
    for (form, v6) in [("mapped", mapped), ("nat64", nat64), ("6to4", six_to_four)] {
        assert_eq!(
            is_forbidden(IpAddr::V6(v6)),
            verdict,
            "{v4} and its {form} form {v6} are judged differently"
        );
    }
}

fn check_accepted(raw: &str, allow_http: bool) {
    let Ok(url) = check_url(raw, allow_http) else {
        return;
    };
    crate::deep();
    assert!(!raw.chars().any(|c| c.is_whitespace() || c.is_control()));
    assert!(raw.chars().count() <= MAX_URL_CHARS);
    match url.scheme() {
        "https" => {}
        "http" => assert!(allow_http, "http accepted without allow_http: {raw}"),
        other => panic!("scheme {other} accepted: {raw}"),
    }
    assert!(
        url.host_str().is_some_and(|h| !h.is_empty()),
        "no host: {raw}"
    );
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{raw}"
    );
    assert!(url.fragment().is_none(), "{raw}");
    assert_ne!(url.port(), Some(0), "{raw}");
    let stored = url.to_string();
    assert!(stored.chars().count() <= MAX_URL_CHARS, "{stored}");
    let again = check_url(&stored, allow_http)
        .unwrap_or_else(|e| panic!("{raw:?} was accepted as {stored:?}, which is refused: {e}"));
    assert_eq!(
        again.as_str(),
        stored,
        "normalizing {raw:?} is not idempotent"
    );
    if !allow_http {
        assert_eq!(
            check_url(raw, true).map(|u| u.to_string()),
            Ok(stored.clone())
        );
    }
    match url.host() {
        Some(url::Host::Ipv4(ip)) => {
            check_ip_forms(ip);
        }
        Some(url::Host::Ipv6(ip)) => {
            let _ = is_forbidden(IpAddr::V6(ip));
            if let Some(v4) = ip.to_ipv4_mapped() {
                assert_eq!(is_forbidden(IpAddr::V6(ip)), is_forbidden(IpAddr::V4(v4)));
            }
        }
        _ => {}
    }
}

#[test]
fn webhook_url() {
    crate::fuzz_target!("webhook_url", DICT, |input: &[u8]| {
        let raw = String::from_utf8_lossy(input);
        for allow_http in [false, true] {
            let first = check_url(&raw, allow_http);
            assert_eq!(first, check_url(&raw, allow_http), "deterministic");
            if let Err(e) = &first {
                assert_eq!(e.error_code(), ErrorCode::InvalidWebhookUrl, "{e:?}");
                assert_eq!(e.code(), "INVALID_WEBHOOK_URL");
            }
            check_accepted(&raw, allow_http);
        }
        // Any four bytes are an IPv4 address to judge in all its forms.
        let h = crate::fnv1a(input).to_be_bytes();
        check_ip_forms(Ipv4Addr::new(h[0], h[1], h[2], h[3]));
        if input.len() >= 4 {
            check_ip_forms(Ipv4Addr::new(input[0], input[1], input[2], input[3]));
        }
    });
}
