//! Server-sent events (the WHATWG format), as the streamable HTTP
//! transport's answers and `GET` streams carry messages: read from chunks
//! of any size, each event's data bounded.

use crate::framing::Line;

/// One server-sent event.
#[derive(Debug, PartialEq, Eq)]
pub struct Event {
    /// Its `data` lines joined (or how long it was, over the limit).
    pub data: Line,
    /// Its `id`, if it had one.
    pub id: Option<String>,
}

/// Reads server-sent events (the WHATWG format) from chunks of any size.
#[derive(Debug)]
pub struct EventParser {
    limit: usize,
    pending: Vec<u8>,
    data: Vec<u8>,
    data_length: usize,
    has_data: bool,
    /// The last `id` field (an event's id, until another says otherwise).
    pub id: Option<String>,
    /// The last `retry` field (milliseconds).
    pub retry_ms: Option<u64>,
}

impl EventParser {
    /// A parser whose events' data may hold `limit` bytes.
    pub fn new(limit: usize) -> EventParser {
        EventParser {
            limit,
            pending: Vec::new(),
            data: Vec::new(),
            data_length: 0,
            has_data: false,
            id: None,
            retry_ms: None,
        }
    }

    /// The events completed by `chunk`.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.pending.drain(..=at).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if self.has_data {
                    let data = if self.data_length > self.limit {
                        Line::TooLong(self.data_length)
                    } else {
                        Line::Message(std::mem::take(&mut self.data))
                    };
                    events.push(Event { data, id: self.id.clone() });
                }
                self.data.clear();
                self.data_length = 0;
                self.has_data = false;
                continue;
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(0) => continue, // a comment
                Some(at) => {
                    let value = &line[at + 1..];
                    (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (&line[..], &b""[..]),
            };
            match field {
                b"data" => {
                    if self.has_data {
                        self.data_length += 1;
                        if self.data_length <= self.limit {
                            self.data.push(b'\n');
                        }
                    }
                    self.has_data = true;
                    self.data_length += value.len();
                    if self.data_length <= self.limit {
                        self.data.extend_from_slice(value);
                    }
                }
                b"id" if !value.contains(&0) => self.id = Some(String::from_utf8_lossy(value).into_owned()),
                b"retry" => {
                    if let Some(ms) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                        self.retry_ms = Some(ms);
                    }
                }
                _ => {}
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_across_chunks_with_ids_comments_and_a_limit() {
        let mut parser = EventParser::new(10);
        let mut events = parser.feed(b": hello\nid: 1\nevent: message\ndata: {\"a\"");
        assert!(events.is_empty());
        events.extend(parser.feed(b":1}\r\n\r\ndata: x\ndata: y\n\n"));
        events.extend(parser.feed(b"data: 0123456789ab\n\nretry: 5\n\n"));
        assert_eq!(
            events,
            vec![
                Event { data: Line::Message(b"{\"a\":1}".to_vec()), id: Some("1".into()) },
                Event { data: Line::Message(b"x\ny".to_vec()), id: Some("1".into()) },
                Event { data: Line::TooLong(12), id: Some("1".into()) },
            ]
        );
        assert_eq!(parser.retry_ms, Some(5));
    }
}
