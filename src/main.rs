//! The `krender` binary: everything happens in [`krender::cli::run`].

fn main() -> std::process::ExitCode {
    krender::cli::run(std::env::args_os().collect())
}
