//! The `krender` binary: everything happens in [`krender::cli::run`].

// Rendering allocates millions of small YAML nodes and strings; mimalloc
// handles that pattern markedly better than glibc's malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    krender::cli::run(std::env::args_os().collect())
}
