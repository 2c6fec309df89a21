//! `web.fetch.v1`: fetching a URL (`web_fetch`), and searching
//! (`web_search`, `image_search`), which APort checks as a fetch and so
//! always denies (a query is not a URL).
//!
//! A fetch, in APort's order: a `url` (`oap.missing_required_context`);
//! an absolute `http(s)` URL with a host (`oap.invalid_url`) that URL
//! parsers read alike (`oap.url_ambiguous`: a backslash or a second `@`
//! before the path, a tab, `%` or non-ASCII in the host, `127.1`, ... as
//! `guardhost_command::url` lists them); not a private, loopback or
//! link-local address, written in any form HTTP clients accept (dotted,
//! decimal, hex, octal, IPv6 with a zone), or `localhost`
//! (`oap.private_network_destination`, also for an ambiguous URL every
//! reading of which is private; names are not resolved, so no call waits
//! on DNS); not under
//! `blocked_domains` (`oap.domain_blocked`); under `allowed_domains` when
//! set (exact, any subdomain, or a `*` glob: `oap.domain_not_allowed`); the
//! `method` (default GET) in `allowed_methods` when set
//! (`oap.method_not_allowed`). The rate limit is applied by the caller.
//!
//! A search needs a non-empty `query` (`oap.missing_required_context`); the
//! domain checks do not apply to a query.

use serde_json::{Map, Value};

use guardhost_command::url::{read, Unreadable};

use super::{arg, deny, Checked, Limits};

/// Checks a fetch.
pub fn check_fetch(args: &Map<String, Value>, limits: Limits<'_>) -> Checked {
    let Some(url) = arg(args, "url").map(str::trim).filter(|u| !u.is_empty()) else {
        return Err(deny(
            "oap.missing_required_context",
            "Web fetch context must include url or domain for local enforcement",
        ));
    };
    let private = |host: &str| -> Checked {
        Err(deny(
            "oap.private_network_destination",
            format!("Private network destination '{host}' is blocked"),
        ))
    };
    let host = match read(url) {
        Ok(destination) if !destination.private => destination.host,
        Ok(destination) => return private(&destination.host),
        Err(Unreadable::Invalid) => {
            return Err(deny("oap.invalid_url", "URL must be an absolute http(s) URL"));
        }
        // Where it goes is in no doubt when every reading is private.
        Err(unreadable @ Unreadable::Ambiguous { why, .. }) => {
            return match unreadable.private_only() {
                Some(host) => private(host),
                None => Err(deny(
                    "oap.url_ambiguous",
                    format!(
                        "URL parsers read this URL differently: {}; write the URL in its plain form",
                        why.describe()
                    ),
                )),
            };
        }
    };
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
        // WHATWG refuses it as an IPv4 address, RFC 3986 reads a name.
        assert_eq!(fetch(json!({"url": "https://1.2.3.4.5/"}), none), Err("oap.url_ambiguous".into()));
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
        // However a parser reads them, these go to 127.0.0.1.
        for url in
            ["http://12\t7.0.0.1/", "http://%31%32%37.0.0.1/", "http://127\u{3002}0\u{3002}0\u{3002}1/"]
        {
            let got = fetch(json!({ "url": url }), none.clone());
            assert_eq!(got, Err("oap.private_network_destination".into()), "{url}");
        }
        // Parsers disagree on where these go, so they are refused as
        // ambiguous. `http://127.0.0.1\@example.com/` goes to 127.0.0.1
        // for a WHATWG parser (a browser, Node's fetch) but to example.com
        // for curl or urllib: no one destination, so not "private"
        // (refused all the same); the attacker's
        // `http://evil.com\@127.0.0.1/` is the same URL the other way.
        for url in [
            "http://127.0.0.1\\@example.com/",
            "http://evil.com\\@127.0.0.1/",
            "http://a@127.0.0.1@example.com/",
            "http://evil\u{3002}com/",
            "http://%65xample.com/",
            "http://0x8.8.8.8/",
            "http://[::ffff:8.8.8.8]/",
            "http:/example.com/",
            "http:\\\\example.com/",
            "http://example.com:65616/",
            "http://exa\tmple.com/",
        ] {
            assert_eq!(fetch(json!({ "url": url }), none.clone()), Err("oap.url_ambiguous".into()), "{url}");
        }
        assert_eq!(fetch(json!({"url": "http://a b/"}), none.clone()), Err("oap.invalid_url".into()));
        let denied =
            check_fetch(json!({"url": "http://evil.com\\@x.org/"}).as_object().unwrap(), Limits(None));
        assert_eq!(
            denied.unwrap_err().message,
            "URL parsers read this URL differently: a backslash before the path (write `/`, or `%5C` \
             in a user name); write the URL in its plain form"
        );
        for url in [
            "https://[2606:4700::1111]/",
            "https://docs.rs/serde/latest/serde/",
            "https://api.github.com/repos/a/b?x=1#y",
            "http://example.com:8080/a%20b",
            "https://user@example.com/",
            "http://example.com/a\\b",
        ] {
            assert_eq!(fetch(json!({ "url": url }), none.clone()), Ok(()), "{url}");
        }
        assert_eq!(
            fetch(json!({"url": "https://8.8.8.8/a%20b"}), none),
            Ok(()),
            "escapes in the path are fine"
        );
    }
}
