//! The tool call the sim makes: to a tool the request offers, with arguments its JSON schema
//! accepts.
//!
//! Real servers call only what the request offers (`tools`), never with `tool_choice: none` or
//! without tools, and their calls parse against the tool's `parameters`: an agent refuses a call
//! to a tool it does not have ("No such tool available") or with missing or mistyped
//! arguments. So the sim picks from the offered tools — the one `tool_choice` names; else a shell
//! tool when one is offered (a `command` or `cmd` property, as Claude Code's `Bash` and Codex's
//! `shell` / `exec_command` have), so an agent really runs a command; else one drawn — and
//! writes arguments from its schema: every required property, of its type (`enum` and `const`
//! honoured, nested objects and arrays with their own required parts), the shell command where
//! there is one. The arguments are padded to the drawn length (the command grows by filler words;
//! without a string to grow, whitespace before the closing brace, still the same JSON).

use serde_json::{Map, Value};

/// A tool the request offers, in chat form (`{"type":"function","function":{name, parameters}}`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offered<'a> {
    pub name: &'a str,
    pub parameters: Option<&'a Value>,
}

/// The function tools of a chat request's `tools`.
pub(crate) fn offered(tools: &[Value]) -> Vec<Offered<'_>> {
    tools
        .iter()
        .filter_map(|t| {
            let f = t.get("function")?;
            Some(Offered {
                name: f.get("name")?.as_str()?,
                parameters: f.get("parameters"),
            })
        })
        .collect()
}

/// The shell property of a tool's schema (`command` or `cmd`, a string or an argv array): its
/// name, and whether it is an array.
fn shell_property(schema: Option<&Value>) -> Option<(&str, bool)> {
    let s = schema?;
    let props = s.get("properties")?.as_object()?;
    ["command", "cmd"].into_iter().find_map(|k| {
        let p = props.get(k)?;
        match p.get("type").and_then(Value::as_str) {
            Some("string") => Some((k, false)),
            Some("array") => Some((k, true)),
            _ => None,
        }
    })
}

fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Which offered tool to call: the named one, else the first shell tool, else the one at
/// `draw` (a uniform draw in [0, 1)). `None` when nothing is offered (or the named tool is not).
pub(crate) fn choose<'a>(
    offered: &[Offered<'a>],
    named: Option<&str>,
    draw: f64,
) -> Option<Offered<'a>> {
    if let Some(n) = named {
        return offered.iter().find(|t| t.name == n).copied();
    }
    if let Some(t) = offered
        .iter()
        .find(|t| shell_property(t.parameters).is_some())
    {
        return Some(*t);
    }
    if offered.is_empty() {
        return None;
    }
    let i = ((draw * offered.len() as f64) as usize).min(offered.len() - 1);
    Some(offered[i])
}

/// The marker the command's text is written at before padding: plain ASCII that JSON writes as
/// it is (so it is found in the text), and that no schema value holds.
const CMD: &str = "@@tokentap-sim-command@@";

/// A value of `schema` with only what it requires; the shell property holds [`CMD`].
fn value_of(schema: &Value, shell: Option<(&str, bool)>, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|v| v.first())
        {
            return value_of(first, None, depth + 1);
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        // A list of types: the first that is not null.
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut m = Map::new();
            let props = schema.get("properties").and_then(Value::as_object);
            let mut keys = required(schema);
            // The shell command, required or not: the call is to run it.
            if let Some((name, _)) = shell.filter(|(n, _)| !keys.contains(n)) {
                keys.insert(0, name);
            }
            for k in keys {
                let v = match shell {
                    Some((name, false)) if name == k => Value::String(CMD.into()),
                    Some((name, true)) if name == k => {
                        Value::Array(vec!["bash".into(), "-lc".into(), CMD.into()])
                    }
                    _ => props
                        .and_then(|p| p.get(k))
                        .map_or(Value::String("x".into()), |p| value_of(p, None, depth + 1)),
                };
                m.insert(k.to_string(), v);
            }
            Value::Object(m)
        }
        "array" => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").cloned().unwrap_or(Value::Null);
            Value::Array(
                (0..n.min(4))
                    .map(|_| value_of(&item, None, depth + 1))
                    .collect(),
            )
        }
        "integer" | "number" => schema
            .get("minimum")
            .cloned()
            .filter(Value::is_number)
            .unwrap_or_else(|| 1.into()),
        "boolean" => false.into(),
        "null" => Value::Null,
        _ => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(1);
            Value::String("x".repeat(min.clamp(1, 64) as usize))
        }
    }
}

/// The arguments of a call to `tool`: `command` is the shell command (where the tool has a shell
/// property), `filler(n)` gives n bytes of plain ASCII words. The text is `target` bytes long
/// when that is at least its shortest form, else its shortest form.
pub(crate) fn arguments(
    tool: Offered<'_>,
    command: &str,
    target: usize,
    filler: &mut dyn FnMut(usize) -> String,
) -> String {
    let schema = tool.parameters.cloned().unwrap_or(Value::Null);
    let shell = shell_property(tool.parameters);
    let mut v = value_of(&schema, shell, 0);
    if !v.is_object() {
        v = Value::Object(Map::new());
    }
    // Invariant: a serde_json::Value always serializes.
    let text = serde_json::to_string(&v).unwrap_or_default();
    let plain = text.replacen(CMD, command, 1);
    if plain.len() >= target {
        return plain;
    }
    let need = target - plain.len();
    if text.contains(CMD) {
        // The command grows by filler words (ASCII, nothing to escape: one byte each).
        let mut extra = format!(" {}", filler(need));
        extra.truncate(need);
        return text.replacen(CMD, &format!("{command}{extra}"), 1);
    }
    // Whitespace before the closing brace: the same JSON value.
    let mut out = plain;
    out.pop();
    out.push_str(&" ".repeat(need));
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fill(n: usize) -> String {
        "the of and to in ".repeat(n / 17 + 1)[..n].to_string()
    }

    fn tools() -> Vec<Value> {
        vec![
            json!({"type": "function", "function": {"name": "Read", "parameters": {"type": "object",
                "properties": {"file_path": {"type": "string"}, "limit": {"type": "number"}}, "required": ["file_path"]}}}),
            json!({"type": "function", "function": {"name": "Bash", "parameters": {"type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}}, "required": ["command"]}}}),
            json!({"type": "function", "function": {"name": "shell", "parameters": {"type": "object",
                "properties": {"command": {"type": "array", "items": {"type": "string"}}, "workdir": {"type": "string"}}, "required": ["command"]}}}),
        ]
    }

    #[test]
    fn a_shell_tool_is_preferred_and_its_command_fills_the_length() {
        let t = tools();
        let o = offered(&t);
        let bash = choose(&o, None, 0.0).unwrap();
        assert_eq!(bash.name, "Bash");
        let args = arguments(bash, "ls", 60, &mut fill);
        assert_eq!(args.len(), 60, "{args}");
        let v: Value = serde_json::from_str(&args).unwrap();
        assert!(v["command"].as_str().unwrap().starts_with("ls "), "{v}");
        assert_eq!(v.as_object().unwrap().len(), 1, "only what is required");
        // An argv array: bash -lc with the command.
        let shell = choose(&o, Some("shell"), 0.0).unwrap();
        let v: Value = serde_json::from_str(&arguments(shell, "ls", 10, &mut fill)).unwrap();
        assert_eq!(v, json!({"command": ["bash", "-lc", "ls"]}));
    }

    #[test]
    fn other_tools_get_their_required_properties_typed() {
        let t = vec![
            json!({"type": "function", "function": {"name": "plan", "parameters": {"type": "object",
            "properties": {"mode": {"enum": ["fast", "slow"]}, "n": {"type": "integer", "minimum": 3},
              "ok": {"type": "boolean"}, "items": {"type": "array", "minItems": 1, "items": {"type": "object",
                "properties": {"id": {"type": "string"}}, "required": ["id"]}}},
            "required": ["mode", "n", "ok", "items"]}}}),
        ];
        let o = offered(&t);
        let p = choose(&o, None, 0.99).unwrap();
        let args = arguments(p, "ls", 80, &mut fill);
        assert_eq!(args.len(), 80);
        let v: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(
            v,
            json!({"mode": "fast", "n": 3, "ok": false, "items": [{"id": "x"}]})
        );
        // Named but not offered: no call. Nothing offered: no call.
        assert!(choose(&o, Some("Bash"), 0.0).is_none());
        assert!(choose(&[], None, 0.5).is_none());
    }
}
