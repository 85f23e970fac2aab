//! `apiserver-fake` binary.

fn main() {}
