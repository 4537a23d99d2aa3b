//! The `capsize` binary: a thin shell over [`capsize::main`] (the command line).

fn main() -> std::process::ExitCode {
    capsize::main()
}
