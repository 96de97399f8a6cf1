//! The `relaxvm` command-line tool (see `relaxvm --help`).

fn main() -> std::process::ExitCode {
    relaxvm_builder::cli::main()
}
