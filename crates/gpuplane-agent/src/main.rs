//! `gpuplane-agent`: the node agent's binary (see the library's documentation).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The gpuplane node agent: registers this GPU host with the control plane, heartbeats its GPUs' telemetry and
/// runs tenants' jobs sandboxed. With a subcommand, an operator's tool instead (`model-cache`).
#[derive(Parser)]
#[command(name = "gpuplane-agent", version, args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct Cli {
    #[command(flatten)]
    agent: gpuplane_agent::AgentArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Fill or list the host's read-only model cache (operators).
    ///
    /// The cache (`--model-cache DIR`) is a directory in the Hugging Face hub layout that every lease of the host
    /// reads at /models (HF_HOME there). An operator fills it on the host, as a user that may write DIR; the
    /// agent need not be stopped (docs/agent-install.md, "The model cache").
    #[command(subcommand)]
    ModelCache(ModelCacheCommand),
}

#[derive(Subcommand)]
enum ModelCacheCommand {
    /// Copy a local model directory into the cache as ORG/NAME, its current snapshot.
    ///
    /// --from is a model directory as `save_pretrained` writes it (config.json, *.safetensors, tokenizer files,
    /// subdirectories): regular files and directories only, names starting with `.` skipped (.git, .cache),
    /// links and special files refused. Prints what it did as one JSON line (model_id, revision, files, bytes,
    /// new_bytes). Filling the same content again changes nothing; changed content becomes a new snapshot. An
    /// interrupted fill leaves the cache as it was. A running agent reports the model within a minute.
    Fill {
        /// The cache directory (created 0755 if missing), the agent's --model-cache.
        #[arg(long, env = "GPUPLANE_AGENT_MODEL_CACHE", value_name = "DIR")]
        cache: PathBuf,
        /// The model's hub id, as jobs name it: `name` or `org/name`, e.g. meta-llama/Llama-3.2-1B.
        #[arg(long, value_name = "ORG/NAME")]
        model: String,
        /// The local model directory to copy.
        #[arg(long, value_name = "LOCAL_DIR")]
        from: PathBuf,
    },
    /// Print the models the cache holds (those the agent reports), one hub id a line.
    List {
        /// The cache directory, the agent's --model-cache.
        #[arg(long, env = "GPUPLANE_AGENT_MODEL_CACHE", value_name = "DIR")]
        cache: PathBuf,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::ModelCache(command)) => model_cache(command),
        None => gpuplane_agent::run(cli.agent).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("gpuplane-agent: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn model_cache(command: ModelCacheCommand) -> anyhow::Result<()> {
    use gpuplane_agent::model_cache;
    match command {
        ModelCacheCommand::Fill { cache, model, from } => {
            let report = model_cache::fill(&cache, &model, &from)?;
            println!("{}", serde_json::to_string(&report)?);
            if let Some(why) = gpuplane_agent::sandbox::unreadable_by_jobs(&cache) {
                eprintln!("gpuplane-agent: WARNING: {}: {why}", cache.display());
            }
        }
        ModelCacheCommand::List { cache } => {
            anyhow::ensure!(cache.is_dir(), "{} is not a directory", cache.display());
            for id in model_cache::cached_models(&cache) {
                println!("{id}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("gpuplane-agent").chain(argv.iter().copied()))
    }

    #[test]
    fn the_agent_flags_are_unchanged_and_model_cache_is_a_subcommand() {
        let cli = parse(&["--server", "https://s", "--model-cache", "/srv/models"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.agent.server.as_deref(), Some("https://s"));
        assert_eq!(cli.agent.model_cache, Some(PathBuf::from("/srv/models")));
        assert!(parse(&["--probe"]).unwrap().command.is_none());
        assert!(parse(&[]).is_err(), "--server is still required without a subcommand");

        let cli = parse(&["model-cache", "fill", "--cache", "/c", "--model", "org/m", "--from", "/saved"]).unwrap();
        match cli.command {
            Some(Command::ModelCache(ModelCacheCommand::Fill { cache, model, from })) => {
                assert_eq!((cache, model.as_str(), from), (PathBuf::from("/c"), "org/m", PathBuf::from("/saved")));
            }
            _ => panic!("a fill"),
        }
        assert!(matches!(
            parse(&["model-cache", "list", "--cache", "/c"]).unwrap().command,
            Some(Command::ModelCache(ModelCacheCommand::List { .. }))
        ));
        assert!(parse(&["model-cache", "fill", "--cache", "/c", "--model", "org/m"]).is_err(), "--from");
        assert!(parse(&["--server", "https://s", "model-cache", "list", "--cache", "/c"]).is_err(), "one or the other");
    }

    #[test]
    fn fill_and_list_through_the_subcommand() {
        let root = std::env::temp_dir().join(format!("gpuplane-agent-cli-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("saved")).unwrap();
        std::fs::write(root.join("saved/config.json"), "{}").unwrap();
        let cache = root.join("cache");
        let fill = ModelCacheCommand::Fill { cache: cache.clone(), model: "org/m".into(), from: root.join("saved") };
        model_cache(fill).unwrap();
        assert_eq!(gpuplane_agent::model_cache::cached_models(&cache), ["org/m"]);
        model_cache(ModelCacheCommand::List { cache }).unwrap();
        assert!(model_cache(ModelCacheCommand::List { cache: root.join("missing") }).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }
}
