//! The `krender` binary: everything happens in [`krender::cli::run`].

// Rendering allocates millions of small YAML nodes and strings; mimalloc
// handles that pattern markedly better than glibc's malloc. It is built
// without transparent huge pages (`no_thp`): with them, every arena touched
// is committed and zeroed 2 MiB at a time, which put ~50 MB on the peak RSS
// of a 1,000-package render for no measurable speed.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    krender::cli::run(std::env::args_os().collect())
}
