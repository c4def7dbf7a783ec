//! cargo fuzz target `regex`: see `structgen::fuzzing::regex_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen::fuzzing::regex_target(data));
