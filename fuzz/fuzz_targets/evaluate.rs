#![no_main]
// Request, settings and host answer through the policy's native entry points;
// see node_metadata_policy::testing::fuzzing for the input layout and the properties.
libfuzzer_sys::fuzz_target!(|data: &[u8]| node_metadata_policy::testing::fuzzing::exercise(data));
