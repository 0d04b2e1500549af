//! `scalwsd`: see the `scalwsd` library and the README.

use clap::Parser;

fn main() -> std::process::ExitCode {
    scalwsd::run::main(scalwsd::cli::Cli::parse())
}
