//! cargo fuzz target `gguf`: see `structgen::fuzzing::gguf_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen::fuzzing::gguf_target(data));
