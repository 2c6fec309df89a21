//! `guardhost bench`: a realistic mixed stream of tool calls through the
//! configured guardrail, measured per call; or the standard suite over the
//! shipped providers, as a table and an SVG chart.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guardhost::{
    async_handler, GuardrailMiddleware, ToolCallError, ToolCallRequest, ToolMessage, ToolStatus,
};
use guardhost_kit::corpus::everyday_tool_calls;
use serde::{Deserialize, Serialize};

use crate::error::CliError;
use crate::setup::load_guardrail;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[arg(long, value_name = "FILE", help = crate::setup::CONFIG_HELP, conflicts_with = "suite")]
    config: Option<PathBuf>,
    /// Tool calls to send (a mix of DeerFlow's tools, over and over).
    #[arg(long, value_name = "N", default_value_t = 200_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    calls: u64,
    /// Callers at once: threads on the sync path, tasks on a multi-thread
    /// runtime with --async.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    concurrency: u16,
    /// Use awrap_tool_call (the provider's aevaluate) on a tokio runtime.
    #[arg(long = "async")]
    use_async: bool,
    /// Pace each caller: a call at most every N microseconds (it sleeps
    /// between calls), to see what a given call rate costs in CPU.
    #[arg(long, value_name = "N", conflicts_with = "suite")]
    interval_us: Option<u64>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
    /// Measure the standard suite instead: the shipped providers (found next
    /// to this executable) on the sync and async paths; prints a Markdown
    /// table.
    #[arg(long)]
    suite: bool,
    /// With --suite: also write the per-call latency chart (SVG) here.
    #[arg(long, value_name = "FILE", requires = "suite")]
    chart: Option<PathBuf>,
    /// Print the mix of tool calls the measurement sends, as `guardhost
    /// run` input lines, and measure nothing (for a program that measures
    /// another implementation on the very same calls).
    #[arg(long, conflicts_with_all = ["suite", "config"])]
    print_mix: bool,
}

/// The mix as `guardhost run` input lines.
fn mix_lines() -> String {
    everyday_tool_calls()
        .into_iter()
        .map(|call| {
            let line = serde_json::json!({
                "name": call.tool_call.name,
                "args": call.tool_call.args,
                "id": call.tool_call.id,
                "context": call.context,
            });
            format!("{line}\n")
        })
        .collect()
}

/// What one run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    provider: String,
    path: String,
    calls: u64,
    concurrency: u16,
    allowed: u64,
    denied: u64,
    /// Calls that ended in an error (an invalid request, an interrupt).
    errors: u64,
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
    calls_per_second: f64,
    peak_rss_kib: Option<u64>,
    /// CPU time over the timed part, this process and its child processes
    /// (a provider process) together, in percent of one core (Linux).
    #[serde(default)]
    cpu_percent: Option<f64>,
    /// The pacing asked for (`--interval-us`).
    #[serde(default)]
    interval_us: Option<u64>,
}

fn passthrough(call: ToolCallRequest) -> Result<ToolMessage, ToolCallError> {
    Ok(ToolMessage {
        content: String::new(),
        tool_call_id: call.tool_call.id.unwrap_or_default(),
        name: call.tool_call.name,
        status: ToolStatus::Success,
    })
}

/// The process's peak resident memory, where the OS tells (Linux).
fn peak_rss_kib() -> Option<u64> {
    guardhost_kit::memory_kib("VmHWM")
}

/// One caller's share: per-call latencies (ns), and how many calls were
/// allowed and how many ended in an error.
#[derive(Default)]
struct Share {
    latencies: Vec<u64>,
    allowed: u64,
    errors: u64,
}

impl Share {
    fn with_capacity(calls: u64) -> Self {
        Share { latencies: Vec::with_capacity(calls as usize), ..Share::default() }
    }

    fn record(&mut self, started: Instant, outcome: &Result<ToolMessage, ToolCallError>) {
        self.latencies.push(started.elapsed().as_nanos() as u64);
        match outcome {
            Ok(ToolMessage { status: ToolStatus::Success, .. }) => self.allowed += 1,
            Ok(_) => {}
            Err(_) => self.errors += 1,
        }
    }
}

/// One sync caller: `count` calls of the mix, starting at `offset`. Each
/// call is cloned from the mix (as a runtime hands over a new call) outside
/// the timed part.
fn sync_share(
    mw: &GuardrailMiddleware,
    mix: &[ToolCallRequest],
    count: u64,
    offset: usize,
    interval: Option<Duration>,
) -> Share {
    let mut share = Share::with_capacity(count);
    let start = Instant::now();
    for i in 0..count as usize {
        pace(start, i, interval);
        let call = mix[(i + offset) % mix.len()].clone();
        let started = Instant::now();
        let outcome = mw.wrap_tool_call(call, &passthrough);
        share.record(started, &outcome);
    }
    share
}

/// With pacing, waits (sleeping) until call `i` of a caller that started
/// at `start` is due.
fn pace(start: Instant, i: usize, interval: Option<Duration>) {
    if let Some(due) = interval.map(|every| start + every * i as u32) {
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
}

/// [`pace`] for a task: waits on a timer.
async fn pace_async(start: Instant, i: usize, interval: Option<Duration>) {
    if let Some(due) = interval.map(|every| start + every * i as u32) {
        futures_timer::Delay::new(due.saturating_duration_since(Instant::now())).await;
    }
}

/// CPU time (user and system) of this process and of its child processes
/// so far (Linux; `None` elsewhere).
fn cpu_time() -> Option<Duration> {
    let ticks = |pid: &str| -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    };
    let parent = |pid: &str| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
    };
    let me = std::process::id();
    let mut total = ticks("self")?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else { continue };
        if parent(pid) == Some(me) {
            total += ticks(pid).unwrap_or(0);
        }
    }
    // The kernel counts in USER_HZ, 100 per second on Linux.
    Some(Duration::from_millis(total * 10))
}

/// `callers` async tasks sending `calls` calls between them.
async fn async_shares(
    mw: &GuardrailMiddleware,
    mix: &Arc<Vec<ToolCallRequest>>,
    calls: u64,
    callers: u64,
    interval: Option<Duration>,
) -> Vec<Share> {
    let handler = async_handler(|call: ToolCallRequest| async move { passthrough(call) });
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let (mw, mix, handler) = (mw.clone(), mix.clone(), handler.clone());
            let count = calls / callers + u64::from(c < calls % callers);
            tokio::spawn(async move {
                let mut share = Share::with_capacity(count);
                let start = Instant::now();
                for i in 0..count as usize {
                    pace_async(start, i, interval).await;
                    let call = mix[(i + c as usize) % mix.len()].clone();
                    let started = Instant::now();
                    let outcome = mw.awrap_tool_call(call, handler.clone()).await;
                    share.record(started, &outcome);
                }
                share
            })
        })
        .collect();
    let mut shares = Vec::with_capacity(tasks.len());
    for task in tasks {
        shares.push(task.await.expect("a bench task"));
    }
    shares
}

/// Sends `calls` calls through `mw` from `concurrency` callers (each paced
/// to a call every `interval_us`, if given), after a warm-up on the same
/// path (a tenth of the calls, at most 20,000, unpaced).
pub fn measure(
    mw: &GuardrailMiddleware,
    calls: u64,
    concurrency: u16,
    use_async: bool,
    interval_us: Option<u64>,
) -> Measurement {
    let mix = Arc::new(everyday_tool_calls());
    let callers = u64::from(concurrency);
    let warm_up = (calls / 10).clamp(1, 20_000);
    let interval = interval_us.map(Duration::from_micros);
    let (shares, wall, cpu) = if use_async {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
        runtime.block_on(async_shares(mw, &mix, warm_up, 1, None));
        let (started, cpu) = (Instant::now(), cpu_time());
        let shares = runtime.block_on(async_shares(mw, &mix, calls, callers, interval));
        (shares, started.elapsed(), cpu.zip(cpu_time()))
    } else {
        sync_share(mw, &mix, warm_up, 0, None);
        let (started, cpu) = (Instant::now(), cpu_time());
        let shares = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..callers)
                .map(|c| {
                    let count = calls / callers + u64::from(c < calls % callers);
                    let mix = &mix;
                    scope.spawn(move || sync_share(mw, mix, count, c as usize, interval))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a bench thread")).collect::<Vec<_>>()
        });
        (shares, started.elapsed(), cpu.zip(cpu_time()))
    };
    let cpu_percent = cpu.map(|(before, after)| {
        100.0 * after.saturating_sub(before).as_secs_f64() / wall.as_secs_f64().max(f64::MIN_POSITIVE)
    });
    let allowed: u64 = shares.iter().map(|s| s.allowed).sum();
    let errors: u64 = shares.iter().map(|s| s.errors).sum();
    let mut latencies = Vec::with_capacity(calls as usize);
    for share in shares {
        latencies.extend(share.latencies);
    }
    latencies.sort_unstable();
    let at = |q: usize| latencies[(latencies.len() * q).div_ceil(100).max(1) - 1];
    Measurement {
        provider: mw.provider().name().to_owned(),
        path: if use_async { "async" } else { "sync" }.to_owned(),
        calls,
        concurrency,
        allowed,
        denied: calls - allowed - errors,
        errors,
        p50_ns: at(50),
        p99_ns: at(99),
        max_ns: latencies.last().copied().unwrap_or(0),
        calls_per_second: calls as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        peak_rss_kib: peak_rss_kib(),
        cpu_percent,
        interval_us,
    }
}

fn micros(ns: u64) -> String {
    format!("{:.2} µs", ns as f64 / 1000.0)
}

fn print_text(m: &Measurement) -> Result<(), CliError> {
    outln!("provider:         {} ({} path, {} caller(s))", m.provider, m.path, m.concurrency)?;
    outln!(
        "calls:            {} ({} allowed, {} denied, {} errors)",
        m.calls,
        m.allowed,
        m.denied,
        m.errors
    )?;
    outln!("per call:         p50 {}, p99 {}, max {}", micros(m.p50_ns), micros(m.p99_ns), micros(m.max_ns))?;
    match m.interval_us {
        Some(us) => outln!(
            "throughput:       {:.0} calls/s (each caller paced to a call every {us} µs)",
            m.calls_per_second
        )?,
        None => outln!("throughput:       {:.0} calls/s", m.calls_per_second)?,
    }
    if let Some(cpu) = m.cpu_percent {
        outln!("cpu:              {cpu:.1}% of one core (this process and its provider process)")?;
    }
    match m.peak_rss_kib {
        Some(kib) => outln!("peak memory:      {:.1} MB resident", kib as f64 / 1024.0)?,
        None => outln!("peak memory:      (not available on this platform)")?,
    }
    Ok(())
}

pub fn run(args: BenchArgs) -> Result<ExitCode, CliError> {
    if args.print_mix {
        out!("{}", mix_lines())?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.suite {
        return suite(&args);
    }
    let (_, guardrail) = load_guardrail(args.config.as_deref(), crate::setup::required(false)?)?;
    let Some(guardrail) = guardrail else {
        return Err(CliError::Usage(
            "the config installs no guardrail (not enabled, or no provider): there is nothing to measure"
                .into(),
        ));
    };
    let m = measure(&guardrail.middleware, args.calls, args.concurrency, args.use_async, args.interval_us);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&m).unwrap_or_default())?;
    } else {
        print_text(&m)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The providers of the standard suite: (label, YAML provider section).
fn suite_providers(dir: &Path) -> Vec<(&'static str, String)> {
    let lib = |name: &str| dir.join(name).display().to_string();
    let passport = std::env::current_dir().unwrap_or_default().join("examples/oap/passport.json");
    vec![
        (
            "allowlist (built-in)",
            "use: builtin:AllowlistProvider\n    config: {denied_tools: [bash, write_file, str_replace]}"
                .into(),
        ),
        (
            "allowlist (.so)",
            format!(
                "use: {}:AllowlistProvider\n    config: {{denied_tools: [bash, write_file, str_replace]}}",
                lib("libguardhost_allowlist.so")
            ),
        ),
        (
            "allowlist (.so), isolation: process",
            format!(
                "use: {}:AllowlistProvider\n    isolation: process\n    config: {{denied_tools: [bash, write_file, str_replace]}}",
                lib("libguardhost_allowlist.so")
            ),
        ),
        (
            "allowlist (.so), isolation: process, pipes",
            format!(
                "use: {}:AllowlistProvider\n    isolation: process\n    transport: pipes\n    config: {{denied_tools: [bash, write_file, str_replace]}}",
                lib("libguardhost_allowlist.so")
            ),
        ),
        (
            "template, parses arguments (.so)",
            format!(
                "use: {}:TemplateProvider\n    config: {{blocked_patterns: [\"rm -rf\"]}}",
                lib("libguardhost_provider_template.so")
            ),
        ),
        (
            "OAP, example passport (.so)",
            format!(
                "use: {}:OAPGuardrailProvider\n    config: {{passport_path: \"{}\"}}",
                lib("libguardhost_oap.so"),
                passport.display()
            ),
        ),
    ]
}

/// Each row runs in a child process of its own, so each row's peak memory
/// is its own.
fn suite(args: &BenchArgs) -> Result<ExitCode, CliError> {
    let io = |what: String| move |source| CliError::Io { what, source };
    let exe = std::env::current_exe().map_err(io("cannot find this executable".into()))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let configs = tempfile_dir()?;
    let mut rows = Vec::new();
    for (i, (label, provider)) in suite_providers(dir).into_iter().enumerate() {
        let config = configs.join(format!("suite-{i}.yaml"));
        std::fs::write(&config, format!("guardrails:\n  enabled: true\n  provider:\n    {provider}\n"))
            .map_err(io(format!("cannot write {}", config.display())))?;
        for use_async in [false, true] {
            let mut command = std::process::Command::new(&exe);
            command.arg("bench").arg("--config").arg(&config).arg("--json");
            command.args([
                "--calls",
                &args.calls.to_string(),
                "--concurrency",
                &args.concurrency.to_string(),
            ]);
            if use_async {
                command.arg("--async");
            }
            let output = command.output().map_err(io(format!("cannot run {}", exe.display())))?;
            let measurement: Measurement = serde_json::from_slice(&output.stdout).map_err(|e| {
                CliError::Usage(format!(
                    "the {label} row failed ({e}): {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ))
            })?;
            rows.push((label, measurement));
        }
    }
    let _ = std::fs::remove_dir_all(&configs);
    if args.json {
        let all: Vec<_> =
            rows.iter().map(|(label, m)| serde_json::json!({"label": label, "measurement": m})).collect();
        outln!("{}", serde_json::to_string_pretty(&all).unwrap_or_default())?;
    } else {
        outln!("| provider | path | p50 | p99 | max | calls/s | peak RSS |")?;
        outln!("|---|---|---|---|---|---|---|")?;
        for (label, m) in &rows {
            outln!(
                "| {label} | {} | {} | {} | {} | {:.0} | {} |",
                m.path,
                micros(m.p50_ns),
                micros(m.p99_ns),
                micros(m.max_ns),
                m.calls_per_second,
                m.peak_rss_kib.map_or("n/a".into(), |k| format!("{:.1} MB", k as f64 / 1024.0))
            )?;
        }
    }
    if let Some(path) = &args.chart {
        std::fs::write(path, chart(&rows)).map_err(io(format!("cannot write {}", path.display())))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A fresh directory for the suite's configs.
fn tempfile_dir() -> Result<PathBuf, CliError> {
    let dir = std::env::temp_dir().join(format!("guardhost-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|source| CliError::Io { what: format!("cannot create {}", dir.display()), source })?;
    Ok(dir)
}

/// A horizontal bar chart of p50 and p99 per provider and path, on a log
/// scale from 0.1 µs (providers differ by orders of magnitude).
fn chart(rows: &[(&str, Measurement)]) -> String {
    let max = rows.iter().map(|(_, m)| m.p99_ns).max().unwrap_or(1).max(1000) as f64;
    let decades = (max / 100.0).log10().ceil().max(1.0);
    let scale = |ns: u64| ((ns.max(100) as f64 / 100.0).log10() / decades).clamp(0.0, 1.0);
    let (left, width, bar, gap) = (300.0, 560.0, 14.0, 10.0);
    let row_height = 2.0 * bar + gap;
    let height = 70.0 + rows.len() as f64 * row_height + 40.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">guardhost: time per tool call (wrap_tool_call / awrap_tool_call, mixed DeerFlow calls; log scale)</text>\n\
         <rect x=\"{left}\" y=\"34\" width=\"12\" height=\"10\" fill=\"#2b6cb0\"/><text x=\"{lx1}\" y=\"43\">p50</text>\n\
         <rect x=\"{lx2}\" y=\"34\" width=\"12\" height=\"10\" fill=\"#90cdf4\"/><text x=\"{lx3}\" y=\"43\">p99</text>\n",
        w = left + width + 120.0,
        lx1 = left + 16.0,
        lx2 = left + 60.0,
        lx3 = left + 76.0,
    );
    for (i, (label, m)) in rows.iter().enumerate() {
        let y = 60.0 + i as f64 * row_height;
        let p50 = scale(m.p50_ns) * width;
        let p99 = scale(m.p99_ns) * width;
        svg.push_str(&format!(
            "<text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{label} — {path}</text>\n\
             <rect x=\"{left}\" y=\"{y}\" width=\"{p50:.1}\" height=\"{bar}\" fill=\"#2b6cb0\"/>\n\
             <text x=\"{v1:.1}\" y=\"{vy1}\">{p50v}</text>\n\
             <rect x=\"{left}\" y=\"{y2}\" width=\"{p99:.1}\" height=\"{bar}\" fill=\"#90cdf4\"/>\n\
             <text x=\"{v2:.1}\" y=\"{vy2}\">{p99v}</text>\n",
            label = label.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;"),
            tx = left - 8.0,
            ty = y + bar + 4.0,
            path = m.path,
            y2 = y + bar,
            v1 = left + p50 + 4.0,
            vy1 = y + bar - 3.0,
            p50v = micros(m.p50_ns),
            v2 = left + p99 + 4.0,
            vy2 = y + 2.0 * bar - 3.0,
            p99v = micros(m.p99_ns),
        ));
    }
    let axis_y = 60.0 + rows.len() as f64 * row_height + 10.0;
    svg.push_str(&format!(
        "<line x1=\"{left}\" y1=\"{axis_y}\" x2=\"{x2}\" y2=\"{axis_y}\" stroke=\"#444\"/>\n",
        x2 = left + width
    ));
    for decade in 0..=decades as u32 {
        let x = left + width * f64::from(decade) / decades;
        let label = micros(100 * 10u64.pow(decade));
        svg.push_str(&format!(
            "<line x1=\"{x:.1}\" y1=\"{axis_y}\" x2=\"{x:.1}\" y2=\"{t1}\" stroke=\"#444\"/>\
             <text x=\"{x:.1}\" y=\"{t2}\" text-anchor=\"middle\">{label}</text>\n",
            t1 = axis_y + 4.0,
            t2 = axis_y + 17.0
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use guardhost::LoadedConfig;

    #[test]
    fn every_call_is_answered_once_on_both_paths() {
        let config = LoadedConfig::embedded_default();
        guardhost_builtins::register();
        let guardrail = guardhost::install(&config).unwrap().unwrap();
        for use_async in [false, true] {
            let m = measure(&guardrail.middleware, 1_001, 4, use_async, None);
            assert_eq!(m.allowed + m.denied, 1_001);
            assert_eq!(m.errors, 0);
            // The mix has 13 tools; bash, write_file and str_replace are denied.
            assert!(m.denied >= 3 * (1_001 / 13) && m.denied <= 3 * (1_001 / 13 + 1), "{m:?}");
            assert!(m.p50_ns <= m.p99_ns && m.p99_ns <= m.max_ns);
        }
    }

    #[test]
    fn the_printed_mix_is_the_measured_mix_as_run_input() {
        let lines = mix_lines();
        let parsed: Vec<ToolCallRequest> = lines
            .lines()
            .enumerate()
            .map(|(i, line)| guardhost_lines::jsonl::parse_line(i as u64 + 1, line.as_bytes()).unwrap())
            .collect();
        assert_eq!(parsed, everyday_tool_calls());
    }

    #[test]
    fn paced_callers_make_no_more_calls_than_asked_and_the_cpu_is_reported() {
        let config = LoadedConfig::embedded_default();
        guardhost_builtins::register();
        let guardrail = guardhost::install(&config).unwrap().unwrap();
        for use_async in [false, true] {
            // 40 calls a caller, one every 2 ms: at least 78 ms.
            let m = measure(&guardrail.middleware, 80, 2, use_async, Some(2_000));
            assert_eq!(m.allowed + m.denied, 80);
            assert!(m.calls_per_second <= 80.0 / 0.078, "{m:?}");
            assert_eq!(m.interval_us, Some(2_000));
            if cfg!(target_os = "linux") {
                assert!(m.cpu_percent.is_some_and(|cpu| cpu >= 0.0), "{m:?}");
            }
        }
    }

    #[test]
    fn the_chart_is_an_svg_with_a_bar_pair_per_row() {
        let m = Measurement {
            provider: "p".into(),
            path: "sync".into(),
            calls: 1,
            concurrency: 1,
            allowed: 1,
            denied: 0,
            errors: 0,
            p50_ns: 500,
            p99_ns: 900,
            max_ns: 1000,
            calls_per_second: 1.0,
            peak_rss_kib: None,
            cpu_percent: None,
            interval_us: None,
        };
        let svg = chart(&[("a <b>", m.clone()), ("c", m)]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect").count(), 1 + 2 + 4);
        assert!(svg.contains("a &lt;b&gt; — sync") && !svg.contains("<b>"));
    }
}
