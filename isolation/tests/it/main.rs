//! Process isolation's integration tests, one test program with a module
//! per subject.

mod isolation;
mod load;
mod properties;
mod shared_memory;
