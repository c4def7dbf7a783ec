//! cargo fuzz target `tokenizer_json`: see `structgen_engine::fuzzing::tokenizer_json_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::tokenizer_json_target(data));
