//! The `guardrails.decision_log` section: where the decision log is written
//! and what it holds (the log itself is [`crate::decision_log`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::decision_log::mask::MaskPattern;

/// `guardrails.decision_log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionLogConfig {
    /// The file (relative to the config file's directory).
    pub path: PathBuf,
    /// Log the call's argument values (default false: only the tool's name
    /// and the decision).
    #[serde(default)]
    pub args: bool,
    /// With `args`: patterns of the argument values written as `"***"`
    /// (the syntax is in [`mask`](crate::decision_log::mask)); checked when the config is read.
    #[serde(default, deserialize_with = "mask_patterns")]
    pub mask: Vec<String>,
    /// What a call does when the queue is full: `drop` its entry (counted),
    /// or `wait` for room.
    #[serde(default)]
    pub when_full: WhenFull,
    /// Entries the queue holds.
    #[serde(default = "default_buffer")]
    pub buffer: usize,
    /// The file's size at which it is rotated (`path` → `path.1` → ...).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// Rotated files kept.
    #[serde(default = "default_keep")]
    pub keep: u32,
}

/// `mask`, each pattern checked (an error names the pattern by its place,
/// never by its text).
fn mask_patterns<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let patterns = Vec::<String>::deserialize(deserializer)?;
    for (n, pattern) in patterns.iter().enumerate() {
        MaskPattern::parse(pattern).map_err(|error| {
            serde::de::Error::custom(format!("pattern {} (counting from 1): {error}", n + 1))
        })?;
    }
    Ok(patterns)
}

fn default_buffer() -> usize {
    10_000
}

fn default_max_bytes() -> u64 {
    100 << 20
}

fn default_keep() -> u32 {
    5
}

/// What a call does when the decision log's queue is full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Drop the entry (counted); the call goes on at once.
    #[default]
    Drop,
    /// Wait until there is room: nothing is lost, calls slow down.
    Wait,
}
