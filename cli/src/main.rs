//! The `relaxvm` command-line tool (see `relaxvm --help`).

fn main() -> std::process::ExitCode {
    // Diagnostics of the libraries (the log crate) go to stderr at the level RELAXVM_LOG names
    // (error, warn, info, debug, trace; warnings by default).
    env_logger::Builder::from_env(env_logger::Env::new().filter_or("RELAXVM_LOG", "warn")).init();
    relaxvm_cli::main()
}
