//! **guardhost-resp**: a small Redis client (RESP2 over plain TCP), for
//! what several processes share through one Redis server: the OAP
//! provider's state (`state: redis://...`: policy packs' running totals,
//! counters and key sets, per-minute rate windows) and the decision
//! service's calls held for approval (`guardhost serve --pending-store
//! redis://...`).
//!
//! A connection per concurrent caller, kept and reused, with a timeout on
//! connecting and on every reply. An unreachable or failing server is an
//! error, never a decision: its user decides what that means (the host's
//! `fail_closed`, a refused request), and the message says which server
//! and why, never its password.
//!
//! # Map
//!
//! One file: [`RedisState`], the pool of connections to one server; a
//! [`Reply`] and [`command`], one command and its reply; the tests at the
//! bottom.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

/// How long a connection or a reply may take.
pub const TIMEOUT: Duration = Duration::from_millis(500);

/// A Redis server keeping state, and the connections kept to it.
pub struct RedisState {
    /// `redis://host:port/db`, as configured (without a password).
    shown: String,
    /// What messages call the server (`shared state`, `pending store`).
    noun: &'static str,
    host: String,
    port: u16,
    db: u32,
    password: Option<String>,
    idle: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState").field("server", &self.shown).finish_non_exhaustive()
    }
}

/// A connection to the server.
pub type Connection = BufReader<TcpStream>;

/// A reply (a null bulk string and a null array are both `Bulk(None)`).
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// `+OK`, `+QUEUED` ...
    Simple(String),
    /// `-ERR ...`, `-NOSCRIPT ...` ...: the server's message.
    Error(String),
    /// `:42`.
    Integer(i64),
    /// A bulk string, or `None` for a null one (and a null array).
    Bulk(Option<Vec<u8>>),
    /// An array of replies.
    Array(Vec<Reply>),
}

impl RedisState {
    /// Parses `redis://[:password@]host[:port][/db]`. The password, if
    /// any, is never shown in a message.
    pub fn new(url: &str) -> Result<RedisState, String> {
        RedisState::named(url, "`state`", "shared state")
    }

    /// [`Self::new`] for a server configured by `option` (which parse
    /// errors name), called `noun` in messages.
    pub fn named(url: &str, option: &str, noun: &'static str) -> Result<RedisState, String> {
        let expected = "expected redis://[:password@]host[:port][/db]";
        let rest = url.strip_prefix("redis://").ok_or_else(|| format!("{option}: {expected}"))?;
        // The password (which may hold `/` or `@`) ends at the last `@`.
        let (password, rest) = match rest.rsplit_once('@') {
            Some((user_info, rest)) => {
                let password = user_info.split_once(':').map_or(user_info, |(_, p)| p);
                (Some(password.to_owned()).filter(|p| !p.is_empty()), rest)
            }
            None => (None, rest),
        };
        let (address, db) = match rest.split_once('/') {
            Some((address, "")) => (address, 0),
            Some((address, db)) => (
                address,
                db.parse().map_err(|_| format!("{option}: the database is not a number; {expected}"))?,
            ),
            None => (rest, 0),
        };
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => {
                (host, port.parse().map_err(|_| format!("{option}: the port is not a number; {expected}"))?)
            }
            None => (address, 6379),
        };
        if host.is_empty() {
            return Err(format!("{option}: no host; {expected}"));
        }
        let shown = format!("redis://{host}:{port}/{db}");
        Ok(RedisState {
            shown,
            noun,
            host: host.to_owned(),
            port,
            db,
            password,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// The server, as messages name it.
    pub fn server(&self) -> &str {
        &self.shown
    }

    /// Runs `work` on a kept connection, or a new one, which is kept again
    /// if `work` succeeds (so `work` must leave it as it found it: no
    /// transaction or watch open). An error says which server failed.
    pub fn with_connection<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut connection = self.connection()?;
        let result = work(&mut connection);
        if result.is_ok() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(connection);
        }
        result.map_err(|e| format!("the {} at {} failed: {e}", self.noun, self.shown))
    }

    /// A kept connection, or a new one (authenticated, on the database).
    fn connection(&self) -> Result<Connection, String> {
        if let Some(connection) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(connection);
        }
        let unreachable =
            |e: std::io::Error| format!("cannot reach the {} at {}: {e}", self.noun, self.shown);
        let address =
            (self.host.as_str(), self.port).to_socket_addrs().map_err(unreachable)?.next().ok_or_else(
                || format!("cannot reach the {} at {}: the host has no address", self.noun, self.shown),
            )?;
        let stream = TcpStream::connect_timeout(&address, TIMEOUT).map_err(unreachable)?;
        stream.set_read_timeout(Some(TIMEOUT)).map_err(unreachable)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(unreachable)?;
        let _ = stream.set_nodelay(true);
        let mut connection = BufReader::new(stream);
        let failed = |e: String| format!("the {} at {} refused the connection: {e}", self.noun, self.shown);
        if let Some(password) = &self.password {
            expect_ok(command(&mut connection, &[b"AUTH", password.as_bytes()]).map_err(failed)?)
                .map_err(failed)?;
        }
        if self.db != 0 {
            let db = self.db.to_string();
            expect_ok(command(&mut connection, &[b"SELECT", db.as_bytes()]).map_err(failed)?)
                .map_err(failed)?;
        }
        Ok(connection)
    }
}

/// A simple-string reply (`+OK`, `+QUEUED`); anything else is an error.
pub fn expect_ok(reply: Reply) -> Result<(), String> {
    match reply {
        Reply::Simple(_) => Ok(()),
        Reply::Error(e) => Err(e),
        other => Err(format!("answered {other:?}")),
    }
}

/// Sends one command and reads its reply.
pub fn command(connection: &mut Connection, args: &[&[u8]]) -> Result<Reply, String> {
    let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        bytes.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        bytes.extend_from_slice(arg);
        bytes.extend_from_slice(b"\r\n");
    }
    connection.get_mut().write_all(&bytes).map_err(|e| e.to_string())?;
    read_reply(connection)
}

fn read_reply(input: &mut impl BufRead) -> Result<Reply, String> {
    let mut line = Vec::new();
    input.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
    if !line.ends_with(b"\r\n") {
        return Err("the connection closed".into());
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let number = || text.parse::<i64>().map_err(|_| format!("not a number in a reply: {text:?}"));
    match line[0] {
        b'+' => Ok(Reply::Simple(text)),
        b'-' => Ok(Reply::Error(text)),
        b':' => Ok(Reply::Integer(number()?)),
        b'$' => match number()? {
            -1 => Ok(Reply::Bulk(None)),
            length if (0..=64 << 20).contains(&length) => {
                let mut bulk = vec![0; length as usize + 2];
                input.read_exact(&mut bulk).map_err(|e| e.to_string())?;
                bulk.truncate(length as usize);
                Ok(Reply::Bulk(Some(bulk)))
            }
            length => Err(format!("a bulk reply of {length} bytes")),
        },
        b'*' => match number()? {
            // A transaction whose watched keys changed (`EXEC`).
            -1 => Ok(Reply::Bulk(None)),
            count if (0..=1 << 20).contains(&count) => {
                (0..count).map(|_| read_reply(input)).collect::<Result<_, _>>().map(Reply::Array)
            }
            count => Err(format!("an array reply of {count} items")),
        },
        other => Err(format!("not a reply: starts with {:?}", other as char)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_and_a_password_never_shown() {
        let rates = RedisState::new("redis://:s3/cr@et@cache.internal:6380/2").unwrap();
        assert_eq!((rates.host.as_str(), rates.port, rates.db), ("cache.internal", 6380, 2));
        assert_eq!(rates.password.as_deref(), Some("s3/cr@et"));
        assert_eq!(rates.server(), "redis://cache.internal:6380/2");
        assert!(!format!("{rates:?}").contains("s3/cr@et"));
        let plain = RedisState::new("redis://127.0.0.1").unwrap();
        assert_eq!((plain.port, plain.db, plain.password.clone()), (6379, 0, None));
        for (bad, why) in [
            ("http://x", "expected redis://"),
            ("redis://host:port", "the port is not a number"),
            ("redis://host/x", "the database is not a number"),
            ("redis://:p@", "no host"),
        ] {
            assert!(RedisState::new(bad).unwrap_err().contains(why), "{bad}");
        }
    }

    #[test]
    fn replies_are_read_as_resp2_says() {
        let read = |bytes: &[u8]| read_reply(&mut &bytes[..]);
        assert_eq!(read(b"+OK\r\n"), Ok(Reply::Simple("OK".into())));
        assert_eq!(read(b"-ERR no\r\n"), Ok(Reply::Error("ERR no".into())));
        assert_eq!(read(b":42\r\n"), Ok(Reply::Integer(42)));
        assert_eq!(read(b"$3\r\nabc\r\n"), Ok(Reply::Bulk(Some(b"abc".to_vec()))));
        assert_eq!(read(b"$-1\r\n"), Ok(Reply::Bulk(None)));
        assert_eq!(read(b"*-1\r\n"), Ok(Reply::Bulk(None)));
        assert_eq!(
            read(b"*2\r\n:1\r\n$1\r\nx\r\n"),
            Ok(Reply::Array(vec![Reply::Integer(1), Reply::Bulk(Some(b"x".to_vec()))]))
        );
        assert!(read(b"").is_err());
        assert!(read(b"?\r\n").unwrap_err().contains("not a reply"));
        assert!(read(b"$99999999999\r\n").unwrap_err().contains("bulk reply"));
    }

    #[test]
    fn an_unreachable_server_is_an_error_naming_it() {
        // Port 1 on loopback: nothing listens there.
        let state = RedisState::new("redis://127.0.0.1:1").unwrap();
        let error = state.with_connection(|_| Ok(())).unwrap_err();
        assert!(error.contains("redis://127.0.0.1:1/0") && error.contains("cannot reach"), "{error}");
    }
}
