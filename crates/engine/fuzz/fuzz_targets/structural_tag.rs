//! cargo fuzz target `structural_tag`: see `structgen_engine::fuzzing::structural_tag_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::structural_tag_target(data));
