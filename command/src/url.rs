//! Where a URL goes: its host read as HTTP clients read it, and whether
//! that host is private, in every spelling clients accept. A URL that
//! parsers could read differently is not read at all (`None`): the host
//! checked must be the host fetched.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where a URL goes, for a policy: the OAP provider's `web.fetch.v1`
/// checks, the Cedar provider's `context.url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The lower-cased host, brackets removed from IPv6.
    pub host: String,
    /// Whether the host is private, loopback, link-local or `localhost`,
    /// in any form HTTP clients accept.
    pub private: bool,
}

/// The destination of an `http(s)://` URL; `None` when it cannot be read
/// without doubt ([`host_of`]).
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
pub fn host_of(url: &str) -> Option<String> {
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
pub fn private_destination(host: &str) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inet_aton_reads_what_clients_read() {
        assert_eq!(inet_aton("256.1"), None);
        assert_eq!(inet_aton("1.65536"), Some(Ipv4Addr::new(1, 1, 0, 0)));
        assert_eq!(inet_aton("1.16777216"), None);
        assert_eq!(inet_aton("1.2.3.256"), None);
        assert_eq!(inet_aton("example"), None);
        assert_eq!(inet_aton("10.0x10.0377.1"), Some(Ipv4Addr::new(10, 16, 255, 1)));
    }
}
