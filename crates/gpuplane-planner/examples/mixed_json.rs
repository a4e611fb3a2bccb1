//! Reads a mixed-cluster plan request ([`gpuplane_planner::MixedPlanRequest`]: the model and
//! workload of a plan request, and `parts`, each a plan request's `cluster`) on stdin and prints
//! the mixed planner's result as JSON on stdout (with `--explain`, each plan's explanation):
//!
//!     echo '{"model":{"preset":"llama2-13b"},"workload":{"kind":"train"},
//!            "parts":[{"gpu":"a100-80g","gpus":8},{"gpu":"rtx4090","gpus":8,"gpus_per_node":4}]}' \
//!       | cargo run -q -p gpuplane-planner --example mixed_json -- --explain
use std::io::Read;

fn main() {
    let explain = std::env::args().any(|a| a == "--explain");
    let mut input = String::new();
    if let Err(err) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("mixed_json: cannot read stdin: {err}");
        std::process::exit(2);
    }
    let request: gpuplane_planner::MixedPlanRequest = match serde_json::from_str(&input) {
        Ok(request) => request,
        Err(err) => {
            eprintln!("mixed_json: not a mixed plan request: {err}");
            std::process::exit(2);
        }
    };
    match gpuplane_planner::plan_mixed_request(&request) {
        Ok(result) if explain => {
            for (i, plan) in result.plans.iter().enumerate() {
                println!("{}. {}\n", i + 1, plan.explanation);
            }
        }
        Ok(result) => println!("{}", serde_json::to_string_pretty(&result).expect("a plan serializes")),
        Err(err) => {
            println!("{}", serde_json::to_string_pretty(&err).expect("an error serializes"));
            std::process::exit(1);
        }
    }
}
