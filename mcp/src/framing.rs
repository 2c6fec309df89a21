//! The stdio transport's framing: one message per line, UTF-8, no embedded
//! newline. Lines are read with a size limit, so a peer cannot make the
//! proxy hold an unbounded line in memory: a longer one is skipped to its
//! end and reported, to be answered.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// What one read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line (without its `\n` or `\r\n`); blank lines are skipped.
    Message(Vec<u8>),
    /// A line longer than the limit: its length in bytes (it was skipped).
    TooLong(usize),
}

/// Reads lines of at most `limit` bytes from `reader`; `None` at the end.
pub async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut skipped: Option<usize> = None;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // The end: a last line without a newline still counts.
            return Ok(match skipped {
                Some(length) => Some(Line::TooLong(length)),
                None if is_blank(&line) => None,
                None => Some(Line::Message(trim_cr(line))),
            });
        }
        let (chunk, ends) = match memchr(available) {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        match &mut skipped {
            Some(length) => *length += chunk.len(),
            None if line.len() + chunk.len() > limit => skipped = Some(line.len() + chunk.len()),
            None => line.extend_from_slice(chunk),
        }
        if skipped.is_some() && !line.is_empty() {
            line = Vec::new();
        }
        let consumed = ends.unwrap_or(available.len());
        reader.consume(consumed);
        if ends.is_some() {
            if let Some(length) = skipped {
                return Ok(Some(Line::TooLong(length)));
            }
            if is_blank(&line) {
                line.clear();
                continue;
            }
            return Ok(Some(Line::Message(trim_cr(line))));
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// Reads `reader`'s lines into events, `wrap`ped, until its end (sent too).
pub fn spawn_reader<R, T, F>(reader: R, limit: usize, events: mpsc::Sender<T>, wrap: F)
where
    R: AsyncRead + Unpin + Send + 'static,
    T: Send + 'static,
    F: Fn(Option<std::io::Result<Line>>) -> T + Send + 'static,
{
    tokio::spawn(async move {
        let mut reader = BufReader::with_capacity(64 * 1024, reader);
        loop {
            let line = next_line(&mut reader, limit).await.transpose();
            let end = !matches!(line, Some(Ok(_)));
            if events.send(wrap(line)).await.is_err() || end {
                return;
            }
        }
    });
}

/// Writes each line sent to the returned sender (at most `queue` waiting),
/// a newline after each, until every sender is dropped; then shuts `writer`
/// down.
pub fn spawn_writer<W>(mut writer: W, queue: usize) -> (mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(queue);
    let task = tokio::spawn(async move {
        while let Some(mut line) = rx.recv().await {
            line.push(b'\n');
            if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    (tx, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        // A tiny buffer, so lines span several reads.
        let mut reader = tokio::io::BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        while let Some(line) = next_line(&mut reader, limit).await.unwrap() {
            out.push(line);
        }
        out
    }

    #[test]
    fn lines_blank_lines_crlf_and_a_last_line_without_newline() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let got = runtime.block_on(lines(b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\"}", 100));
        assert_eq!(
            got,
            vec![
                Line::Message(b"{\"a\":1}".to_vec()),
                Line::Message(b"{\"b\":2}".to_vec()),
                Line::Message(b"{\"c\"}".to_vec())
            ]
        );
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_to_its_end_and_reported() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let got = runtime.block_on(lines(b"0123456789ab\nok\n0123456789X", 10));
        assert_eq!(got, vec![Line::TooLong(12), Line::Message(b"ok".to_vec()), Line::TooLong(11)]);
        let exact = runtime.block_on(lines(b"0123456789\n", 10));
        assert_eq!(exact, vec![Line::Message(b"0123456789".to_vec())]);
    }
}
