//! Small constructors of [`Expr`] that every front end uses (JSON Schema, structural tags, tool
//! lists): each returns the simplest equal expression (an empty alternative is `never`, an empty
//! literal is `Empty`).

use super::{CharClass, Expr};

/// An expression that matches nothing.
pub fn never() -> Expr {
    Expr::Class(CharClass::new(false, Vec::new()))
}

/// `a | b | ...`, or the single item, or nothing.
pub fn alt(mut items: Vec<Expr>) -> Expr {
    match items.len() {
        0 => never(),
        1 => items.pop().unwrap_or(Expr::Empty),
        _ => Expr::Alt(items),
    }
}

/// `a b ...` in the form normalization gives a sequence of normal parts: nested sequences spliced
/// in, empty parts dropped, adjacent literals joined; the single part, or `Empty`, when that is
/// all there is.
pub fn seq(mut items: Vec<Expr>) -> Expr {
    let flat = items.len() >= 2
        && !items
            .iter()
            .any(|i| matches!(i, Expr::Seq(_) | Expr::Empty))
        && !items
            .windows(2)
            .any(|w| matches!(w, [Expr::Literal(_), Expr::Literal(_)]));
    if flat {
        return Expr::Seq(items);
    }
    if items.len() == 1 && !matches!(items[0], Expr::Seq(_)) {
        return items.pop().unwrap_or(Expr::Empty);
    }
    let mut out: Vec<Expr> = Vec::with_capacity(items.len());
    let mut push = |part: Expr| match (out.last_mut(), part) {
        (Some(Expr::Literal(prev)), Expr::Literal(next)) => prev.push_str(&next),
        (_, part) => out.push(part),
    };
    for item in items {
        match item {
            Expr::Seq(inner) => inner.into_iter().for_each(&mut push),
            Expr::Empty => {}
            other => push(other),
        }
    }
    match out.len() {
        0 => Expr::Empty,
        1 => out.pop().unwrap_or(Expr::Empty),
        _ => Expr::Seq(out),
    }
}

/// A literal string.
pub fn lit(s: &str) -> Expr {
    if s.is_empty() {
        Expr::Empty
    } else {
        Expr::Literal(s.to_string())
    }
}

/// `e?`.
pub fn opt(e: Expr) -> Expr {
    Expr::Repeat {
        body: Box::new(e),
        min: 0,
        max: Some(1),
    }
}
