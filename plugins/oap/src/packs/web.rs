//! `web.fetch.v1`: fetching a URL (`web_fetch`), and searching
//! (`web_search`, `image_search`), which APort checks as a fetch and so
//! always denies (a query is not a URL).
//!
//! A fetch, in APort's order: a `url` (`oap.missing_required_context`);
//! `http` or `https`, without white space or control characters, and a
//! plain ASCII host without `%` escapes (`oap.invalid_url`); not a private, loopback or
//! link-local address, written in any form HTTP clients accept (dotted,
//! decimal, hex, octal, IPv6 with a zone), or `localhost`
//! (`oap.private_network_destination`; names are not resolved, so no call
//! waits on DNS); not under
//! `blocked_domains` (`oap.domain_blocked`); under `allowed_domains` when
//! set (exact, any subdomain, or a `*` glob: `oap.domain_not_allowed`); the
//! `method` (default GET) in `allowed_methods` when set
//! (`oap.method_not_allowed`). The rate limit is applied by the caller.
//!
//! A search needs a non-empty `query` (`oap.missing_required_context`); the
//! domain checks do not apply to a query.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Map, Value};

use super::{arg, deny, Checked, Limits};

/// Checks a fetch.
pub fn check_fetch(args: &Map<String, Value>, limits: Limits<'_>) -> Checked {
    let Some(url) = arg(args, "url").map(str::trim).filter(|u| !u.is_empty()) else {
        return Err(deny(
            "oap.missing_required_context",
            "Web fetch context must include url or domain for local enforcement",
        ));
    };
    let Some(host) = host_of(url) else {
        return Err(deny("oap.invalid_url", "URL must be an absolute http(s) URL"));
    };
    if private_destination(&host).is_some() {
        return Err(deny(
            "oap.private_network_destination",
            format!("Private network destination '{host}' is blocked"),
        ));
    }
    let blocked = limits.strings("blocked_domains").unwrap_or_default();
    if blocked.iter().any(|d| domain_matches(&host, d)) {
        return Err(deny("oap.domain_blocked", format!("Domain '{host}' is blocked")));
    }
    if let Some(allowed) = limits.strings("allowed_domains").filter(|a| !a.is_empty()) {
        if !allowed.iter().any(|d| domain_matches(&host, d)) {
            return Err(deny("oap.domain_not_allowed", format!("Domain '{host}' is not in allowed list")));
        }
    }
    if let Some(methods) = limits.strings("allowed_methods").filter(|m| !m.is_empty()) {
        let method = arg(args, "method").unwrap_or("GET").to_ascii_uppercase();
        if !methods.iter().any(|m| m.eq_ignore_ascii_case(&method)) {
            return Err(deny(
                "oap.method_not_allowed",
                format!("HTTP method '{method}' is not in allowed list"),
            ));
        }
    }
    Ok(())
}

/// Checks a search.
pub fn check_search(args: &Map<String, Value>) -> Checked {
    match arg(args, "query").map(str::trim) {
        Some(q) if !q.is_empty() => Ok(()),
        _ => Err(deny("oap.missing_required_context", "the search has no `query`")),
    }
}

/// Where a URL goes, as [`check_fetch`] reads it, for another provider's
/// policies (the Cedar provider's `context.url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The lower-cased host, brackets removed from IPv6.
    pub host: String,
    /// Whether the host is private, loopback, link-local or `localhost`,
    /// in any form HTTP clients accept.
    pub private: bool,
}

/// The destination of an `http(s)://` URL; `None` when it cannot be read
/// as [`check_fetch`] reads URLs (`oap.invalid_url`).
pub fn destination(url: &str) -> Option<Destination> {
    let host = host_of(url)?;
    let private = private_destination(&host).is_some();
    Some(Destination { host, private })
}

/// The lower-cased host of an `http(s)://` URL, brackets removed from IPv6.
/// A URL with white space or control characters anywhere, or a host with
/// `%` escapes or non-ASCII characters, is refused: parsers disagree on
/// them (some drop a tab, decode `%31`, or read `。` as a dot), so the host
/// checked here might not be the host fetched.
fn host_of(url: &str) -> Option<String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    // A backslash ends the authority too: WHATWG URL parsers read it as `/`.
    let authority = rest.split(['/', '?', '#', '\\']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        // Drop an IPv6 zone (`fe80::1%25eth0`).
        v6.split(']').next()?.split('%').next()?
    } else {
        host_port.split(':').next()?
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty() && host.is_ascii() && !host.contains('%')).then_some(host)
}

/// What kind of non-public destination `host` is, if it is one.
fn private_destination(host: &str) -> Option<&'static str> {
    if matches!(host, "localhost" | "ip6-localhost" | "ip6-loopback" | "localhost.localdomain")
        || host.ends_with(".localhost")
    {
        return Some("loopback");
    }
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => IpAddr::V4(inet_aton(host)?),
    };
    match ip {
        IpAddr::V4(ip) => private_v4(ip),
        IpAddr::V6(ip) => match embedded_v4(ip) {
            Some(v4) => private_v4(v4),
            None => private_v6(ip),
        },
    }
}

/// The IPv4 address that `inet_aton` (and so curl and most HTTP clients)
/// reads from `host`: one to four parts, each decimal, octal (`0` prefix)
/// or hex (`0x`), the last filling the remaining bytes (`2130706433`,
/// `0x7f.1`, `127.1` are all 127.0.0.1).
fn inet_aton(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (*part, 10)
        };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        values.push(if digits.is_empty() { 0 } else { u32::from_str_radix(digits, radix).ok()? });
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|v| *v > 255) {
        return None;
    }
    // The last part fills the bytes the others leave: 5 - n of them.
    let last_bits = 8 * (5 - values.len() as u32);
    if u64::from(*last) >= 1u64 << last_bits {
        return None;
    }
    let mut address = *last;
    for (i, v) in leading.iter().enumerate() {
        address |= v << (24 - 8 * i as u32);
    }
    Some(Ipv4Addr::from(address))
}

fn private_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_unspecified() || ip.is_broadcast() || a == 0 {
        Some("non-routable")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`),
/// compatible (`::a.b.c.d`, deprecated but still routed by some stacks)
/// or NAT64 (`64:ff9b::a.b.c.d`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let zero_prefix = s[..5].iter().all(|x| *x == 0);
    let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|x| *x == 0);
    let mapped = zero_prefix && s[5] == 0xffff;
    let compatible = zero_prefix && s[5] == 0 && !ip.is_loopback() && !ip.is_unspecified();
    (mapped || compatible || nat64).then_some(tail)
}

fn private_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("non-routable")
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        Some("private")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else {
        None
    }
}

/// Whether `host` is `domain`, a subdomain of it, or matches it as a glob
/// (`*.example.com`).
fn domain_matches(host: &str, domain: &str) -> bool {
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    if domain.is_empty() {
        return false;
    }
    if domain == "*" {
        return true;
    }
    if let Some(suffix) = domain.strip_prefix("*.") {
        return host.ends_with(&format!(".{suffix}"));
    }
    if domain.contains('*') {
        return super::files::glob(&domain, host);
    }
    host == domain || host.ends_with(&format!(".{domain}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fetch(args: Value, limits: Value) -> Result<(), String> {
        check_fetch(args.as_object().unwrap(), Limits(limits.as_object())).map_err(|d| d.code)
    }

    #[test]
    fn urls_and_private_addresses() {
        let none = json!({});
        assert_eq!(fetch(json!({}), none.clone()), Err("oap.missing_required_context".into()));
        for url in ["ftp://x.com/a", "file:///etc/passwd", "example.com", "https://"] {
            assert_eq!(fetch(json!({ "url": url }), none.clone()), Err("oap.invalid_url".into()), "{url}");
        }
        for url in [
            "http://localhost:8080/",
            "http://127.0.0.1/",
            "http://10.1.2.3/",
            "http://192.168.0.1",
            "http://172.16.5.4/x",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://0.0.0.0/",
            "http://100.64.0.1/",
            "http://user@127.0.0.1/",
            "http://app.localhost/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://0177.0.0.1/",
            "http://[fe80::1%25eth0]/",
            "http://127.0.0.1\\@example.com/",
            "HTTP://127.0.0.1/",
        ] {
            assert_eq!(
                fetch(json!({ "url": url }), none.clone()),
                Err("oap.private_network_destination".into()),
                "{url}"
            );
        }
        assert_eq!(fetch(json!({"url": "https://example.com/docs"}), none.clone()), Ok(()));
        assert_eq!(fetch(json!({"url": "https://8.8.8.8/"}), none.clone()), Ok(()));
        assert_eq!(fetch(json!({"url": "https://1.2.3.4.5/"}), none), Ok(()), "not an address: a name");
        assert_eq!(inet_aton("256.1"), None);
        assert_eq!(inet_aton("1.65536"), Some(Ipv4Addr::new(1, 1, 0, 0)));
        assert_eq!(inet_aton("1.16777216"), None);
        assert_eq!(inet_aton("1.2.3.256"), None);
        assert_eq!(inet_aton("example"), None);
        assert_eq!(inet_aton("10.0x10.0377.1"), Some(Ipv4Addr::new(10, 16, 255, 1)));
    }

    #[test]
    fn domains_and_methods() {
        let limits = json!({
            "allowed_domains": ["example.com", "*.docs.rs", "api.*.io"],
            "blocked_domains": ["evil.example.com"],
            "allowed_methods": ["GET", "HEAD"]
        });
        let f = |url: &str| fetch(json!({ "url": url }), limits.clone());
        assert_eq!(f("https://example.com/"), Ok(()));
        assert_eq!(f("https://www.example.com/"), Ok(()));
        assert_eq!(f("https://serde.docs.rs/"), Ok(()));
        assert_eq!(f("https://api.stripe.io/"), Ok(()));
        assert_eq!(f("https://evil.example.com/"), Err("oap.domain_blocked".into()));
        assert_eq!(f("https://notexample.com/"), Err("oap.domain_not_allowed".into()));
        assert_eq!(f("https://EXAMPLE.com./"), Ok(()));
        assert_eq!(
            fetch(json!({"url": "https://example.com", "method": "post"}), limits),
            Err("oap.method_not_allowed".into())
        );
    }

    #[test]
    fn a_search_needs_a_query() {
        assert_eq!(check_search(json!({"query": "rust"}).as_object().unwrap()), Ok(()));
        assert!(check_search(json!({"query": " "}).as_object().unwrap()).is_err());
    }

    #[test]
    fn what_parsers_disagree_on_is_refused_and_embedded_addresses_are_seen() {
        let none = json!({});
        for url in [
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::10.0.0.1]/",
            "http://[fec0::1]/",
            "http://ip6-localhost/",
        ] {
            let got = fetch(json!({ "url": url }), none.clone());
            assert_eq!(got, Err("oap.private_network_destination".into()), "{url}");
        }
        for url in
            ["http://12\t7.0.0.1/", "http://%31%32%37.0.0.1/", "http://evil\u{3002}com/", "http://a b/"]
        {
            assert_eq!(fetch(json!({ "url": url }), none.clone()), Err("oap.invalid_url".into()), "{url}");
        }
        assert_eq!(fetch(json!({"url": "https://[2606:4700::1111]/"}), none.clone()), Ok(()));
        assert_eq!(
            fetch(json!({"url": "https://8.8.8.8/a%20b"}), none),
            Ok(()),
            "escapes in the path are fine"
        );
    }
}
