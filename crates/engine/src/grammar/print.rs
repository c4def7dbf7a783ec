//! [`Grammar`] → EBNF text that [`super::ebnf::parse`] reads back to an equal `Grammar` (same rule
//! order, same expression tree), except that an [`Expr::Except`], which EBNF cannot name, is
//! written as its [`super::except::expansion`], normalized, and reads back as that (the same
//! language). One rule per line; parentheses only where precedence needs them.

use std::fmt::Write;

use super::passes::normalize_expr;
use super::{CharClass, Expr, Grammar, Pattern, Symbol, TagDispatch, TokenSet};

/// Prints the whole grammar, one `name ::= body` line per rule.
pub fn print_grammar(g: &Grammar) -> String {
    let mut out = String::new();
    for rule in g.rules() {
        out.push_str(&rule.name);
        out.push_str(" ::= ");
        print_expr(g, &rule.body, Prec::Alt, &mut out);
        if let Some(la) = &rule.lookahead {
            out.push_str(" (= ");
            print_expr(g, la, Prec::Alt, &mut out);
            out.push(')');
        }
        out.push('\n');
    }
    out
}

/// Binding strength, weakest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Alt,
    Seq,
    Postfix,
    Atom,
}

fn prec(e: &Expr) -> Prec {
    match e {
        Expr::Alt(_) => Prec::Alt,
        Expr::Seq(_) => Prec::Seq,
        Expr::Repeat { .. } => Prec::Postfix,
        Expr::Empty
        | Expr::Literal(_)
        | Expr::Class(_)
        | Expr::Ref(_)
        | Expr::Tokens(_)
        | Expr::Dispatch(_)
        | Expr::JsonLength { .. } => Prec::Atom,
        Expr::Except(_) => Prec::Alt,
    }
}

/// Prints `e` in a context that needs at least binding strength `ctx`.
fn print_expr(g: &Grammar, e: &Expr, ctx: Prec, out: &mut String) {
    let paren = prec(e) < ctx;
    if paren {
        out.push('(');
    }
    match e {
        Expr::Empty => out.push_str("\"\""),
        Expr::Literal(s) => print_literal(s, out),
        Expr::Class(c) => print_class(c, out),
        Expr::Ref(r) => out.push_str(&g.rule(*r).name),
        Expr::Tokens(set) => print_tokens(set, out),
        Expr::Dispatch(d) => print_dispatch(g, d, out),
        Expr::Except(names) => {
            let expansion = normalize_expr(super::except::expansion(names));
            print_expr(g, &expansion, Prec::Alt, out)
        }
        Expr::JsonLength { body, min, max } => {
            out.push_str("JsonLength(");
            print_expr(g, body, Prec::Alt, out);
            let _ = write!(out, ", {min}");
            if let Some(m) = max {
                let _ = write!(out, ", {m}");
            }
            out.push(')');
        }
        Expr::Seq(items) => join(g, items, " ", Prec::Postfix, out),
        Expr::Alt(items) => join(g, items, " | ", Prec::Seq, out),
        Expr::Repeat { body, min, max } => {
            print_expr(g, body, Prec::Atom, out);
            match (min, max) {
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (0, Some(1)) => out.push('?'),
                (n, None) => {
                    let _ = write!(out, "{{{n},}}");
                }
                (n, Some(m)) if n == m => {
                    let _ = write!(out, "{{{n}}}");
                }
                (n, Some(m)) => {
                    let _ = write!(out, "{{{n},{m}}}");
                }
            }
        }
    }
    if paren {
        out.push(')');
    }
}

fn join(g: &Grammar, items: &[Expr], sep: &str, ctx: Prec, out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        print_expr(g, item, ctx, out);
    }
}

/// `Token(1, 2)` or `ExcludeToken(1, 2)` (xgrammar's spelling; `<[1, 2]>` / `<[^1, 2]>` parse
/// too).
fn print_tokens(set: &TokenSet, out: &mut String) {
    out.push_str(if set.negated {
        "ExcludeToken("
    } else {
        "Token("
    });
    for (i, id) in set.ids.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{id}");
    }
    out.push(')');
}

/// A pattern as quoted text and `<[id]>` tokens separated by spaces (`""` when empty).
fn print_pattern(p: &Pattern, out: &mut String) {
    if p.is_empty() {
        out.push_str("\"\"");
    }
    let mut text = String::new();
    for (i, sym) in p.iter().enumerate() {
        match sym {
            Symbol::Char(c) => text.push(*c),
            Symbol::Token(t) => {
                if !text.is_empty() {
                    print_literal(&std::mem::take(&mut text), out);
                    out.push(' ');
                }
                let _ = write!(out, "<[{}]>", t.0);
                if i + 1 < p.len() {
                    out.push(' ');
                }
            }
        }
    }
    if !text.is_empty() {
        print_literal(&text, out);
    }
}

fn print_patterns(name: &str, ps: &[Pattern], out: &mut String) {
    let _ = write!(out, ", {name}=(");
    for (i, p) in ps.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        print_pattern(p, out);
    }
    out.push(')');
}

/// xgrammar's syntax: `TagDispatch(("tag", rule), ..., stop_eos=true, stop_str=(...),
/// loop_after_dispatch=true, excludes=(...))`.
fn print_dispatch(g: &Grammar, d: &TagDispatch, out: &mut String) {
    out.push_str("TagDispatch(");
    for (i, (tag, rule)) in d.tags.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('(');
        print_pattern(tag, out);
        let _ = write!(out, ", {})", g.rule(*rule).name);
    }
    if d.tags.is_empty() {
        out.push_str("stop_eos=");
    } else {
        out.push_str(", stop_eos=");
    }
    out.push_str(if d.stop_eos { "true" } else { "false" });
    print_patterns("stop_str", &d.stop_str, out);
    let _ = write!(out, ", loop_after_dispatch={}", d.loop_after_dispatch);
    print_patterns("excludes", &d.excludes, out);
    out.push(')');
}

/// Quotes a literal for EBNF.
pub fn print_literal(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            _ => escape_char(c, out),
        }
    }
    out.push('"');
}

fn print_class(c: &CharClass, out: &mut String) {
    out.push('[');
    if c.negated {
        out.push('^');
    }
    for &(lo, hi) in &c.ranges {
        class_char(lo, out);
        if hi > lo {
            if hi > lo + 1 {
                out.push('-');
            }
            class_char(hi, out);
        }
    }
    out.push(']');
}

fn class_char(cp: u32, out: &mut String) {
    match char::from_u32(cp) {
        Some(c @ (']' | '[' | '^' | '-')) => {
            out.push('\\');
            out.push(c);
        }
        Some(c) => escape_char(c, out),
        None => {
            let _ = write!(out, "\\U{cp:08X}");
        }
    }
}

fn escape_char(c: char, out: &mut String) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        // Never `\x`: it takes every hex digit that follows, as xgrammar reads it.
        c if c.is_control() || is_invisible(c) => {
            if (c as u32) <= 0xFFFF {
                let _ = write!(out, "\\u{:04X}", c as u32);
            } else {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
        }
        c => out.push(c),
    }
}

/// Separators, format characters and unassigned-looking blanks that would be invisible when printed.
fn is_invisible(c: char) -> bool {
    matches!(c as u32, 0x85 | 0xA0 | 0xAD | 0x2000..=0x200F | 0x2028..=0x202F | 0x205F..=0x206F | 0xFEFF | 0xFFF0..=0xFFFF)
        || (0xE000..=0xF8FF).contains(&(c as u32))
        || (0xF0000..=0x10FFFF).contains(&(c as u32))
}
