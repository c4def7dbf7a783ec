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
