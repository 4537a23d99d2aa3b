//! The `capsize-mock` binary: a thin shell over [`capsize_mock::cli::main_with`].

fn main() -> std::process::ExitCode {
    capsize_mock::cli::main_with(std::env::args_os())
}
