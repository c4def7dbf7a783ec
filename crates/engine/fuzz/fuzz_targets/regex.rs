//! cargo fuzz target `regex`: see `structgen_engine::fuzzing::regex_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::regex_target(data));
