//! Reading the policies, the schema and the entities, and checking them:
//! every problem is reported with its file, line and column, at
//! construction, never on the first call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cedar_policy::{Entities, PolicyId, PolicySet, ResourceConstraint, Schema, ValidationMode, Validator};
use miette::Diagnostic;

use crate::guard::Guarded;
use crate::need::Need;

/// The policies a call of one tool can match, with what the call needs
/// of them: what they read of the context, and which of them its context
/// can satisfy (`crate::guard`).
#[derive(Debug)]
pub(crate) struct Slice {
    /// The policies, with their guards.
    pub guarded: Guarded,
    /// What they read of the context.
    pub need: Need,
    /// The arguments their guards test (`context.args has x`).
    pub args_tested: Vec<String>,
    /// The attributes whose strings their guards match (`context.path.lower
    /// like "*.pem"`).
    pub likes: Vec<Vec<String>>,
}

impl Slice {
    fn new(policies: PolicySet) -> Slice {
        let need = Need::of(&policies);
        let guarded = Guarded::new(policies);
        let args_tested = guarded
            .tests()
            .into_iter()
            .filter_map(|path| match <[String; 2]>::try_from(path) {
                Ok([first, key]) if first == "args" => Some(key),
                _ => None,
            })
            .collect();
        let likes = guarded.likes();
        Slice { guarded, need, args_tested, likes }
    }
}

/// Everything a decision needs, checked.
#[derive(Debug)]
pub struct Compiled {
    /// The policies, each under its id (`@id("...")`, else `FILE#N`).
    pub policies: PolicySet,
    /// The schema the policies were validated against, if one was given.
    pub schema: Option<Schema>,
    /// The entities (tool families, users and their groups ...).
    pub entities: Entities,
    /// Where each policy was read from, by id.
    pub origins: HashMap<PolicyId, PathBuf>,
    /// The policies a call of a tool can match, by tool: those whose scope
    /// names the tool (`resource == Tool::"bash"`) and every policy whose
    /// scope names none. A call of a tool no scope names is decided by
    /// `unscoped` alone.
    pub(crate) by_tool: HashMap<String, Slice>,
    /// The policies whose scope names no single tool.
    pub(crate) unscoped: Slice,
    /// Each policy's id as text and its `@reason("...")`, if any, read
    /// once (Cedar parses an annotation's name on every lookup).
    pub named: HashMap<PolicyId, (String, Option<String>)>,
}

impl Compiled {
    /// The policies a call of `tool` can match (Cedar evaluates each policy
    /// of the set it is given: a policy for another tool never matches).
    pub(crate) fn for_tool(&self, tool: &str) -> &Slice {
        self.by_tool.get(tool).unwrap_or(&self.unscoped)
    }
}

/// `policies` sliced by the tools their scope can match
/// ([`Compiled::by_tool`]): `resource == Tool::"x"` matches `x` only;
/// `resource in G` (with or without `is Tool`) matches the tools the
/// entities put in `G` (and `G` itself, when it is a tool); any other scope
/// matches every tool.
type Sliced = (HashMap<String, Slice>, Slice);

fn slice(policies: &PolicySet, entities: &Entities) -> Result<Sliced, String> {
    let is_tool = |uid: &cedar_policy::EntityUid| uid.type_name().to_string() == "Tool";
    let tool_name = |uid: &cedar_policy::EntityUid| uid.id().unescaped().to_owned();
    let members = |group: &cedar_policy::EntityUid| -> Vec<String> {
        let mut tools: Vec<String> = entities
            .iter()
            .map(|entity| entity.uid())
            .filter(|uid| {
                is_tool(uid) && entities.ancestors(uid).is_some_and(|mut up| up.any(|a| a == group))
            })
            .map(|uid| tool_name(&uid))
            .collect();
        if is_tool(group) {
            tools.push(tool_name(group));
        }
        tools
    };
    let mut unscoped = PolicySet::new();
    let mut scoped: HashMap<String, Vec<cedar_policy::Policy>> = HashMap::new();
    for policy in policies.policies() {
        let tools = match policy.resource_constraint() {
            ResourceConstraint::Eq(uid) if is_tool(&uid) => vec![tool_name(&uid)],
            ResourceConstraint::In(group) => members(&group),
            ResourceConstraint::IsIn(kind, group) if kind.to_string() == "Tool" => members(&group),
            _ => {
                unscoped.add(policy.clone()).map_err(|e| e.to_string())?;
                continue;
            }
        };
        for tool in tools {
            scoped.entry(tool).or_default().push(policy.clone());
        }
    }
    let mut by_tool = HashMap::new();
    for (tool, own) in scoped {
        let mut set = unscoped.clone();
        for policy in own {
            if set.policy(policy.id()).is_none() {
                set.add(policy).map_err(|e| e.to_string())?;
            }
        }
        by_tool.insert(tool, Slice::new(set));
    }
    Ok((by_tool, Slice::new(unscoped)))
}

/// The `.cedar` files `paths` name: files as given, folders' `.cedar`
/// files (at any depth), in name order.
pub fn policy_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let before = files.len();
            collect(path, &mut files)
                .map_err(|e| format!("cannot read the folder {}: {e}", path.display()))?;
            if files.len() == before {
                return Err(format!("the folder {} holds no `.cedar` file", path.display()));
            }
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(format!("`policies` names {}, which is neither a file nor a folder", path.display()));
        }
    }
    Ok(files)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect(&entry, files)?;
        } else if entry.extension().is_some_and(|e| e == "cedar") {
            files.push(entry);
        }
    }
    Ok(())
}

/// `path:line:column` of byte `offset` in `text` (both from 1).
fn at(path: &Path, text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{}:{line}:{column}", path.display())
}

/// Each problem a diagnostic reports, located in `text` (read from `path`).
fn located(path: &Path, text: &str, diagnostic: &dyn Diagnostic, message: &str) -> Vec<String> {
    let labels: Vec<_> = diagnostic.labels().into_iter().flatten().collect();
    if labels.is_empty() {
        return vec![format!("{}: {message}", path.display())];
    }
    labels
        .into_iter()
        .map(|label| match label.label() {
            Some(detail) => format!("{}: {message} ({detail})", at(path, text, label.offset())),
            None => format!("{}: {message}", at(path, text, label.offset())),
        })
        .collect()
}

/// Why the entities file `text` (read from `path`) cannot be used, with
/// the file, line and column of the entity Cedar refuses (or of the JSON
/// error) and every cause Cedar gives, not only its first line.
fn entities_problem(
    path: &Path,
    text: &str,
    schema: Option<&Schema>,
    error: &dyn std::error::Error,
) -> String {
    let mut message = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !message.contains(&said) {
            message = format!("{message}: {said}");
        }
        next = cause.source();
    }
    if let Err(json) = serde_json::from_str::<serde_json::Value>(text) {
        return format!("{}:{}:{}: not JSON: {json}", path.display(), json.line(), json.column());
    }
    // The first entity Cedar refuses on its own: where it starts.
    let refused = entity_offsets(text).into_iter().find(|&(start, end)| {
        serde_json::from_str::<serde_json::Value>(&text[start..end]).is_ok_and(|entity| {
            Entities::from_json_value(serde_json::Value::Array(vec![entity]), schema).is_err()
        })
    });
    match refused {
        Some((start, _)) => format!("{}: {message}", at(path, text, start)),
        None => format!("{}: {message}", path.display()),
    }
}

/// Where each element of the top-level JSON array in `text` starts and
/// ends (byte offsets); empty when the top level is not an array.
fn entity_offsets(text: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut start) = (0usize, false, false, None);
    for (offset, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                if depth == 1 && start.is_none() {
                    start = Some(offset);
                }
            }
            '[' | '{' => {
                if depth == 1 && start.is_none() {
                    start = Some(offset);
                }
                depth += 1;
            }
            ']' | '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some(begun) = start.take() {
                        found.push((begun, offset));
                    }
                }
            }
            ',' if depth == 1 => {
                if let Some(begun) = start.take() {
                    found.push((begun, offset));
                }
            }
            c if depth == 1 && start.is_none() && !c.is_whitespace() => start = Some(offset),
            _ => {}
        }
    }
    found
}

fn read(path: &Path, what: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))
}

/// Reads and checks everything; the error lists every problem, one a line.
pub fn compile(
    paths: &[PathBuf],
    schema: Option<&Path>,
    entities: Option<&Path>,
) -> Result<Compiled, String> {
    let mut problems = Vec::new();
    let mut policies = PolicySet::new();
    let mut origins: HashMap<PolicyId, PathBuf> = HashMap::new();
    let mut texts: HashMap<PathBuf, String> = HashMap::new();
    for file in policy_files(paths)? {
        let text = read(&file, "policy file")?;
        let parsed = match PolicySet::from_str(&text) {
            Ok(parsed) => parsed,
            Err(errors) => {
                for error in errors.iter() {
                    problems.extend(located(&file, &text, error, &error.to_string()));
                }
                continue;
            }
        };
        if parsed.templates().next().is_some() {
            problems.push(format!(
                "{}: holds a template (`?principal` / `?resource`); this provider takes static policies only",
                file.display()
            ));
            continue;
        }
        let name = file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for (index, policy) in parsed.policies().enumerate() {
            let id = policy.annotation("id").map_or_else(|| format!("{name}#{}", index + 1), str::to_owned);
            let id = PolicyId::new(id);
            if let Some(first) = origins.get(&id) {
                problems.push(format!(
                    "{}: policy id `{id}` is also used in {}: give each policy its own `@id`",
                    file.display(),
                    first.display()
                ));
                continue;
            }
            if let Err(error) = policies.add(policy.new_id(id.clone())) {
                problems.push(format!("{}: {error}", file.display()));
                continue;
            }
            origins.insert(id, file.clone());
        }
        texts.insert(file.clone(), text);
    }
    let schema = match schema {
        None => None,
        Some(path) => {
            let text = read(path, "schema")?;
            let parsed = if path.extension().is_some_and(|e| e == "json") {
                Schema::from_json_str(&text).map_err(|e| located(path, &text, &e, &e.to_string()))
            } else {
                Schema::from_cedarschema_str(&text)
                    .map(|(schema, _warnings)| schema)
                    .map_err(|e| located(path, &text, &e, &e.to_string()))
            };
            match parsed {
                Ok(schema) => Some(schema),
                Err(found) => {
                    problems.extend(found);
                    None
                }
            }
        }
    };
    if let (Some(schema), true) = (&schema, problems.is_empty()) {
        let result = Validator::new(schema.clone()).validate(&policies, ValidationMode::Strict);
        for error in result.validation_errors() {
            let file = &origins[error.policy_id()];
            problems.extend(located(file, &texts[file], error, &error.to_string()));
        }
    }
    let entities = match entities {
        None => Entities::empty(),
        Some(path) => {
            let text = read(path, "entities file")?;
            Entities::from_json_str(&text, schema.as_ref()).unwrap_or_else(|e| {
                problems.push(entities_problem(path, &text, schema.as_ref(), &e));
                Entities::empty()
            })
        }
    };
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    let (by_tool, unscoped) = slice(&policies, &entities)?;
    let named = policies
        .policies()
        .map(|p| (p.id().clone(), (p.id().to_string(), p.annotation("reason").map(str::to_owned))))
        .collect();
    Ok(Compiled { policies, schema, entities, origins, by_tool, unscoped, named })
}
