//! What `/metrics` says, in Prometheus' text format: decisions by the
//! deciding entry (`entry`, a chain entry's name) and its provider,
//! outcome and reason code, a latency histogram, provider errors, calls let
//! through by `fail_closed: false`, would-be denials in shadow mode (per
//! entry, so an entry in `warn` beside enforcing ones is counted alone),
//! provider-process restarts, and HTTP requests by route and status.
//!
//! Counters are atomics behind a lock-free read of a small map: a label set
//! is added once (under a mutex) and counted without one after. Reason
//! codes come from providers, so their number is bounded: past
//! [`MAX_SERIES`] label sets, new ones are counted under `code="other"`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use guardhost::ReloadStatus;

/// The most label sets of `guardhost_decisions_total`.
pub const MAX_SERIES: usize = 1000;

/// The latency histogram's bucket bounds, in seconds.
pub const BUCKETS: [f64; 14] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    1.0,
];

/// A set of counters keyed by label values.
#[derive(Default)]
struct Family<K: Ord> {
    series: RwLock<BTreeMap<K, Arc<AtomicU64>>>,
    adding: Mutex<()>,
}

impl<K: Ord + Clone> Family<K> {
    /// Adds `by` to `key`'s counter; a new key past `bound`'s number of
    /// label sets is counted under the key `bound` makes instead.
    fn add(&self, key: K, by: u64, bound: Option<(usize, &dyn Fn() -> K)>) {
        if let Some(counter) = self.series.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            counter.fetch_add(by, Ordering::Relaxed);
            return;
        }
        let _adding = self.adding.lock().unwrap_or_else(|e| e.into_inner());
        let mut series = self.series.write().unwrap_or_else(|e| e.into_inner());
        let key = match bound {
            Some((max, other)) if series.len() >= max && !series.contains_key(&key) => other(),
            _ => key,
        };
        series.entry(key).or_default().fetch_add(by, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Vec<(K, u64)> {
        let series = self.series.read().unwrap_or_else(|e| e.into_inner());
        series.iter().map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed))).collect()
    }
}

/// Decision latencies of one provider.
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }

    fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        if let Some(at) = BUCKETS.iter().position(|&bound| seconds <= bound) {
            self.buckets[at].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(took.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }
}

/// One decided call, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct Decided<'a> {
    /// The guard that decided it (a chain's `decided_by`; `none` when no
    /// guard did: no guardrail, no entry selecting the call).
    pub entry: &'a str,
    /// That guard's provider's name.
    pub provider: &'a str,
    /// `allow`, `deny`, `error` or `interrupt`.
    pub outcome: &'a str,
    /// The first reason's code (`""` without one).
    pub code: &'a str,
    /// The provider failed (the middleware decided by `fail_closed`).
    pub provider_error: bool,
    /// Shadow mode let a call through that the policy denied.
    pub would_deny: bool,
    /// The call was not decided within `--decision-timeout-ms` (a provider
    /// error too).
    pub timed_out: bool,
    /// How long the decision took.
    pub took: Duration,
}

/// `entry="...",provider="..."`.
fn labels((entry, provider): &Who) -> String {
    format!("entry=\"{}\",provider=\"{}\"", escape(entry), escape(provider))
}

/// Every metric the server keeps.
#[derive(Default)]
pub struct Metrics {
    decisions: Family<(Who, String, String)>,
    provider_errors: Family<Who>,
    fail_open: Family<Who>,
    would_deny: Family<Who>,
    timeouts: Family<Who>,
    http: Family<(String, u16)>,
    answers: Family<&'static str>,
    latency: RwLock<BTreeMap<Who, Arc<Histogram>>>,
}

/// A guard as the labels name it: its entry's name and its provider's.
type Who = (String, String);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Counts one decided call.
    pub fn decided(&self, call: Decided<'_>) {
        let who = || (call.entry.to_owned(), call.provider.to_owned());
        let other = || (who(), call.outcome.to_owned(), "other".to_owned());
        self.decisions.add(
            (who(), call.outcome.to_owned(), call.code.to_owned()),
            1,
            Some((MAX_SERIES, &other)),
        );
        if call.provider_error {
            self.provider_errors.add(who(), 1, None);
            // Let through by `fail_closed: false`, not by shadow mode.
            if call.outcome == "allow" && !call.would_deny {
                self.fail_open.add(who(), 1, None);
            }
        }
        if call.would_deny {
            self.would_deny.add(who(), 1, None);
        }
        if call.timed_out {
            self.timeouts.add(who(), 1, None);
        }
        let histogram = self
            .latency
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|((entry, provider), _)| entry == call.entry && provider == call.provider)
            .map(|(_, histogram)| histogram.clone());
        let histogram = histogram.unwrap_or_else(|| {
            let mut latency = self.latency.write().unwrap_or_else(|e| e.into_inner());
            latency.entry(who()).or_insert_with(|| Arc::new(Histogram::new())).clone()
        });
        histogram.observe(call.took);
    }

    /// Counts one answer to a held call (`POST /v1/pending/{id}`) by its
    /// result: `approved`, `refused`, `unauthenticated`, `forbidden`,
    /// `unknown`, `conflict`, `bad`, `unavailable`.
    pub fn answer(&self, result: &'static str) {
        self.answers.add(result, 1, None);
    }

    /// Counts one HTTP request answered on `route` with `status`.
    pub fn answered(&self, route: &str, status: u16) {
        self.http.add((route.to_owned(), status), 1, None);
    }

    /// The Prometheus text exposition, with the counters kept elsewhere
    /// given: provider-process `restarts`, the current decision log's
    /// `dropped` entries, (under `--watch`) how reloads have gone, and how
    /// many calls are `held` for approval (`None` when the store did not
    /// say).
    pub fn render(
        &self,
        restarts: u64,
        dropped: u64,
        reloads: Option<&ReloadStatus>,
        held: Option<usize>,
    ) -> String {
        let mut out = String::with_capacity(4096);
        let label = escape;
        header(
            &mut out,
            "guardhost_decisions_total",
            "counter",
            "Calls decided, by the deciding entry, its provider, the outcome and the first reason code.",
        );
        for ((who, outcome, code), n) in self.decisions.snapshot() {
            let _ = writeln!(
                out,
                "guardhost_decisions_total{{{},outcome=\"{}\",code=\"{}\"}} {n}",
                labels(&who),
                label(&outcome),
                label(&code)
            );
        }
        header(&mut out, "guardhost_decision_seconds", "histogram", "How long deciding a call took.");
        let latency = self.latency.read().unwrap_or_else(|e| e.into_inner());
        for (who, histogram) in latency.iter() {
            let who = labels(who);
            let mut cumulative = 0;
            for (bound, bucket) in BUCKETS.iter().zip(&histogram.buckets) {
                cumulative += bucket.load(Ordering::Relaxed);
                let _ =
                    writeln!(out, "guardhost_decision_seconds_bucket{{{who},le=\"{bound}\"}} {cumulative}");
            }
            let count = histogram.count.load(Ordering::Relaxed);
            let sum = histogram.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "guardhost_decision_seconds_bucket{{{who},le=\"+Inf\"}} {count}");
            let _ = writeln!(out, "guardhost_decision_seconds_sum{{{who}}} {sum}");
            let _ = writeln!(out, "guardhost_decision_seconds_count{{{who}}} {count}");
        }
        drop(latency);
        for (name, help, family) in [
            (
                "guardhost_provider_errors_total",
                "Calls the provider failed on (errors, panics, timeouts, a dead provider process).",
                &self.provider_errors,
            ),
            (
                "guardhost_fail_open_total",
                "Calls let through because the provider failed and fail_closed is false.",
                &self.fail_open,
            ),
            (
                "guardhost_shadow_would_deny_total",
                "Calls the policy denied that warn or observe mode let through.",
                &self.would_deny,
            ),
            (
                "guardhost_decision_timeouts_total",
                "Calls not decided within --decision-timeout-ms (answered as provider errors).",
                &self.timeouts,
            ),
        ] {
            header(&mut out, name, "counter", help);
            for (who, n) in family.snapshot() {
                let _ = writeln!(out, "{name}{{{}}} {n}", labels(&who));
            }
        }
        header(
            &mut out,
            "guardhost_provider_restarts_total",
            "counter",
            "Provider processes restarted (isolation: process).",
        );
        let _ = writeln!(out, "guardhost_provider_restarts_total {restarts}");
        header(
            &mut out,
            "guardhost_decision_log_dropped_total",
            "counter",
            "Decision-log entries dropped because its queue was full (when_full: drop).",
        );
        let _ = writeln!(out, "guardhost_decision_log_dropped_total {dropped}");
        header(
            &mut out,
            "guardhost_http_requests_total",
            "counter",
            "HTTP requests answered, by route and status.",
        );
        for ((route, status), n) in self.http.snapshot() {
            let _ = writeln!(
                out,
                "guardhost_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                label(&route)
            );
        }
        if let Some(held) = held {
            header(
                &mut out,
                "guardhost_pending_calls",
                "gauge",
                "Calls held for a human's approval, not answered yet (with --pending-store, across the \
                 replicas sharing it).",
            );
            let _ = writeln!(out, "guardhost_pending_calls {held}");
        }
        header(
            &mut out,
            "guardhost_pending_answers_total",
            "counter",
            "Answers to held calls (POST /v1/pending/{id}) by result: approved, refused, unauthenticated, \
             forbidden, unknown, conflict, bad, unavailable.",
        );
        for (result, n) in self.answers.snapshot() {
            let _ = writeln!(out, "guardhost_pending_answers_total{{result=\"{result}\"}} {n}");
        }
        if let Some(reloads) = reloads {
            header(
                &mut out,
                "guardhost_reloads_total",
                "counter",
                "Config reloads by result: applied (a new guardrail swapped in), weakening (applied, and \
                 weaker than the one before), refused (it would remove or weaken the guardrail), failed.",
            );
            for (result, n) in [
                ("applied", reloads.applied),
                ("weakening", reloads.weakening),
                ("refused", reloads.refused),
                ("failed", reloads.failed),
            ] {
                let _ = writeln!(out, "guardhost_reloads_total{{result=\"{result}\"}} {n}");
            }
            header(
                &mut out,
                "guardhost_config_info",
                "gauge",
                "The running config: its digest, and whether its guardrail is weaker than the one the server \
                 started with.",
            );
            let _ = writeln!(
                out,
                "guardhost_config_info{{digest=\"{}\",weakened=\"{}\"}} 1",
                label(&reloads.config_digest),
                !reloads.weakened.is_empty()
            );
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(outcome: &'a str, code: &'a str) -> Decided<'a> {
        Decided {
            entry: "allowlist",
            provider: "allowlist",
            outcome,
            code,
            provider_error: false,
            would_deny: false,
            timed_out: false,
            took: Duration::from_micros(30),
        }
    }

    #[test]
    fn decisions_are_counted_by_label_set_and_rendered_with_escapes() {
        let metrics = Metrics::default();
        metrics.decided(call("allow", "oap.allowed"));
        metrics.decided(call("allow", "oap.allowed"));
        metrics.decided(call("deny", "say \"no\"\n\\"));
        metrics.decided(Decided { provider_error: true, ..call("allow", "oap.evaluator_error") });
        metrics.decided(Decided {
            provider_error: true,
            timed_out: true,
            ..call("deny", "oap.evaluator_error")
        });
        metrics.answered("/v1/decide", 200);
        let text = metrics.render(3, 7, None, Some(2));
        assert!(text.contains("guardhost_decisions_total{entry=\"allowlist\",provider=\"allowlist\",outcome=\"allow\",code=\"oap.allowed\"} 2\n"), "{text}");
        assert!(text.contains("code=\"say \\\"no\\\"\\n\\\\\"} 1\n"), "{text}");
        assert!(
            text.contains("guardhost_provider_errors_total{entry=\"allowlist\",provider=\"allowlist\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "guardhost_decision_timeouts_total{entry=\"allowlist\",provider=\"allowlist\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("guardhost_fail_open_total{entry=\"allowlist\",provider=\"allowlist\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("guardhost_provider_restarts_total 3\n"), "{text}");
        assert!(text.contains("guardhost_decision_log_dropped_total 7\n"), "{text}");
        assert!(text.contains("guardhost_pending_calls 2\n"), "{text}");
        assert!(
            text.contains("guardhost_http_requests_total{route=\"/v1/decide\",status=\"200\"} 1\n"),
            "{text}"
        );
        // 30 µs: in the 50 µs bucket and every one above, not in 25 µs.
        assert!(
            text.contains("guardhost_decision_seconds_bucket{entry=\"allowlist\",provider=\"allowlist\",le=\"0.000025\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("guardhost_decision_seconds_bucket{entry=\"allowlist\",provider=\"allowlist\",le=\"0.00005\"} 5\n"),
            "{text}"
        );
        assert!(
            text.contains("guardhost_decision_seconds_count{entry=\"allowlist\",provider=\"allowlist\"} 5\n"),
            "{text}"
        );
    }

    #[test]
    fn reason_codes_past_the_bound_are_counted_as_other() {
        let metrics = Metrics::default();
        for i in 0..MAX_SERIES + 50 {
            metrics.decided(call("deny", &format!("code-{i}")));
        }
        let text = metrics.render(0, 0, None, None);
        let series = text.lines().filter(|l| l.starts_with("guardhost_decisions_total{")).count();
        assert_eq!(series, MAX_SERIES + 1);
        assert!(text.contains("code=\"other\"} 50\n"), "{}", &text[..400]);
    }
}
