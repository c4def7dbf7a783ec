//! cargo fuzz target `matcher_ops`: see `structgen_engine::fuzzing::matcher_ops_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::matcher_ops_target(data));
