//! The tests' side of the wire: the real `guardhost-server` binary started
//! on a loopback port, a plain HTTP/1.1 client over a TCP (or Unix) socket,
//! and a check of every response against the service's own OpenAPI
//! document.
#![allow(dead_code)]

pub mod openapi;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

pub const SERVER: &str = env!("CARGO_BIN_EXE_guardhost-server");

/// `use:` value for a symbol of a workspace cdylib.
pub fn use_of(lib_name: &str, symbol: &str) -> String {
    format!("{}:{symbol}", guardhost_kit::cdylib(lib_name).display())
}

/// A config file with `provider` (YAML lines under `provider:`), in `dir`.
pub fn config(dir: &Path, provider: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(&path, format!("guardrails:\n  enabled: true\n  provider:\n{provider}")).unwrap();
    path
}

/// The allowlist library denying `bash`.
pub fn allowlist() -> String {
    format!(
        "    use: {}\n    config: {{denied_tools: [bash, write_file]}}\n",
        use_of("guardhost_allowlist", "AllowlistProvider")
    )
}

/// A running `guardhost-server`.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:port`, or the Unix socket's path.
    pub address: String,
    /// What it wrote on stderr after its first line, as it comes.
    pub log: mpsc::Receiver<String>,
    /// Its first line: where it listens, and what guards calls.
    pub banner: String,
}

impl Server {
    /// Starts the server with `args` (on a port of the system's choosing
    /// unless `args` say `--unix`) and waits until it listens.
    pub fn start(args: &[&str]) -> Server {
        Self::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(SERVER);
        if !args.contains(&"--unix") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.args(args).envs(env.iter().copied()).env("GUARDHOST_LOG", "info");
        let mut child =
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (send, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let first = log.recv_timeout(Duration::from_secs(30)).expect("the server says where it listens");
        let address = first
            .split_once("listening on ")
            .map(|(_, rest)| rest.split_whitespace().next().unwrap_or_default())
            .unwrap_or_else(|| panic!("not the listening line: {first}"));
        let address = address.trim_start_matches("http://").trim_start_matches("unix:").to_owned();
        Server { child, address, log, banner: first }
    }

    /// Sends a signal to the server.
    pub fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status();
        assert!(status.unwrap().success());
    }

    /// Waits for the server to exit; its exit code.
    pub fn wait(&mut self, within: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the server did not exit within {within:?}");
    }

    /// The log lines written so far.
    pub fn logged(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }

    /// A request over TCP, checked against the OpenAPI document.
    pub fn call(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        let response = request(&self.address, method, path, headers, body);
        openapi::check(method, path, &response);
        response
    }

    /// `POST /v1/decide` with `body`.
    pub fn decide(&self, body: &Value) -> Response {
        self.call("POST", "/v1/decide", &[], body.to_string().as_bytes())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The bytes of a request (`Connection: close`).
pub fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut bytes =
        format!("{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n").into_bytes();
    for (name, value) in headers {
        bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    if method == "POST" {
        bytes.extend_from_slice(
            format!("content-type: application/json\r\ncontent-length: {}\r\n", body.len()).as_bytes(),
        );
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(body);
    bytes
}

/// One request on a new TCP connection to `address`.
pub fn request(address: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(&request_bytes(method, path, headers, body)).unwrap();
    read_response(&mut stream)
}

/// One request over the Unix socket at `path`.
#[cfg(unix)]
pub fn unix_request(socket: &Path, method: &str, path: &str, body: &[u8]) -> Response {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(&request_bytes(method, path, &[], body)).unwrap();
    read_response(&mut stream)
}

/// Reads a response to its end (the server closes the connection).
pub fn read_response(stream: &mut impl Read) -> Response {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_response(&raw)
}

pub fn parse_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete response: {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Response { status, headers, body: raw[split + 4..].to_vec() }
}
