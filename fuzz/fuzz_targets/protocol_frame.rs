//! The provider-process protocol, read from either side: any bytes give
//! messages or a clear frame error, never a panic or an unbounded
//! allocation (a frame announcing more than the limit is refused before
//! anything is allocated for it).
#![no_main]

use std::io::BufReader;

use guardhost_isolation::protocol::{read_message, FromServer, ToServer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = BufReader::new(data);
    while read_message::<FromServer>(&mut input).is_ok() {}
    let mut input = BufReader::new(data);
    while read_message::<ToServer<'static>>(&mut input).is_ok() {}
});
