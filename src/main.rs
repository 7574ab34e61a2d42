//! The `lshbench` binary: a thin shell over [`lshbench::cli`].
fn main() -> std::process::ExitCode {
    lshbench::cli::main()
}
