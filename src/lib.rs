//! structgen — structured generation for LLM tool calling.
pub mod grammar;
pub mod util;
pub mod vocab;
