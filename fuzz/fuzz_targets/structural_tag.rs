//! cargo fuzz target `structural_tag`: see `structgen::fuzzing::structural_tag_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen::fuzzing::structural_tag_target(data));
