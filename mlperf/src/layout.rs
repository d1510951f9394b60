//! Whether a chat template renders a conversation message by message.
//!
//! A template is *message-local* when, for fixed tools, request arguments and special tokens,
//! its output is `P + B(m₀) + B(m₁) + … + B(mₙ₋₁) + S`: a text before the messages (`P`), one
//! text per message that depends on that message alone (`B`), and a text after them (`S`), none
//! of them depending on the others. Then the prompt of a conversation's next turn, whose
//! messages extend the last one's, is the last prompt without its `S`, followed by the new
//! messages' rendering: the replay renders only what is new, and the prompt it counts is the
//! same text, to the byte, as the whole rendering.
//!
//! Decided from the template's syntax tree, conservatively: anything that could make one
//! message's text depend on another message, on its position, or on the time is refused, and a
//! refused template is rendered whole at every turn, as before. Message-local here means:
//!
//! - exactly one `for` over `messages` among the template's top-level statements, without a
//!   filter, an `else`, or `recursive`;
//! - no other mention of `messages` anywhere;
//! - in the loop's body: no `loop` of that loop (an inner loop's own is fine), no `break` out
//!   of it, no name read that a body assigns unless this iteration assigned it first (nothing
//!   carries over from one message to the next), no attribute or item assignment (`set ns.x`);
//! - after the loop: no name the body assigns, and not the loop variable;
//! - nowhere: macros, blocks, includes, imports, `extends`, `call` and `do` blocks, or
//!   `strftime_now` (the day would leak from an older turn's prompt into a newer one's).
//!
//! The Qwen3-style templates (the last user query found by walking `messages`, reasoning
//! dropped before it) and every template that reads `messages[0]` or `loop.last` are refused;
//! the golden tokenizer's template is accepted (`tests` below and `tokenizer::tests`).

use minijinja::machinery::ast::{CallArg, Expr, Stmt};
use minijinja::machinery::{parse, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use std::collections::HashSet;

/// Whether the template whose source (after the `generation` tags are rewritten) is `source`
/// is message-local (the module docs).
pub(crate) fn message_local(source: &str) -> bool {
    let ws = WhitespaceConfig {
        keep_trailing_newline: false,
        lstrip_blocks: true,
        trim_blocks: true,
    };
    // A unit struct unless minijinja's `custom_syntax` is on somewhere in the build.
    #[allow(clippy::default_constructed_unit_structs)]
    let syntax = SyntaxConfig::default();
    let Ok(Stmt::Template(root)) = parse(source, "chat_template", syntax, ws) else {
        return false;
    };
    let is_messages_loop = |s: &Stmt<'_>| matches!(s, Stmt::ForLoop(f) if matches!(&f.iter, Expr::Var(v) if v.id == "messages"));
    let mut loops = root
        .children
        .iter()
        .enumerate()
        .filter(|(_, s)| is_messages_loop(s));
    let (Some((at, Stmt::ForLoop(f))), None) = (loops.next(), loops.next()) else {
        return false;
    };
    if f.recursive || f.filter_expr.is_some() || !f.else_body.is_empty() {
        return false;
    }
    let mut target = HashSet::new();
    if !bind(&f.target, &mut target) {
        return false;
    }
    // The names any statement of the body assigns, at any depth.
    let mut in_body = HashSet::new();
    if !assigned(&f.body, &mut in_body) {
        return false;
    }
    let before = Walk {
        carried: HashSet::new(),
        loops: 0,
    };
    let body = Walk {
        carried: in_body.iter().copied().chain(["loop"]).collect(),
        loops: 0,
    };
    let after = Walk {
        carried: in_body
            .iter()
            .copied()
            .chain(target.iter().copied())
            .collect(),
        loops: 0,
    };
    before.stmts(&root.children[..at], &mut HashSet::new())
        && body.stmts(&f.body, &mut target.clone())
        && after.stmts(&root.children[at + 1..], &mut HashSet::new())
}

/// Adds the names a loop or assignment target binds; false for any other target (an attribute
/// or an item).
fn bind<'a>(target: &Expr<'a>, into: &mut HashSet<&'a str>) -> bool {
    match target {
        Expr::Var(v) => {
            into.insert(v.id);
            true
        }
        Expr::List(l) => l.items.iter().all(|e| bind(e, into)),
        _ => false,
    }
}

/// Adds every name `stmts` assign (`set`, `for` targets, `with`), at any depth; false where a
/// target is not a name.
fn assigned<'a>(stmts: &[Stmt<'a>], into: &mut HashSet<&'a str>) -> bool {
    stmts.iter().all(|s| match s {
        Stmt::Set(s) => bind(&s.target, into),
        Stmt::SetBlock(s) => bind(&s.target, into),
        Stmt::ForLoop(f) => {
            bind(&f.target, into) && assigned(&f.body, into) && assigned(&f.else_body, into)
        }
        Stmt::WithBlock(w) => {
            w.assignments.iter().all(|(t, _)| bind(t, into)) && assigned(&w.body, into)
        }
        Stmt::IfCond(i) => assigned(&i.true_body, into) && assigned(&i.false_body, into),
        Stmt::AutoEscape(a) => assigned(&a.body, into),
        Stmt::FilterBlock(b) => assigned(&b.body, into),
        _ => true,
    })
}

/// One part of the template (before the loop, its body, after it) checked statement by
/// statement.
struct Walk<'a> {
    /// Names that may hold a value from elsewhere (another message, the loop): read only after
    /// this part assigned them itself.
    carried: HashSet<&'a str>,
    /// Depth of the loops inside this part (a `break` at depth 0 leaves the messages loop).
    loops: u32,
}

impl<'a> Walk<'a> {
    /// `defined`: the names this part assigned so far on the way to here.
    fn stmts(&self, stmts: &[Stmt<'a>], defined: &mut HashSet<&'a str>) -> bool {
        stmts.iter().all(|s| self.stmt(s, defined))
    }

    fn stmt(&self, s: &Stmt<'a>, defined: &mut HashSet<&'a str>) -> bool {
        match s {
            Stmt::EmitRaw(_) | Stmt::Continue(_) => true,
            Stmt::Break(_) => self.loops > 0,
            Stmt::EmitExpr(e) => self.expr(&e.expr, defined),
            Stmt::IfCond(i) => {
                self.expr(&i.expr, defined)
                    && self.stmts(&i.true_body, &mut defined.clone())
                    && self.stmts(&i.false_body, &mut defined.clone())
            }
            Stmt::ForLoop(f) => {
                if f.recursive || !self.expr(&f.iter, defined) {
                    return false;
                }
                let mut inner = defined.clone();
                inner.insert("loop");
                if !bind(&f.target, &mut inner) {
                    return false;
                }
                let nested = Walk {
                    carried: self.carried.clone(),
                    loops: self.loops + 1,
                };
                f.filter_expr
                    .as_ref()
                    .is_none_or(|e| nested.expr(e, &inner))
                    && nested.stmts(&f.body, &mut inner)
                    && self.stmts(&f.else_body, &mut defined.clone())
            }
            Stmt::WithBlock(w) => {
                let mut inner = defined.clone();
                for (target, value) in &w.assignments {
                    if !self.expr(value, defined) || !bind(target, &mut inner) {
                        return false;
                    }
                }
                self.stmts(&w.body, &mut inner)
            }
            Stmt::Set(s) => self.expr(&s.expr, defined) && bind(&s.target, defined),
            Stmt::SetBlock(s) => {
                s.filter.as_ref().is_none_or(|f| self.expr(f, defined))
                    && self.stmts(&s.body, &mut defined.clone())
                    && bind(&s.target, defined)
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled, defined) && self.stmts(&a.body, &mut defined.clone())
            }
            Stmt::FilterBlock(b) => {
                self.expr(&b.filter, defined) && self.stmts(&b.body, &mut defined.clone())
            }
            // Macros and blocks read names from where they are called; includes, imports and
            // `extends` bring another template; `do` exists for its side effect.
            _ => false,
        }
    }

    fn expr(&self, e: &Expr<'a>, defined: &HashSet<&'a str>) -> bool {
        let ok = |e: &Expr<'a>| self.expr(e, defined);
        let opt = |e: &Option<Expr<'a>>| e.as_ref().is_none_or(ok);
        let args = |a: &[CallArg<'a>]| {
            a.iter().all(|a| match a {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) => ok(e),
                CallArg::KwargSplat(e) => ok(e),
            })
        };
        match e {
            Expr::Var(v) => {
                v.id != "messages"
                    && v.id != "strftime_now"
                    && (defined.contains(v.id) || !self.carried.contains(v.id))
            }
            Expr::Const(_) => true,
            Expr::Slice(s) => ok(&s.expr) && opt(&s.start) && opt(&s.stop) && opt(&s.step),
            Expr::UnaryOp(u) => ok(&u.expr),
            Expr::BinOp(b) => ok(&b.left) && ok(&b.right),
            Expr::Compare(c) => ok(&c.expr) && c.ops.iter().all(|o| ok(&o.expr)),
            Expr::IfExpr(i) => ok(&i.test_expr) && ok(&i.true_expr) && opt(&i.false_expr),
            Expr::Filter(f) => opt(&f.expr) && args(&f.args),
            Expr::Test(t) => ok(&t.expr) && args(&t.args),
            Expr::GetAttr(g) => ok(&g.expr),
            Expr::GetItem(g) => ok(&g.expr) && ok(&g.subscript_expr),
            Expr::Call(c) => ok(&c.expr) && args(&c.args),
            Expr::List(l) => l.items.iter().all(ok),
            Expr::Map(m) => m.keys.iter().all(ok) && m.values.iter().all(ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::message_local;

    #[test]
    fn the_golden_template_is_message_local() {
        let cfg: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../testdata/golden/mlperf-ea33275/tokenizer/tokenizer_config.json"
            ))
            .unwrap(),
        )
        .unwrap();
        assert!(message_local(cfg["chat_template"].as_str().unwrap()));
    }

    /// Each of these makes one message's text depend on something else than the message: each
    /// is refused, and the same template without that one thing is accepted (so the refusal
    /// is that thing's).
    #[test]
    fn what_ties_a_message_to_another_is_refused() {
        let accepted = [
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}",
            "{% if tools %}T{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}A{% endif %}",
            "{% for m in messages %}{% set x = m.content %}{{ x }}{% endfor %}",
            "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ loop.index }}{% if loop.first %}{% break %}{% endif %}{% endfor %}{% endfor %}",
            "{% set sys = 'S' %}{% for m in messages %}{{ sys }}{{ m.content }}{% continue %}{% endfor %}",
            "{% for m in messages %}{% with y = m.role %}{{ y }}{% endwith %}{% endfor %}",
        ];
        for t in accepted {
            assert!(message_local(t), "refused: {t}");
        }
        let refused = [
            // The position, the neighbours, the count.
            "{% for m in messages %}{{ loop.index }}{{ m.content }}{% endfor %}",
            "{% for m in messages %}{% if loop.last %}L{% endif %}{{ m.content }}{% endfor %}",
            "{% for m in messages %}{{ m.content }}{% endfor %}{{ messages | length }}",
            "{% if messages[0].role == 'system' %}S{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}",
            "{% for m in messages[1:] %}{{ m.content }}{% endfor %}",
            "{% for m in messages if m.role != 'system' %}{{ m.content }}{% endfor %}",
            "{% for m in messages %}{{ m.content }}{% else %}E{% endfor %}",
            "{% for m in messages %}{{ m.content }}{% endfor %}{% for m in messages %}{{ m.role }}{% endfor %}",
            // State carried from one message to the next.
            "{% for m in messages %}{{ x }}{% set x = m.content %}{% endfor %}",
            "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ ns.n }}{% endfor %}",
            "{% for m in messages %}{% if m.role == 'user' %}{% set last = m %}{% endif %}{{ last }}{% endfor %}",
            "{% for m in messages %}{% if m.role == 'tool' %}{% break %}{% endif %}{{ m.content }}{% endfor %}",
            // After the loop, what the loop left.
            "{% for m in messages %}{% set x = m.content %}{% endfor %}{{ x }}",
            "{% for m in messages %}{{ m.content }}{% endfor %}{{ m }}",
            // Time, macros, other templates.
            "{{ strftime_now('%d') }}{% for m in messages %}{{ m.content }}{% endfor %}",
            "{% macro r(x) %}{{ x }}{% endmacro %}{% for m in messages %}{{ r(m.content) }}{% endfor %}",
            "{% for m in messages %}{% do m.update({}) %}{% endfor %}",
            "{% for m in messages %}{% include 'x' %}{% endfor %}",
            // No loop at all, or not one that parses.
            "{{ messages | tojson }}",
            "{% for m in messages %}",
        ];
        for t in refused {
            assert!(!message_local(t), "accepted: {t}");
        }
    }
}
