//! `serve_provider`: the child side of `isolation: process` (the body of
//! `guardhost-provider-server`). The crate's only `unsafe` code is here.

use pyo3::prelude::*;

#[cfg(not(unix))]
use crate::errors::GuardhostError;

/// Serves one provider on the file descriptors `input` and `output` until
/// the host closes `input`: the body of `guardhost-provider-server`. Takes
/// ownership of both descriptors.
#[pyfunction]
pub(crate) fn serve_provider(py: Python<'_>, input: i32, output: i32) -> PyResult<i32> {
    #[cfg(unix)]
    {
        use std::os::fd::FromRawFd;
        // SAFETY: the caller (`guardhost._server`) hands over two descriptors
        // it duplicated for this call and never uses or closes again, so
        // each `File` is their only owner.
        #[allow(unsafe_code)]
        let (input, output) =
            unsafe { (std::fs::File::from_raw_fd(input), std::fs::File::from_raw_fd(output)) };
        let input = std::io::BufReader::with_capacity(64 << 10, input);
        let result = py.allow_threads(|| guardhost_isolation::serve(input, output));
        match result {
            Ok(()) => Ok(0),
            Err(guardhost_isolation::ServeError::Build(_)) => Ok(2),
            Err(error) => {
                eprintln!("guardhost provider server: {error}");
                Ok(1)
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (py, input, output);
        Err(GuardhostError::new_err("isolation: process is supported on Unix only in the Python package"))
    }
}
