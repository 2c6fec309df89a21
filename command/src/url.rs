//! Where a URL goes: its host read as HTTP clients read it, and whether
//! that host is private, in every spelling clients accept.
//!
//! A URL that WHATWG URL parsers (browsers, Node's `fetch`) and RFC 3986
//! readers (curl, Python's `urllib`, most HTTP libraries) could read
//! differently is not read ([`Unreadable::Ambiguous`]): the host checked
//! must be the host fetched. What is ambiguous ([`Ambiguity`]), in the order
//! it is looked for:
//!
//! - a tab, line feed or carriage return anywhere, or a space or C0
//!   control at either end (WHATWG drops them);
//! - not exactly `//` after `http:` (`http:/x`, `http:\\x`, `http:///x`,
//!   `http:x`: WHATWG skips slashes and backslashes to a host, RFC 3986
//!   reads a path);
//! - a backslash in the authority, the text up to the first `/`, `?` or
//!   `#` (WHATWG ends the host there: `http://evil.com\@127.0.0.1/`); a
//!   backslash in the path, query or fragment is not, it moves no host;
//! - more than one `@` in the authority;
//! - a non-ASCII character in the authority (`。`, fullwidth forms, an IDN);
//! - a `%` in the host (WHATWG decodes it), an IPv6 zone included;
//! - a host ending in a number that is not a dotted-decimal IPv4 address
//!   (`127.1`, `0x7f.0.0.1`, `0177.0.0.1`, `2130706433`, `1.2.3.4.5`);
//! - an IPv4-mapped or -compatible IPv6 address (`[::ffff:127.0.0.1]`);
//! - a port that is empty, longer than 5 digits or above 65535.
//!
//! Anything else that is not `http(s)://host[:port]` followed by `/`, `?`,
//! `#` or nothing is invalid ([`Unreadable::Invalid`]): another scheme, no
//! scheme (`//host/x` too), an empty host, white space or control
//! characters elsewhere, a port with other than digits, a host with
//! characters RFC 3986 does not allow or an empty label (`a..b`). One
//! trailing dot is dropped (`example.com.` is `example.com`).
//!
//! Each ambiguity is also read each way parsers read it, so that a URL whose
//! every reading reaches a private address is still seen as one
//! ([`Unreadable::private_only`]). The reading is linear in the URL's
//! length: a reading re-reads a strictly simpler URL at most a few times.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where a URL goes, for a policy: the OAP provider's `web.fetch.v1`
/// checks, the Cedar provider's `context.url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The lower-cased host, brackets removed from IPv6, one trailing dot
    /// dropped.
    pub host: String,
    /// Whether the host is private, loopback, link-local or `localhost`,
    /// in any form HTTP clients accept.
    pub private: bool,
}

/// Why a URL is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Not an absolute `http(s)` URL with a host.
    Invalid,
    /// URL parsers read it differently.
    Ambiguous {
        /// What they disagree on (the first thing found).
        why: Ambiguity,
        /// A private host one of the readings reaches.
        private: Option<String>,
        /// Whether one of the readings reaches a public host.
        public: bool,
    },
}

impl Unreadable {
    /// `invalid`, or the ambiguity's [`Ambiguity::name`].
    pub fn name(&self) -> &'static str {
        match self {
            Unreadable::Invalid => "invalid",
            Unreadable::Ambiguous { why, .. } => why.name(),
        }
    }

    /// The private host of an ambiguous URL every reading of which that
    /// reaches a host reaches a private one (`http://2130706433/`,
    /// `http://[::ffff:10.0.0.1]/`): where it goes is in no doubt.
    pub fn private_only(&self) -> Option<&str> {
        match self {
            Unreadable::Ambiguous { private: Some(host), public: false, .. } => Some(host),
            _ => None,
        }
    }
}

/// What URL parsers disagree on (the module's docs list them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ambiguity {
    /// A tab, line feed or carriage return, or a space or control character
    /// at either end.
    Stripped,
    /// Not exactly `//` after the scheme.
    Slashes,
    /// A backslash in the authority.
    Backslash,
    /// More than one `@` in the authority.
    AtSigns,
    /// A non-ASCII character in the authority.
    NonAscii,
    /// A `%` in the host.
    PercentInHost,
    /// A host ending in a number that is not a dotted-decimal IPv4 address.
    NumericHost,
    /// An IPv6 address embedding an IPv4 one.
    EmbeddedIpv4,
    /// A port that is not 1 to 5 digits up to 65535.
    Port,
}

impl Ambiguity {
    /// A short snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Ambiguity::Stripped => "stripped_characters",
            Ambiguity::Slashes => "slashes",
            Ambiguity::Backslash => "backslash",
            Ambiguity::AtSigns => "at_signs",
            Ambiguity::NonAscii => "non_ascii",
            Ambiguity::PercentInHost => "percent_in_host",
            Ambiguity::NumericHost => "numeric_host",
            Ambiguity::EmbeddedIpv4 => "embedded_ipv4",
            Ambiguity::Port => "port",
        }
    }

    /// What it is and how to write it plainly, for a message.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Stripped => "a tab or line break, or a space or control character at an end (remove it)",
            Self::Slashes => "not `//` after the scheme (write `http://host/`)",
            Self::Backslash => "a backslash before the path (write `/`, or `%5C` in a user name)",
            Self::AtSigns => "more than one `@` before the path (write `%40` in a user name)",
            Self::NonAscii => {
                "a non-ASCII character before the path (write the host in ASCII, an IDN as `xn--`)"
            }
            Self::PercentInHost => {
                "a `%` escape in the host (write the host unescaped, an IPv6 address unzoned)"
            }
            Self::NumericHost => {
                "a host ending in a number but not a dotted-decimal IPv4 address (write that)"
            }
            Self::EmbeddedIpv4 => "an IPv6 address embedding an IPv4 one (write the IPv4 address)",
            Self::Port => "a port that is not 1 to 5 digits up to 65535 (write it plainly or leave it out)",
        }
    }
}

/// The destination of an `http(s)://` URL; `None` when it cannot be read
/// without doubt ([`read`]).
pub fn destination(url: &str) -> Option<Destination> {
    read(url).ok()
}

/// The lower-cased host of an `http(s)://` URL that can be read without
/// doubt ([`read`]), brackets removed from IPv6.
pub fn host_of(url: &str) -> Option<String> {
    read(url).ok().map(|d| d.host)
}

/// Where an `http(s)://` URL goes, or why it cannot be read without doubt.
pub fn read(url: &str) -> Result<Destination, Unreadable> {
    let edge = |c: char| c <= ' ';
    if url.contains(['\t', '\n', '\r']) || url.starts_with(edge) || url.ends_with(edge) {
        let kept: String = url.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
        // WHATWG's reading; RFC 3986 readers have none.
        let reading = read(kept.trim_matches(edge));
        if reading == Err(Unreadable::Invalid) {
            return reading;
        }
        return ambiguous(Ambiguity::Stripped, [reach(reading)]);
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Unreadable::Invalid);
    }
    let (scheme, rest) = url.split_once(':').ok_or(Unreadable::Invalid)?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(Unreadable::Invalid);
    }
    let after = match rest.strip_prefix("//") {
        Some(after) if !after.starts_with(['/', '\\']) => after,
        _ => {
            // WHATWG skips any slashes and backslashes to the host.
            let reading = read(&format!("{scheme}://{}", rest.trim_start_matches(['/', '\\'])));
            if reading == Err(Unreadable::Invalid) {
                return reading;
            }
            return ambiguous(Ambiguity::Slashes, [reach(reading)]);
        }
    };
    let authority = after.split(['/', '?', '#']).next().unwrap_or_default();
    let reread = |authority: &str| reach(read(&format!("{scheme}://{authority}/")));
    if let Some(backslash) = authority.find('\\') {
        // WHATWG ends the authority at the backslash; RFC 3986 readers
        // take the host after the last `@`.
        let after_at = authority.rsplit('@').next().unwrap_or_default();
        let rfc = if after_at.contains('\\') { None } else { reread(after_at) };
        return ambiguous(Ambiguity::Backslash, [reread(&authority[..backslash]), rfc]);
    }
    if authority.matches('@').nth(1).is_some() {
        // The host after the last `@` (WHATWG), or after the first.
        let last = authority.rsplit('@').next().unwrap_or_default();
        let first = authority.split('@').nth(1).unwrap_or_default();
        return ambiguous(Ambiguity::AtSigns, [reread(last), reread(first)]);
    }
    if !authority.is_ascii() {
        let folded = fold(authority);
        return ambiguous(Ambiguity::NonAscii, [folded.is_ascii().then(|| reread(&folded)).flatten()]);
    }
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = if host_port.starts_with('[') {
        let (inside, tail) = host_port.split_once(']').ok_or(Unreadable::Invalid)?;
        match tail {
            "" => (inside, None),
            _ => (inside, Some(tail.strip_prefix(':').ok_or(Unreadable::Invalid)?)),
        }
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if port.is_some_and(|p| !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err(Unreadable::Invalid);
    }
    let destination = match host.strip_prefix('[') {
        Some(v6) => read_ipv6(v6)?,
        None => read_host(host)?,
    };
    match port {
        Some(p) if p.is_empty() || p.len() > 5 || p.parse::<u32>().map_or(true, |p| p > 65535) => {
            ambiguous(Ambiguity::Port, [Some(Reach::of(destination))])
        }
        _ => Ok(destination),
    }
}

/// Where a reading of an ambiguous URL goes, if anywhere.
#[derive(Debug, Default)]
struct Reach {
    private: Option<String>,
    public: bool,
}

impl Reach {
    fn of(destination: Destination) -> Reach {
        match destination.private {
            true => Reach { private: Some(destination.host), public: false },
            false => Reach { private: None, public: true },
        }
    }
}

/// Where a reading goes: nowhere when it is invalid too.
fn reach(reading: Result<Destination, Unreadable>) -> Option<Reach> {
    match reading {
        Ok(destination) => Some(Reach::of(destination)),
        Err(Unreadable::Ambiguous { private, public, .. }) => Some(Reach { private, public }),
        Err(Unreadable::Invalid) => None,
    }
}

fn ambiguous<const N: usize>(
    why: Ambiguity,
    readings: [Option<Reach>; N],
) -> Result<Destination, Unreadable> {
    let all = readings.into_iter().flatten().fold(Reach::default(), |all, r| Reach {
        private: all.private.or(r.private),
        public: all.public || r.public,
    });
    Err(Unreadable::Ambiguous { why, private: all.private, public: all.public })
}

/// A host that is not an IPv6 literal.
fn read_host(host: &str) -> Result<Destination, Unreadable> {
    if host.contains('%') {
        // WHATWG decodes the escapes, once.
        let decoded = decode(host).map(|h| fold(&h)).and_then(|h| plain_host(&h).ok());
        return ambiguous(Ambiguity::PercentInHost, [decoded.map(Reach::of)]);
    }
    let destination = plain_host(host)?;
    let host = &destination.host;
    let last = host.rsplit('.').next().unwrap_or_default();
    let number = !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || last.strip_prefix("0x").is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit())));
    if number && host.parse::<Ipv4Addr>().is_err() {
        // WHATWG reads an address (or refuses the host); RFC 3986 a name,
        // which some clients then read as `inet_aton` does.
        return ambiguous(Ambiguity::NumericHost, [inet_aton(host).map(|_| Reach::of(destination))]);
    }
    Ok(destination)
}

/// A name or IPv4 address of the characters RFC 3986 allows in one,
/// without escapes, empty labels or numbers' doubts aside.
fn plain_host(host: &str) -> Result<Destination, Unreadable> {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
    if host.is_empty() || !host.bytes().all(allowed) || host.split('.').any(str::is_empty) {
        return Err(Unreadable::Invalid);
    }
    let private = private_destination(&host).is_some();
    Ok(Destination { host, private })
}

/// The inside of `[...]`.
fn read_ipv6(inside: &str) -> Result<Destination, Unreadable> {
    let (address, zone) = match inside.split_once('%') {
        Some((address, zone)) => (address, Some(zone)),
        None => (inside, None),
    };
    let ip: Ipv6Addr = address.parse().map_err(|_| Unreadable::Invalid)?;
    let host = address.to_ascii_lowercase();
    let private = private_destination(&host).is_some();
    let destination = Destination { host, private };
    if zone.is_some() {
        // RFC 6874 allows a zone (`%25eth0`); WHATWG refuses it.
        return ambiguous(Ambiguity::PercentInHost, [Some(Reach::of(destination))]);
    }
    let s = ip.segments();
    let mapped = s[..5].iter().all(|x| *x == 0) && (s[5] == 0xffff || s[5] == 0);
    if mapped && !ip.is_loopback() && !ip.is_unspecified() {
        return ambiguous(Ambiguity::EmbeddedIpv4, [Some(Reach::of(destination))]);
    }
    Ok(destination)
}

/// `%XX` escapes decoded; `None` for a malformed escape or text that is
/// not UTF-8.
fn decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let (hex, after) = tail.split_at_checked(2)?;
            let digit = |b: u8| char::from(b).to_digit(16);
            bytes.push(((digit(hex[0])? << 4) | digit(hex[1])?) as u8);
            rest = after;
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Fullwidth ASCII forms and the ideographic and halfwidth full stops as
/// the ASCII they stand for, as IDNA maps them.
fn fold(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            '\u{3002}' | '\u{FF61}' => '.',
            _ => c,
        })
        .collect()
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

    fn why(url: &str) -> Option<Ambiguity> {
        match read(url) {
            Err(Unreadable::Ambiguous { why, .. }) => Some(why),
            _ => None,
        }
    }

    #[test]
    fn everyday_urls_are_read() {
        for (url, host) in [
            ("https://docs.rs/serde/latest/serde/", "docs.rs"),
            ("https://api.github.com/repos/a/b?x=1#y", "api.github.com"),
            ("http://example.com:8080/a%20b", "example.com"),
            ("https://[2606:4700::1111]/", "2606:4700::1111"),
            ("https://user@example.com/", "example.com"),
            ("https://user:pw@example.com:443", "example.com"),
            ("HTTPS://Example.COM./x", "example.com"),
            ("http://example.com?q=a\\b", "example.com"),
            ("http://example.com/a\\b#\u{e9}", "example.com"),
            ("https://8.8.8.8/", "8.8.8.8"),
            ("http://x.org:0080/", "x.org"),
            ("http://[64:ff9b::8.8.8.8]/", "64:ff9b::8.8.8.8"),
        ] {
            let got = read(url);
            assert_eq!(got.as_ref().map(|d| d.host.as_str()), Ok(host), "{url}");
            assert!(!got.unwrap().private, "{url}");
        }
        assert_eq!(
            read("http://user@127.0.0.1:8080/"),
            Ok(Destination { host: "127.0.0.1".into(), private: true })
        );
        assert_eq!(host_of("http://[::1]/").as_deref(), Some("::1"));
        assert_eq!(destination("https://example.com").map(|d| d.private), Some(false));
    }

    #[test]
    fn what_is_not_an_http_url_is_invalid() {
        for url in [
            "ftp://x.com/a",
            "file:///etc/passwd",
            "example.com",
            "//example.com/x",
            "https://",
            "https:///",
            "http:",
            "http://user@/",
            "http://:80/",
            "http://a b/",
            "http://a\u{7f}b/",
            "http://a\u{a0}b/",
            "http://example.com:8o/",
            "http://example.com:+80/",
            "http://a:b:c/",
            "http://exa<mple.com/",
            "http://a..b/",
            "http://.a/",
            "http://a../",
            "http://./",
            "http://[::1/",
            "http://[::1]x/",
            "http://[not-v6]/",
            "http://[v1.x]/",
            "\t ftp://x/",
            "http:/",
        ] {
            assert_eq!(read(url), Err(Unreadable::Invalid), "{url:?}");
        }
    }

    #[test]
    fn what_parsers_read_differently_is_ambiguous() {
        use Ambiguity::*;
        for (url, expected) in [
            ("http://exa\tmple.com/", Stripped),
            ("http://example.com/a\nb", Stripped),
            ("http://example.com/\r", Stripped),
            (" http://example.com/", Stripped),
            ("http://example.com/\u{1}", Stripped),
            ("http:/example.com/", Slashes),
            ("http:example.com", Slashes),
            ("http:///example.com/", Slashes),
            ("http:\\\\example.com/", Slashes),
            ("http://\\example.com/", Slashes),
            ("http://evil.com\\@example.com/", Backslash),
            ("http://example.com\\x/", Backslash),
            ("http://u\\ser@example.com/", Backslash),
            ("http://a@b@example.com/", AtSigns),
            ("http://evil.com@@example.com/", AtSigns),
            ("http://evil\u{3002}com/", NonAscii),
            ("http://evil\u{ff0e}com/", NonAscii),
            ("http://b\u{fc}cher.de/", NonAscii),
            ("http://\u{fc}@example.com/", NonAscii),
            ("http://%65xample.com/", PercentInHost),
            ("http://%zz/", PercentInHost),
            ("http://0x8.8.8.8/", NumericHost),
            ("http://010.8.8.8/", NumericHost),
            ("http://134744072/", NumericHost),
            ("http://8.8.2056/", NumericHost),
            ("http://1.2.3.4.5/", NumericHost),
            ("http://256.1.1.1/", NumericHost),
            ("http://example.0x1/", NumericHost),
            ("http://[::ffff:8.8.8.8]/", EmbeddedIpv4),
            ("http://[::8.8.8.8]/", EmbeddedIpv4),
            ("http://example.com:/", Port),
            ("http://example.com:000080/", Port),
            ("http://example.com:65616/", Port),
            ("http://example.com:99999/", Port),
        ] {
            assert_eq!(why(url), Some(expected), "{url:?}");
            assert_eq!(read(url).unwrap_err().private_only(), None, "{url:?}: no private reading alone");
        }
        assert_eq!(Unreadable::Invalid.name(), "invalid");
        assert_eq!(read("http://a@b@c/").unwrap_err().name(), "at_signs");
    }

    #[test]
    fn a_url_every_reading_of_which_is_private_is_private() {
        for (url, expected, host) in [
            ("http://2130706433/", Ambiguity::NumericHost, "2130706433"),
            ("http://0x7f.1/", Ambiguity::NumericHost, "0x7f.1"),
            ("http://0177.0.0.1/", Ambiguity::NumericHost, "0177.0.0.1"),
            ("http://127.1/", Ambiguity::NumericHost, "127.1"),
            ("http://[::ffff:10.0.0.1]/", Ambiguity::EmbeddedIpv4, "::ffff:10.0.0.1"),
            ("http://[::127.0.0.1]/", Ambiguity::EmbeddedIpv4, "::127.0.0.1"),
            ("http://[fe80::1%25eth0]/", Ambiguity::PercentInHost, "fe80::1"),
            ("http://%31%32%37.0.0.1/", Ambiguity::PercentInHost, "127.0.0.1"),
            ("http://12\t7.0.0.1/", Ambiguity::Stripped, "127.0.0.1"),
            ("http://127\u{3002}0\u{3002}0\u{3002}1/", Ambiguity::NonAscii, "127.0.0.1"),
            ("http:/localhost/", Ambiguity::Slashes, "localhost"),
            ("http://127.0.0.1:99999/", Ambiguity::Port, "127.0.0.1"),
        ] {
            let got = read(url).unwrap_err();
            assert_eq!((why(url), got.private_only()), (Some(expected), Some(host)), "{url:?}");
        }
        // Readings that disagree on the host: ambiguous, with the private
        // one seen.
        for (url, host) in [
            ("http://evil.com\\@127.0.0.1/", "127.0.0.1"),
            ("http://127.0.0.1\\@example.com/", "127.0.0.1"),
            ("http://a@127.0.0.1@example.com/", "127.0.0.1"),
            ("http://a@example.com@10.0.0.1/", "10.0.0.1"),
        ] {
            let got = read(url).unwrap_err();
            assert!(
                matches!(&got, Unreadable::Ambiguous { private: Some(h), public: true, .. } if h == host),
                "{url:?}: {got:?}"
            );
            assert_eq!(got.private_only(), None, "{url:?}");
        }
    }

    #[test]
    fn decoding_and_folding() {
        assert_eq!(decode("%41b%2e"), Some("Ab.".into()));
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%+1"), None);
        assert_eq!(decode("%ff"), None, "not UTF-8");
        assert_eq!(fold("\u{ff21}\u{ff0e}b\u{3002}c\u{ff61}\u{e9}"), "A.b.c.\u{e9}");
    }

    #[test]
    fn reading_is_linear() {
        // Long runs of what is re-read do not multiply the work.
        let long = format!("http://{}x/", "%25".repeat(20_000));
        assert_eq!(why(&long), Some(Ambiguity::PercentInHost));
        let long = format!("http://{}127.0.0.1/", "a@\\".repeat(20_000));
        assert!(why(&long).is_some());
        let long = format!("http:{}{}", "/\\".repeat(20_000), "\t".repeat(20_000));
        assert_eq!(read(&long), Err(Unreadable::Invalid));
    }
}
