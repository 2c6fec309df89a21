//! `guardhost run` input lines: any bytes are answered (a call or an error
//! message naming the line), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(message) = guardhost::jsonl::parse_line(7, data) {
        assert!(message.content.starts_with("guardhost: line 7: "), "{}", message.content);
    }
});
