//! The `vigil` command-line tool; everything lives in `vigil::cli`.

fn main() -> std::process::ExitCode {
    vigil::cli::main()
}
