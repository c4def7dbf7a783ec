//! cargo fuzz target `json_schema`: see `structgen_engine::fuzzing::json_schema_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| structgen_engine::fuzzing::json_schema_target(data));
