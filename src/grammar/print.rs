//! [`Grammar`] → EBNF text that [`super::ebnf::parse`] reads back to an equal `Grammar` (same rule
//! order, same expression tree). One rule per line; parentheses only where precedence needs them.

use std::fmt::Write;

use super::{CharClass, Expr, Grammar};

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
        Expr::Empty | Expr::Literal(_) | Expr::Class(_) | Expr::Ref(_) => Prec::Atom,
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
        c if (c as u32) < 0x20 || c as u32 == 0x7F => {
            let _ = write!(out, "\\x{:02X}", c as u32);
        }
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
