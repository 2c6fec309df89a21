//! What flows through pipes: what each command gives the later stages of
//! its pipelines (downloads, decoded data, printed text, listed paths),
//! and what reaches a command from the earlier ones.

use super::wrappers::effective;
use crate::shell::{Command, Word};

/// What reaches a command's standard input through pipes, from the
/// earlier stages of the pipelines it sits in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fed {
    /// A download (a downloader, or a command holding one).
    pub downloads: bool,
    /// Decoded data (`base64 -d` ...).
    pub decodes: bool,
    /// The output of a program whose name is known only when it runs.
    pub unknown: bool,
    /// Output of anything but `echo` and `printf` of known words.
    pub unwritten: bool,
    /// Output of anything but `find` from known starting paths.
    pub not_found: bool,
}

impl std::ops::BitOrAssign for Fed {
    fn bitor_assign(&mut self, other: Fed) {
        self.downloads |= other.downloads;
        self.decodes |= other.decodes;
        self.unknown |= other.unknown;
        self.unwritten |= other.unwritten;
        self.not_found |= other.not_found;
    }
}

/// The pipelines' stages seen so far, noted in source order (a stage's
/// commands come before the next stage's), so that what feeds a command is
/// known in constant time per enclosing pipeline: linear in all.
#[derive(Debug, Default)]
pub(crate) struct Pipes {
    /// Per pipeline: the stage being noted, what its earlier stages give,
    /// what it gives so far, and the text the earlier stages print.
    pipelines: Vec<PipeState>,
}

#[derive(Debug, Default, Clone)]
struct PipeState {
    stage: u32,
    before: Fed,
    current: Fed,
    printed_before: String,
    printed_current: String,
    roots_before: Vec<String>,
    roots_current: Vec<String>,
}

impl Pipes {
    fn state(&mut self, pipeline: u32) -> &mut PipeState {
        let at = pipeline as usize;
        if self.pipelines.len() <= at {
            self.pipelines.resize(at + 1, PipeState::default());
        }
        &mut self.pipelines[at]
    }

    /// Moves pipeline `pipeline` on to `stage` if it is further.
    fn advance(&mut self, pipeline: u32, stage: u32) {
        let state = self.state(pipeline);
        if stage > state.stage {
            let current = std::mem::take(&mut state.current);
            state.before |= current;
            let printed = std::mem::take(&mut state.printed_current);
            state.printed_before.push_str(&printed);
            let roots = std::mem::take(&mut state.roots_current);
            state.roots_before.extend(roots);
            state.stage = stage;
        }
    }

    /// What reaches a command at `stages`, with the text printed into its
    /// innermost pipeline and the paths `find` lists into it.
    pub(crate) fn fed(&mut self, stages: &[(u32, u32)]) -> (Fed, Option<(&str, &[String])>) {
        let mut fed = Fed::default();
        for &(pipeline, stage) in stages {
            self.advance(pipeline, stage);
            fed |= self.state(pipeline).before;
        }
        let innermost = stages.last().map(|&(p, _)| {
            let state = &self.pipelines[p as usize];
            (state.printed_before.as_str(), state.roots_before.as_slice())
        });
        (fed, innermost)
    }

    /// Notes what a command at `stages` gives the later stages.
    pub(crate) fn note(
        &mut self,
        stages: &[(u32, u32)],
        gives: Fed,
        printed: Option<&str>,
        roots: &[String],
    ) {
        for &(pipeline, stage) in stages {
            self.advance(pipeline, stage);
            let state = self.state(pipeline);
            if stage < state.stage {
                // Code run by a command of an earlier stage, added later:
                // it feeds every stage after its own.
                state.before |= gives;
            } else {
                state.current |= gives;
                if let Some(text) = printed {
                    state.printed_current.push_str(text);
                }
                state.roots_current.extend(roots.iter().take(8).cloned());
            }
        }
    }
}

/// The text `echo` or `printf` prints, when all its words are known.
fn printed_by(words: &[Word]) -> Option<String> {
    let e = effective(words);
    if !matches!(e.name(), Some("echo" | "printf")) {
        return None;
    }
    let words: Option<Vec<&str>> = e.inner()[1..].iter().map(Word::lit).collect();
    let words: Vec<&str> =
        words?.into_iter().skip_while(|w| matches!(*w, "-n" | "-e" | "-E" | "-ne" | "-en")).collect();
    let mut text = words.join(" ");
    // `printf` and `echo -e` decode escapes and formats (`r\x6d` prints
    // `rm`): what they print is not the text written.
    if text.contains(['\\', '%']) {
        return None;
    }
    text.push('\n');
    Some(text)
}

/// The starting paths of a `find`, when all are known (`.` when it names
/// none).
fn found_by(words: &[Word]) -> Option<Vec<String>> {
    let e = effective(words);
    if e.name() != Some("find") {
        return None;
    }
    let starts: Option<Vec<String>> = e.inner()[1..]
        .iter()
        .take_while(|w| w.lit().is_none_or(|w| !w.starts_with('-') && w != "(" && w != "!"))
        .map(|w| w.lit().map(str::to_owned))
        .collect();
    starts.map(|s| if s.is_empty() { vec![".".to_owned()] } else { s })
}

/// What a command gives the later stages of its pipelines, from what it
/// and the commands it holds are: what it feeds, the text it prints, the
/// paths it lists.
pub(crate) fn gives(
    command: &Command,
    downloads: bool,
    decodes: bool,
    unknown: bool,
) -> (Fed, Option<String>, Vec<String>) {
    let odd = downloads || decodes || unknown;
    if command.words.is_empty() {
        let fed = Fed { downloads, decodes, unknown, unwritten: odd, not_found: odd };
        return (fed, None, Vec::new());
    }
    let printed = printed_by(&command.words);
    let roots = found_by(&command.words);
    let fed = Fed { downloads, decodes, unknown, unwritten: printed.is_none(), not_found: roots.is_none() };
    (fed, printed, roots.unwrap_or_default())
}
