// Empty: cargo reads a package's [build-dependencies] (the features of syn, cc and others that build scripts and
// proc macros are compiled with) only when it has a build script.
fn main() {}
