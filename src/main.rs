use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = gpuplane::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(gpuplane::cli::execute(cli))
}
