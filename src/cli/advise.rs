//! `gpuplane advise`: what to rent, from the same engine as `POST /v1/advice` (`planner::advice`), over the
//! platform's pools read with the endpoint's own query, or over pools given on the command line.

use crate::planner::{self, AdviceRequest, PoolOffer};

use super::workload::WorkloadArgs;

/// `gpuplane advise`: a model, a workload and how much of it; the pools to rent from.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  gpuplane advise --model llama2-7b --workload lora --seq 4096 --global-batch 64 --tokens 1000000000 \\\n      --pool rtx4090:16@69 --pool a100-80g:16@179 --pool a10:4:4@45 --pool b200:8@599\n  gpuplane advise --model llama3-8b --workload inference --serving-tokens-per-s 2000 --database-url postgres://.../gpuplane\n\nWithout --pool the platform's pools are read from the database (free GPUs now, current prices), as `POST /v1/advice` reads them."
)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub what: WorkloadArgs,
    /// Train/LoRA: tokens to process in all.
    #[arg(long, value_name = "N")]
    pub tokens: Option<u64>,
    /// Inference: generated tokens/s to sustain.
    #[arg(long, value_name = "TOKENS_S")]
    pub serving_tokens_per_s: Option<f64>,
    /// Inference: requests/s to sustain (each generating --tokens-per-request).
    #[arg(long, value_name = "N")]
    pub requests_per_s: Option<f64>,
    /// Inference: generated tokens per request [default: 256].
    #[arg(long, value_name = "N")]
    pub tokens_per_request: Option<u32>,
    /// Inference: hours the serving runs, for the cost [default: 1].
    #[arg(long, value_name = "H")]
    pub serving_hours: Option<f64>,
    /// Finish within this many hours.
    #[arg(long, value_name = "H")]
    pub deadline_hours: Option<f64>,
    /// Spend at most this, in minor units of the pools' currency (cents).
    #[arg(long, value_name = "MINOR")]
    pub budget_minor: Option<i64>,
    /// A pool to rent from, instead of the platform's: GPU:FREE[:PER_NODE]@PRICE, the catalog key, the free
    /// GPUs, GPUs per node [default: min(FREE, 8)] and the price per GPU-hour in minor units, e.g.
    /// b200:8@599. Repeat for more pools.
    #[arg(long, value_name = "POOL")]
    pub pool: Vec<String>,
    /// Currency of the --pool prices.
    #[arg(long, default_value = "USD", value_name = "CODE")]
    pub currency: String,
    /// Inter-node bandwidth per node of the --pool pools, Gbit/s.
    #[arg(long, default_value_t = 400.0, value_name = "GBIT_S")]
    pub inter_node_gbps: f64,
    /// The --pool pools have no RDMA between nodes (TCP).
    #[arg(long)]
    pub no_rdma: bool,
    /// Without --pool: the platform's database (read only; nothing is created or migrated).
    #[arg(long, env = "DATABASE_URL", default_value = crate::config::DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// Print the full result (or the error) as JSON, as the API answers.
    #[arg(long)]
    pub json: bool,
}

/// `GPU:FREE[:PER_NODE]@PRICE` -> an offer of a catalog GPU.
pub fn parse_pool(spec: &str, currency: &str, inter_node_gbps: f64, rdma: bool) -> anyhow::Result<PoolOffer> {
    let bad = || anyhow::anyhow!("--pool '{spec}': expected GPU:FREE[:PER_NODE]@PRICE, e.g. b200:8@599");
    let (shape, price) = spec.trim().split_once('@').ok_or_else(bad)?;
    let price: i64 = price.trim().parse().map_err(|_| bad())?;
    let mut parts = shape.split(':');
    let key = parts.next().filter(|k| !k.is_empty()).ok_or_else(bad)?;
    let free: u32 = parts.next().ok_or_else(bad)?.trim().parse().map_err(|_| bad())?;
    let per_node: u32 = match parts.next() {
        Some(p) => p.trim().parse().map_err(|_| bad())?,
        None => free.clamp(1, 8),
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    let gpu = planner::gpu_by_key(key).ok_or_else(|| {
        anyhow::anyhow!("{}", planner::unknown_name_message("GPU", key, planner::gpu_keys().iter().map(String::as_str)))
    })?;
    Ok(PoolOffer {
        pool_id: spec.trim().to_string(),
        gpu,
        price_per_gpu_hour_minor: price,
        currency: currency.trim().to_ascii_uppercase(),
        free_gpus: free,
        gpus_per_node: per_node,
        inter_node_gbps,
        rdma,
    })
}

impl AdviseArgs {
    /// The request the engine takes, with the pools given.
    pub fn to_request(&self, pools: Vec<PoolOffer>) -> anyhow::Result<AdviceRequest> {
        let (model, workload) = self.what.to_json()?;
        let request = serde_json::json!({
            "model": model,
            "workload": workload,
            "target": { "training_tokens": self.tokens, "serving_tokens_per_s": self.serving_tokens_per_s,
                "requests_per_s": self.requests_per_s, "tokens_per_request": self.tokens_per_request,
                "serving_hours": self.serving_hours },
            "deadline_hours": self.deadline_hours,
            "budget_minor": self.budget_minor,
            "pools": [],
        });
        let mut req: AdviceRequest = serde_json::from_value(request)?;
        req.pools = pools;
        Ok(req)
    }

    /// The pools: those given, else the platform's, with their names.
    async fn pools(&self) -> anyhow::Result<(Vec<PoolOffer>, Vec<(String, String)>)> {
        if !self.pool.is_empty() {
            let pools = self
                .pool
                .iter()
                .map(|p| parse_pool(p, &self.currency, self.inter_node_gbps, !self.no_rdma))
                .collect::<anyhow::Result<Vec<_>>>()?;
            return Ok((pools, Vec::new()));
        }
        let db =
            sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&self.database_url).await.map_err(|e| {
                anyhow::anyhow!("cannot read the platform's pools (give --pool to advise offline): {e}")
            })?;
        let mut conn = db.acquire().await?;
        let pools = crate::planning_api::pool_offers(&mut conn).await?;
        let names = gpuplane_store::ops::pool_names(&mut conn).await?;
        drop(conn);
        db.close().await;
        Ok((pools, names))
    }
}

pub async fn run(args: &AdviseArgs) -> anyhow::Result<()> {
    let (pools, names) = args.pools().await?;
    let request = args.to_request(pools)?;
    let result = tokio::task::spawn_blocking(move || planner::advice(&request)).await?;
    match result {
        Ok(result) if args.json => println!("{}", serde_json::to_string_pretty(&result)?),
        Ok(result) => {
            let name = |id: &str| names.iter().find(|(i, _)| i == id).map_or(id.to_string(), |(_, n)| n.clone());
            print!("{}", planner::render_advice(&result, &name));
        }
        Err(err) if args.json => {
            println!("{}", serde_json::to_string_pretty(&err)?);
            anyhow::bail!("{}", super::workload::cli_error(&err));
        }
        Err(err) => anyhow::bail!("{}", super::workload::cli_error(&err)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_parse_from_the_command_line() {
        let p = parse_pool("b200:8@599", "usd", 400.0, true).unwrap();
        assert_eq!((p.gpu.key.as_str(), p.free_gpus, p.gpus_per_node, p.price_per_gpu_hour_minor), ("b200", 8, 8, 599));
        assert_eq!(p.currency, "USD");
        let p = parse_pool("a10:4:4@45", "USD", 100.0, false).unwrap();
        assert_eq!((p.free_gpus, p.gpus_per_node, p.rdma), (4, 4, false));
        assert_eq!(parse_pool("rtx4090:16@69", "USD", 100.0, false).unwrap().gpus_per_node, 8);
        for bad in ["b200", "b200:8", "b200:x@5", "b200:8@", ":8@5", "b200:8:8:8@5"] {
            assert!(parse_pool(bad, "USD", 1.0, true).unwrap_err().to_string().contains("expected GPU:FREE"), "{bad}");
        }
        let err = parse_pool("h1000:8@5", "USD", 1.0, true).unwrap_err().to_string();
        assert!(err.contains("did you mean 'h100'"), "{err}");
    }
}
