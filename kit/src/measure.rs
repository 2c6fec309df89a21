//! The measured checks: thread safety, latency and memory, each over many
//! evaluations of the everyday requests.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::call::with_deadline;
use super::corpus::Probe;
use super::mix::{Kind, Masks, Mix, Selection};
use crate::finding::{Finding, Recorder};
use crate::options::Options;
use crate::outcome::Outcome;
use crate::report::CaseId;
use guardhost::GuardrailProvider;
use serde_json::{Map, Value};

/// Reads the resident memory of the process the provider's code runs in,
/// in bytes: this one for a library, the child for a provider program.
pub(crate) type Resident = Arc<dyn Fn() -> Option<u64> + Send + Sync>;

/// The resident memory of this process, read after the allocator has handed
/// its free pages back (see [`super::heap`]), so that the reading counts
/// memory in use rather than memory once used.
pub(crate) fn this_process() -> Resident {
    Arc::new(|| {
        super::heap::release_free_pages();
        resident_bytes()
    })
}

/// The resident memory of the process `pid()` names at the time of asking.
pub(crate) fn child_process(pid: impl Fn() -> Option<u32> + Send + Sync + 'static) -> Resident {
    Arc::new(move || Some(status_kib(&format!("/proc/{}/status", pid()?), "VmRSS")? * 1024))
}

/// What the measured checks share.
struct Workload {
    provider: Arc<dyn GuardrailProvider>,
    probes: Arc<Vec<Probe>>,
    options: Options,
    resident: Resident,
}

impl Workload {
    fn evaluate(&self, i: usize) {
        let _ = black_box(self.provider.evaluate(&self.probes[i % self.probes.len()].request));
    }

    /// How long a measured loop may run before the kit gives up on it.
    fn deadline(&self) -> Duration {
        self.options.case_time_limit + self.options.call_timeout
    }
}

/// The requests the measured checks send.
pub(crate) struct Measured {
    /// The everyday requests, each with its single-threaded answer where it
    /// was stable (the thread check leaves the others out); latency and
    /// memory send them all.
    pub(crate) everyday: Vec<(Probe, Option<Outcome>)>,
    /// Distinct random requests with their stable answers, for the thread
    /// check only.
    pub(crate) random: Vec<(Probe, Outcome)>,
    /// Each kind's mix of requests decided differently alone, for the
    /// thread check only.
    pub(crate) selection: Selection,
    /// Configured values the thread check's report lines must not show.
    pub(crate) masks: Masks,
    /// Where the thread check sends its calls instead, when not to the
    /// provider itself (see [`super::child::concurrent`]).
    pub(crate) concurrent: Option<Result<Arc<dyn GuardrailProvider>, String>>,
}

/// Runs `thread_safety`, `latency` and `memory`.
pub(crate) fn check(
    recorder: &mut Recorder,
    provider: &Arc<dyn GuardrailProvider>,
    measured: Measured,
    volatile: &Arc<Vec<String>>,
    options: &Options,
    resident: &Resident,
) {
    let random = measured.random.len();
    let Selection { mixes, alike } = measured.selection;
    let mut together: Vec<(Probe, Outcome)> = measured
        .everyday
        .iter()
        .filter_map(|(p, o)| Some((p.clone(), o.clone()?)))
        .chain(measured.random)
        .collect();
    for (probe, outcome) in mixes.iter().flat_map(|m| &m.requests) {
        if !together.iter().any(|(p, _)| p.name == probe.name) {
            together.push((probe.clone(), outcome.clone()));
        }
    }
    let probes: Vec<Probe> = measured.everyday.into_iter().map(|(p, _)| p).collect();
    recorder.check(CaseId::ThreadSafety, || {
        if together.is_empty() {
            return Finding::skip("no everyday request was answered alike every time (see determinism)");
        }
        let mut plan = Plan::new(&mixes, together, random, &alike, options);
        match &measured.concurrent {
            None => thread_safety(provider, plan, volatile.clone(), options, &measured.masks),
            Some(Ok(concurrent)) => {
                plan.description.push_str(
                    "; in a second provider process, over the pipes, which evaluates each call in flight \
                     on a thread of its own",
                );
                thread_safety(concurrent, plan, volatile.clone(), options, &measured.masks)
            }
            Some(Err(error)) => Finding::fail(error.clone()),
        }
    });
    if probes.is_empty() {
        for id in [CaseId::Latency, CaseId::Memory] {
            recorder.check(id, || {
                Finding::skip("no everyday request was answered in time (see evaluation.corpus)")
            });
        }
        return;
    }
    let work = Arc::new(Workload {
        provider: provider.clone(),
        probes: Arc::new(probes),
        options: options.clone(),
        resident: resident.clone(),
    });
    recorder.check(CaseId::Latency, || latency(&work));
    recorder.check(CaseId::Memory, || memory(&work));
}

fn stopped_early(done: usize, planned: usize, limit: Duration) -> String {
    if done < planned {
        format!(" (stopped after {} s: {done} of {planned} evaluations)", limit.as_secs_f64())
    } else {
        String::new()
    }
}

/// Requests the threads of one phase evaluate, with their answers alone.
struct Phase {
    probes: Vec<Probe>,
    baseline: Vec<Outcome>,
    /// Evaluations in the phase, over all threads.
    evaluations: usize,
    /// How far apart in `probes` the threads start: 1 for a kind's mix,
    /// whose neighbours are decided differently.
    spread: usize,
}

/// The thread check's phases: each kind's mix side by side, then every
/// distinct request together; and how the report describes them.
struct Plan {
    phases: Vec<Phase>,
    description: String,
    metrics: Map<String, Value>,
}

impl Plan {
    fn new(
        mixes: &[Mix],
        together: Vec<(Probe, Outcome)>,
        random: usize,
        alike: &[Kind],
        options: &Options,
    ) -> Plan {
        let total = options.iterations.max(1);
        // Half the evaluations for the mixes, shared out evenly; the other
        // half (all, when no kind has a mix) for everything together.
        let for_mixes = if mixes.is_empty() { 0 } else { total / 2 };
        let mut phases: Vec<Phase> = mixes
            .iter()
            .map(|mix| {
                let (probes, baseline) = mix.requests.iter().cloned().unzip();
                Phase { probes, baseline, evaluations: (for_mixes / mixes.len()).max(1), spread: 1 }
            })
            .collect();
        let distinct = together.len();
        let (probes, baseline) = together.into_iter().unzip();
        phases.push(Phase { probes, baseline, evaluations: (total - for_mixes).max(1), spread: 7 });

        let mixed: usize = mixes.iter().map(|m| m.requests.len()).sum();
        let from_config: usize = mixes.iter().map(|m| m.from_config).sum();
        let mut description = String::new();
        if !mixes.is_empty() {
            let kinds: Vec<String> = mixes
                .iter()
                .map(|m| {
                    format!("{} {}, from {} distinct answers", m.kind.label(), m.requests.len(), m.answers)
                })
                .collect();
            description.push_str(&format!(
                "requests decided differently alone, side by side, kind by kind ({}; {from_config} from the \
                 config), then ",
                kinds.join(", ")
            ));
        }
        description.push_str(&format!("{distinct} distinct requests together ({random} random)"));
        if !alike.is_empty() {
            let kinds: Vec<&str> = alike.iter().map(|k| k.label()).collect();
            description.push_str(&format!(
                "; every {} request was decided alike alone, so none could take another's answer",
                kinds.join(", ")
            ));
        }
        let mut metrics = Map::new();
        metrics.insert(
            "mixed_kinds".into(),
            Value::Array(mixes.iter().map(|m| Value::from(m.kind.label())).collect()),
        );
        metrics.insert("mixed_requests".into(), mixed.into());
        metrics.insert("from_config".into(), from_config.into());
        metrics.insert("distinct_requests".into(), distinct.into());
        Plan { phases, description, metrics }
    }
}

/// A disagreement: which request, and the request another thread was
/// evaluating meanwhile whose answer it got (when one was seen).
type FlipKey = (usize, usize, Option<usize>);

/// Each flip, counted, with the answer the request got.
type Flips = BTreeMap<FlipKey, (usize, Outcome)>;

/// Runs one phase on `threads` threads until its evaluations are done or
/// `stop_at`; returns the evaluations done and each flip, counted.
fn run_phase(
    provider: &Arc<dyn GuardrailProvider>,
    phase_index: usize,
    phase: &Phase,
    volatile: &[String],
    threads: usize,
    stop_at: Instant,
) -> Result<(usize, Flips), String> {
    let per_thread = (phase.evaluations / threads).max(1);
    let n = phase.probes.len();
    // Threads spin on `start` (rather than a barrier) so that a thread that
    // cannot be spawned leaves none of the others waiting for ever.
    let start = AtomicBool::new(false);
    // What each thread is evaluating (its index + 1), or 0.
    let in_flight: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut spawn_error = None;
        for t in 0..threads {
            let (start, in_flight) = (&start, &in_flight);
            let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                while !start.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                let others = |seen: &mut Vec<usize>| {
                    for (u, slot) in in_flight.iter().enumerate() {
                        match slot.load(Ordering::SeqCst) {
                            0 => {}
                            j if u != t => seen.push(j - 1),
                            _ => {}
                        }
                    }
                };
                let (mut done, mut flips) = (0, BTreeMap::new());
                let mut seen = Vec::with_capacity(2 * threads);
                for i in 0..per_thread {
                    if Instant::now() > stop_at {
                        break;
                    }
                    let k = (i + t * phase.spread) % n;
                    seen.clear();
                    in_flight[t].store(k + 1, Ordering::SeqCst);
                    others(&mut seen);
                    let result = provider.evaluate(&phase.probes[k].request);
                    others(&mut seen);
                    in_flight[t].store(0, Ordering::SeqCst);
                    let outcome = Outcome::from_result(result, volatile);
                    if !outcome.agrees_with(&phase.baseline[k]) {
                        // The request evaluated meanwhile whose answer this is.
                        let partner = seen
                            .iter()
                            .copied()
                            .filter(|&j| j != k)
                            .find(|&j| phase.baseline[j].agrees_with(&outcome))
                            .or_else(|| seen.iter().copied().find(|&j| j != k));
                        flips.entry((phase_index, k, partner)).or_insert((0, outcome)).0 += 1;
                    }
                    done += 1;
                }
                (done, flips)
            });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    spawn_error = Some(error.to_string());
                    break;
                }
            }
        }
        start.store(true, Ordering::Release);
        let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        if let Some(error) = spawn_error {
            return Err(format!("cannot start {threads} threads: {error}"));
        }
        let (mut done, mut flips) = (0, BTreeMap::new());
        for result in joined {
            let (d, f) = result.map_err(|_| "a thread of the check itself panicked".to_owned())?;
            done += d;
            for (key, (count, outcome)) in f {
                flips.entry(key).or_insert((0, outcome)).0 += count;
            }
        }
        Ok((done, flips))
    })
}

fn thread_safety(
    provider: &Arc<dyn GuardrailProvider>,
    plan: Plan,
    volatile: Arc<Vec<String>>,
    options: &Options,
    masks: &Masks,
) -> Finding {
    let threads = options.threads.max(2);
    let limit = options.case_time_limit;
    let Plan { phases, description, metrics } = plan;
    let planned: usize = phases.iter().map(|p| (p.evaluations / threads).max(1) * threads).sum();
    let phases = Arc::new(phases);
    let (shared, provider) = (phases.clone(), provider.clone());
    let result = with_deadline(limit + options.call_timeout, move || {
        let mut done = 0;
        let mut flips = BTreeMap::new();
        for (index, phase) in shared.iter().enumerate() {
            // Each phase gets its share of the time limit.
            let share = limit.mul_f64(phase.evaluations as f64 / planned.max(1) as f64);
            let (d, f) = run_phase(&provider, index, phase, &volatile, threads, Instant::now() + share)?;
            done += d;
            flips.extend(f);
        }
        Ok::<_, String>((done, flips))
    });
    let (done, flips) = match result {
        Ok(Ok(found)) => found,
        Ok(Err(error)) => return Finding::fail(error),
        Err(no_answer) => {
            return Finding::fail(format!(
                "concurrent evaluations did not finish ({no_answer}): a deadlock between threads?"
            ))
        }
    };
    let wrong: usize = flips.values().map(|(count, _)| count).sum();
    let early = stopped_early(done, planned, limit);
    let mut finding = if wrong == 0 {
        Finding::pass(format!(
            "{done} evaluations on {threads} threads agreed with the single-threaded answers: {description}{early}"
        ))
    } else {
        let mut lines: Vec<(usize, String)> = flips
            .iter()
            .map(|(&(p, k, partner), (count, got))| {
                let phase = &phases[p];
                let line = match partner {
                    Some(j) => format!(
                        "{} got {}, the answer of {} evaluated at the same time; alone {} ({count}×)",
                        phase.probes[k].name,
                        got.summary(),
                        phase.probes[j].name,
                        phase.baseline[k].summary()
                    ),
                    None => format!(
                        "{} got {}; alone {} ({count}×)",
                        phase.probes[k].name,
                        got.summary(),
                        phase.baseline[k].summary()
                    ),
                };
                (*count, masks.apply(&line))
            })
            .collect();
        lines.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        Finding::fail(format!(
            "{wrong} of {done} evaluations on {threads} threads disagreed with the single-threaded answers{early}; \
             {} requests got an answer other than their own, most often another request's evaluated at the \
             same time (listed): state shared between calls is not thread-safe: keep a request's data in \
             the call, hold one lock across the whole decision, or keep no mutable state ({description})",
            flips.keys().map(|&(p, k, _)| (p, k)).collect::<std::collections::BTreeSet<_>>().len()
        ))
        .details(lines.into_iter().map(|(_, line)| line).collect())
    };
    for (name, value) in metrics {
        finding = finding.metric(&name, value);
    }
    finding
        .metric("threads", threads)
        .metric("evaluations", done)
        .metric("disagreements", wrong)
        .metric("flipped_pairs", flips.len())
}

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e8).round() / 100.0
}

/// The nearest-rank percentile of sorted, non-empty samples: the smallest
/// sample that at least `q`% of them do not exceed.
fn percentile(sorted: &[Duration], q: usize) -> Duration {
    sorted[(sorted.len() * q).div_ceil(100).max(1) - 1]
}

fn latency(work: &Arc<Workload>) -> Finding {
    let planned = work.options.iterations.max(1);
    let limit = work.options.case_time_limit;
    let shared = work.clone();
    let samples = with_deadline(work.deadline(), move || {
        let work = shared;
        let started = Instant::now();
        for i in 0..work.probes.len().min(planned) {
            work.evaluate(i);
        }
        let mut samples = Vec::with_capacity(planned.min(1 << 20));
        for i in 0..planned {
            if started.elapsed() > limit {
                break;
            }
            let t = Instant::now();
            work.evaluate(i);
            samples.push(t.elapsed());
        }
        samples
    });
    let mut samples = match samples {
        Ok(samples) if !samples.is_empty() => samples,
        Ok(_) => {
            return Finding::fail(format!("not one evaluation finished within {} s", limit.as_secs_f64()))
        }
        Err(no_answer) => return Finding::fail(format!("the evaluations did not finish ({no_answer})")),
    };
    samples.sort_unstable();
    let at = |q: usize| percentile(&samples, q);
    let (p50, p99, max) = (at(50), at(99), samples[samples.len() - 1]);
    let budget = work.options.latency_budget;
    let never_blocks = work.provider.never_blocks();
    let numbers = format!(
        "p50 {} µs, p99 {} µs, max {} µs over {} evaluations{}",
        micros(p50),
        micros(p99),
        micros(max),
        samples.len(),
        stopped_early(samples.len(), planned, limit)
    );
    let finding = if never_blocks && p99 > NEVER_BLOCKS_BUDGET && p99 <= budget {
        Finding::fail(format!(
            "{numbers}: declares that it never blocks (`NEVER_BLOCKS`), but its p99 exceeds {} µs; a \
             host may call it where it would not call code that waits (the Python package keeps the \
             interpreter's lock), so drop the declaration or the waiting",
            micros(NEVER_BLOCKS_BUDGET)
        ))
    } else if p99 > budget {
        Finding::fail(format!(
            "{numbers}: p99 exceeds the budget of {} µs; every tool call waits for this, so move slow \
             work (I/O, parsing policy files) out of evaluate into the constructor or a cache",
            micros(budget)
        ))
    } else {
        Finding::pass(format!("{numbers} (budget: p99 ≤ {} µs)", micros(budget)))
    };
    finding
        .metric("p50_us", micros(p50))
        .metric("p99_us", micros(p99))
        .metric("max_us", micros(max))
        .metric("budget_us", micros(budget))
        .metric("evaluations", samples.len())
}

/// The p99 above which a provider that declares it never blocks is taken
/// to wait after all (a decision from memory takes microseconds; the
/// margin is for a busy machine).
const NEVER_BLOCKS_BUDGET: Duration = Duration::from_millis(1);

/// Fewer evaluations than this in a half of the memory check say nothing.
const MIN_EVALUATIONS_PER_HALF: usize = 100;

/// This process's resident memory, where the OS tells (Linux).
fn resident_bytes() -> Option<u64> {
    Some(memory_kib("VmRSS")? * 1024)
}

/// A memory figure of this process from `/proc/self/status`, in KiB
/// (`VmRSS`: resident now; `VmHWM`: the resident high-water mark); `None`
/// where the OS does not tell (anything but Linux).
pub fn memory_kib(field: &str) -> Option<u64> {
    status_kib("/proc/self/status", field)
}

/// A memory figure from a `/proc/<pid>/status` file, in KiB.
fn status_kib(path: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Bytes for people: KiB below a MiB, MiB with two decimals above.
fn size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{:.2} MiB", bytes as f64 / f64::from(1 << 20))
    }
}

fn memory(work: &Arc<Workload>) -> Finding {
    if (work.resident)().is_none() {
        return Finding::skip("resident memory cannot be read on this platform (needs /proc/<pid>/status)");
    }
    let half = (work.options.iterations / 2).max(1);
    let limit = work.options.case_time_limit;
    let shared = work.clone();
    // Resident memory is the whole process's, so other threads can move it:
    // the growth must show in two runs of `half` evaluations in a row to
    // count as a leak. Memory the process freed earlier absorbs a leak
    // unseen until it is used up, so when only the second run grew, a third
    // decides. The warm-up and each run get a quarter of the time limit.
    let budget = work.options.memory_budget;
    let measured = with_deadline(work.deadline(), move || {
        let work = shared;
        let quarter = limit / 4;
        let mut done = 0;
        let run = |count: usize, done: &mut usize| {
            let started = Instant::now();
            for _ in 0..count {
                if started.elapsed() > quarter {
                    break;
                }
                work.evaluate(*done);
                *done += 1;
            }
        };
        run((half / 5).max(100), &mut done);
        let warm_up = done;
        let mut marks = vec![(work.resident)()];
        let mut halves = Vec::new();
        let grew = |i: usize, marks: &[Option<u64>]| match (marks[i], marks[i + 1]) {
            (Some(a), Some(b)) => b.saturating_sub(a) > budget / 2,
            _ => false,
        };
        for part in 0..3 {
            // A third run only when the second grew and the first did not.
            let only_second_grew = part == 2 && grew(1, &marks) && !grew(0, &marks);
            if part == 2 && !only_second_grew {
                break;
            }
            let before = done;
            run(half, &mut done);
            halves.push(done - before);
            marks.push((work.resident)());
        }
        (marks, done - warm_up, halves)
    });
    let (marks, done, halves) = match measured {
        Ok((marks, done, halves)) => {
            (marks.into_iter().collect::<Option<Vec<u64>>>().unwrap_or_default(), done, halves)
        }
        Err(no_answer) => return Finding::fail(format!("the evaluations did not finish ({no_answer})")),
    };
    if halves.iter().any(|&n| n < MIN_EVALUATIONS_PER_HALF) {
        return Finding::skip(format!(
            "too slow to measure: {} evaluations in runs of {half}, fewer than {MIN_EVALUATIONS_PER_HALF} in one",
            halves.iter().map(usize::to_string).collect::<Vec<_>>().join(" + ")
        ));
    }
    if marks.len() < 3 || halves.len() + 1 != marks.len() {
        return Finding::skip("resident memory could not be read during the run");
    }
    let (start, end) = (marks[0], marks[marks.len() - 1]);
    let parts: Vec<u64> = marks.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    let (first, second) = (parts[parts.len() - 2], parts[parts.len() - 1]);
    let growth = end.saturating_sub(start);
    let per_call = growth / done.max(1) as u64;
    let numbers = format!(
        "resident memory grew by {} over {done} evaluations ({} in {} runs){}",
        size(growth),
        parts.iter().map(|&p| size(p)).collect::<Vec<_>>().join(" + "),
        parts.len(),
        stopped_early(done, half * parts.len(), limit)
    );
    let finding = if first > budget / 2 && second > budget / 2 {
        Finding::fail(format!(
            "{numbers}, about {per_call} bytes per evaluation, over the budget of {}: something is \
             kept per call (a leak, or a cache without a bound)",
            size(budget)
        ))
    } else {
        Finding::pass(format!("{numbers} (budget {})", size(budget)))
    };
    finding
        .metric("growth_bytes", growth)
        .metric("evaluations", done)
        .metric("budget_bytes", budget)
        .metric("start_bytes", start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=200).map(Duration::from_micros).collect();
        assert_eq!(percentile(&samples, 50), Duration::from_micros(100));
        assert_eq!(percentile(&samples, 99), Duration::from_micros(198));
        assert_eq!(percentile(&samples, 100), Duration::from_micros(200));
        // With few samples, p99 is the largest, p50 the middle one.
        let few = [Duration::from_micros(1), Duration::from_micros(2), Duration::from_micros(3)];
        assert_eq!(percentile(&few, 99), Duration::from_micros(3));
        assert_eq!(percentile(&few, 50), Duration::from_micros(2));
        assert_eq!(percentile(&few[..1], 50), Duration::from_micros(1));
    }
}
