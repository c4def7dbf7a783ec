//! JSON Schema front end.
