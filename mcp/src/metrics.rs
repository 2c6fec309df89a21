//! What the proxy decided and served, counted for `GET /metrics` on
//! `--listen` (Prometheus's text format). Every session and every server
//! behind one process counts into one [`Metrics`], which their [`Gate`]s
//! share.
//!
//! [`Gate`]: crate::Gate

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the decision-time histogram's buckets, in seconds.
const BUCKETS: [f64; 10] = [0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.05, 0.25];

/// One server's decisions by (method, outcome).
type Counts = BTreeMap<(&'static str, &'static str), u64>;

/// The proxy's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Decisions by server, then (method, outcome): a decision allocates
    /// nothing once its server has been counted.
    decisions: Mutex<BTreeMap<String, Counts>>,
    /// Decision times by server: bucket counts, count, sum.
    times: Mutex<BTreeMap<String, Histogram>>,
    sessions_started: AtomicU64,
    /// HTTP responses by status.
    responses: Mutex<BTreeMap<u16, u64>>,
}

#[derive(Debug, Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    /// Counts one decision at a guard point: `outcome` is `allow`,
    /// `rewrite`, `deny`, `ask`, `error` or `withheld` (a changed tool's
    /// call), `took` how long the guardrail took (none for `withheld`).
    pub fn decided(&self, server: &str, method: &str, outcome: &'static str, took: Option<Duration>) {
        let method = match method {
            "tools/call" => "tools/call",
            "resources/read" => "resources/read",
            "prompts/get" => "prompts/get",
            _ => "other",
        };
        {
            let mut decisions = self.decisions.lock().expect("not poisoned");
            if !decisions.contains_key(server) {
                decisions.insert(server.to_owned(), BTreeMap::new());
            }
            let by_server = decisions.get_mut(server).expect("inserted above");
            *by_server.entry((method, outcome)).or_default() += 1;
        }
        if let Some(took) = took {
            let seconds = took.as_secs_f64();
            let mut times = self.times.lock().expect("not poisoned");
            if !times.contains_key(server) {
                times.insert(server.to_owned(), Histogram::default());
            }
            let histogram = times.get_mut(server).expect("inserted above");
            for (bound, count) in BUCKETS.iter().zip(histogram.buckets.iter_mut()) {
                if seconds <= *bound {
                    *count += 1;
                }
            }
            histogram.count += 1;
            histogram.sum += seconds;
        }
    }

    /// Counts a session started over HTTP.
    pub fn session_started(&self) {
        self.sessions_started.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an HTTP response.
    pub fn responded(&self, status: u16) {
        *self.responses.lock().expect("not poisoned").entry(status).or_default() += 1;
    }

    /// The counters in Prometheus's text format; `sessions_open` is the
    /// number of sessions open now.
    pub fn render(&self, sessions_open: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP guardhost_mcp_decisions_total Guard-point decisions (tools/call, resources/read, prompts/get) by server, method and outcome.");
        let _ = writeln!(out, "# TYPE guardhost_mcp_decisions_total counter");
        for (server, counts) in self.decisions.lock().expect("not poisoned").iter() {
            for ((method, outcome), count) in counts {
                let _ = writeln!(
                    out,
                    "guardhost_mcp_decisions_total{{server=\"{}\",method=\"{method}\",outcome=\"{outcome}\"}} {count}",
                    escape(server)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP guardhost_mcp_decision_seconds How long the guardrail took to decide, by server."
        );
        let _ = writeln!(out, "# TYPE guardhost_mcp_decision_seconds histogram");
        for (server, histogram) in self.times.lock().expect("not poisoned").iter() {
            let server = escape(server);
            for (bound, count) in BUCKETS.iter().zip(histogram.buckets) {
                let _ = writeln!(
                    out,
                    "guardhost_mcp_decision_seconds_bucket{{server=\"{server}\",le=\"{bound}\"}} {count}"
                );
            }
            let count = histogram.count;
            let _ = writeln!(
                out,
                "guardhost_mcp_decision_seconds_bucket{{server=\"{server}\",le=\"+Inf\"}} {count}"
            );
            let _ =
                writeln!(out, "guardhost_mcp_decision_seconds_sum{{server=\"{server}\"}} {}", histogram.sum);
            let _ = writeln!(out, "guardhost_mcp_decision_seconds_count{{server=\"{server}\"}} {count}");
        }
        let _ = writeln!(out, "# HELP guardhost_mcp_sessions_open MCP sessions open over HTTP.");
        let _ = writeln!(out, "# TYPE guardhost_mcp_sessions_open gauge");
        let _ = writeln!(out, "guardhost_mcp_sessions_open {sessions_open}");
        let _ = writeln!(out, "# HELP guardhost_mcp_sessions_started_total MCP sessions started over HTTP.");
        let _ = writeln!(out, "# TYPE guardhost_mcp_sessions_started_total counter");
        let _ = writeln!(
            out,
            "guardhost_mcp_sessions_started_total {}",
            self.sessions_started.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# HELP guardhost_mcp_http_responses_total HTTP responses by status.");
        let _ = writeln!(out, "# TYPE guardhost_mcp_http_responses_total counter");
        for (status, count) in self.responses.lock().expect("not poisoned").iter() {
            let _ = writeln!(out, "guardhost_mcp_http_responses_total{{status=\"{status}\"}} {count}");
        }
        out
    }
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_times_sessions_and_responses_are_rendered() {
        let metrics = Metrics::default();
        metrics.decided("files", "tools/call", "allow", Some(Duration::from_micros(80)));
        metrics.decided("files", "tools/call", "allow", Some(Duration::from_millis(3)));
        metrics.decided("fi\"les", "prompts/get", "withheld", None);
        metrics.session_started();
        metrics.responded(200);
        metrics.responded(200);
        metrics.responded(403);
        let text = metrics.render(1);
        for line in [
            "guardhost_mcp_decisions_total{server=\"files\",method=\"tools/call\",outcome=\"allow\"} 2",
            "guardhost_mcp_decisions_total{server=\"fi\\\"les\",method=\"prompts/get\",outcome=\"withheld\"} 1",
            "guardhost_mcp_decision_seconds_bucket{server=\"files\",le=\"0.00005\"} 0",
            "guardhost_mcp_decision_seconds_bucket{server=\"files\",le=\"0.0001\"} 1",
            "guardhost_mcp_decision_seconds_bucket{server=\"files\",le=\"0.005\"} 2",
            "guardhost_mcp_decision_seconds_bucket{server=\"files\",le=\"+Inf\"} 2",
            "guardhost_mcp_decision_seconds_count{server=\"files\"} 2",
            "guardhost_mcp_sessions_open 1",
            "guardhost_mcp_sessions_started_total 1",
            "guardhost_mcp_http_responses_total{status=\"200\"} 2",
            "guardhost_mcp_http_responses_total{status=\"403\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }
}
