//! cargo fuzz target `ebnf`: see `structgen_engine::fuzzing::ebnf_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::ebnf_target(data));
