//! The least any process between an MCP client and a stdio server does:
//! copy bytes both ways, with blocking reads and writes and no parsing.
//! `scripts/bench-mcp` builds it (`rustc -O`) and measures it beside the
//! direct call and `guardhost mcp`, in the same run: what it adds is the
//! cost of one more process on the path, the floor under any proxy's.
//!
//!     relay SERVER-COMMAND ARGS...

use std::io::{Read, Write};
use std::process::{Command, Stdio};

fn copy(mut from: impl Read, mut to: impl Write) -> std::io::Result<()> {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = from.read(&mut buffer)?;
        if read == 0 {
            return Ok(());
        }
        to.write_all(&buffer[..read])?;
        to.flush()?;
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (program, rest) = args.split_first().expect("usage: relay SERVER-COMMAND ARGS...");
    let mut server = Command::new(program).args(rest).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    let (to_server, from_server) = (server.stdin.take().expect("piped"), server.stdout.take().expect("piped"));
    let answers = std::thread::spawn(move || copy(from_server, std::io::stdout().lock()));
    copy(std::io::stdin().lock(), to_server)?;
    answers.join().expect("the copying thread does not panic")?;
    server.wait()?;
    Ok(())
}
