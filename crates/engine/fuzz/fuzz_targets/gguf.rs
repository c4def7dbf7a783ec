//! cargo fuzz target `gguf`: see `structgen_engine::fuzzing::gguf_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::gguf_target(data));
