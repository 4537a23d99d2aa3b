//! The `capsize` binary: a thin shell over [`capsize::cli`].

fn main() -> std::process::ExitCode {
    capsize::main()
}
