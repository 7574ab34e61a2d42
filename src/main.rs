//! The `lshbench` binary: a thin shell over [`lshbench::cli`].
/// Documents cross threads (read on one, signed on others): mimalloc keeps their allocation cheap.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    lshbench::cli::main()
}
