//! The measured checks: thread safety, latency and memory, each over many
//! evaluations of the everyday requests.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::call::with_deadline;
use super::corpus::Probe;
use super::evaluation::Outcome;
use super::{CaseId, Finding, Options, Recorder};
use crate::provider::GuardrailProvider;

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
    let (stable, stable_baseline): (Vec<Probe>, Vec<Outcome>) = measured
        .everyday
        .iter()
        .filter_map(|(p, o)| Some((p.clone(), o.clone()?)))
        .chain(measured.random)
        .unzip();
    let probes: Vec<Probe> = measured.everyday.into_iter().map(|(p, _)| p).collect();
    let workload = |probes: Vec<Probe>| {
        Arc::new(Workload {
            provider: provider.clone(),
            probes: Arc::new(probes),
            options: options.clone(),
            resident: resident.clone(),
        })
    };
    recorder.check(CaseId::ThreadSafety, || {
        if stable.is_empty() {
            return Finding::skip("no everyday request was answered alike every time (see determinism)");
        }
        thread_safety(&workload(stable), Arc::new(stable_baseline), volatile.clone(), random)
    });
    if probes.is_empty() {
        for id in [CaseId::Latency, CaseId::Memory] {
            recorder.check(id, || {
                Finding::skip("no everyday request was answered in time (see evaluation.corpus)")
            });
        }
        return;
    }
    let work = workload(probes);
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

fn thread_safety(
    work: &Arc<Workload>,
    baseline: Arc<Vec<Outcome>>,
    volatile: Arc<Vec<String>>,
    random: usize,
) -> Finding {
    let requests = format!("{} distinct requests ({random} random)", work.probes.len());
    let threads = work.options.threads.max(2);
    let per_thread = (work.options.iterations / threads).max(1);
    let limit = work.options.case_time_limit;
    let shared = work.clone();
    let result = with_deadline(work.deadline(), move || {
        let work = shared;
        // Threads spin on `start` (rather than a barrier) so that a thread
        // that cannot be spawned leaves none of the others waiting for ever.
        let start = AtomicBool::new(false);
        let stop_at = Instant::now() + limit;
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            let mut spawn_error = None;
            for t in 0..threads {
                let (work, start, baseline, volatile) = (&work, &start, &baseline, &volatile);
                let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                    while !start.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    let (mut done, mut wrong, mut examples) = (0, 0, Vec::new());
                    for i in 0..per_thread {
                        if Instant::now() > stop_at {
                            break;
                        }
                        // Each thread walks the requests from another start.
                        let k = (i + t * 7) % work.probes.len();
                        let result = work.provider.evaluate(&work.probes[k].request);
                        let outcome = Outcome::from_result(result, volatile);
                        if !outcome.agrees_with(&baseline[k]) {
                            wrong += 1;
                            if examples.len() < 2 {
                                examples.push(format!(
                                    "{} on thread {t}: {}; alone {}",
                                    work.probes[k].name,
                                    outcome.summary(),
                                    baseline[k].summary()
                                ));
                            }
                        }
                        done += 1;
                    }
                    (done, wrong, examples)
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
            let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
            (results, spawn_error)
        })
    });
    let per_thread_results = match result {
        Ok((_, Some(error))) => return Finding::fail(format!("cannot start {threads} threads: {error}")),
        Ok((results, None)) => results,
        Err(no_answer) => {
            return Finding::fail(format!(
                "concurrent evaluations did not finish ({no_answer}): a deadlock between threads?"
            ))
        }
    };
    let (mut done, mut wrong, mut examples) = (0, 0, Vec::new());
    for joined in per_thread_results {
        match joined {
            Ok((d, w, e)) => {
                done += d;
                wrong += w;
                examples.extend(e);
            }
            Err(_) => return Finding::fail("a thread of the check itself panicked"),
        }
    }
    let early = stopped_early(done, per_thread * threads, limit);
    let finding = if wrong == 0 {
        Finding::pass(format!(
            "{done} evaluations of {requests} on {threads} threads agreed with the single-threaded answers{early}"
        ))
    } else {
        Finding::fail(format!(
            "{wrong} of {done} evaluations of {requests} on {threads} threads disagreed with the single-threaded answers{early}; \
             state shared between calls is not thread-safe: hold one lock across the whole decision, \
             or keep no mutable state"
        ))
        .details(examples)
    };
    finding.metric("threads", threads).metric("evaluations", done).metric("disagreements", wrong)
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
    let numbers = format!(
        "p50 {} µs, p99 {} µs, max {} µs over {} evaluations{}",
        micros(p50),
        micros(p99),
        micros(max),
        samples.len(),
        stopped_early(samples.len(), planned, limit)
    );
    let finding = if p99 > budget {
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
