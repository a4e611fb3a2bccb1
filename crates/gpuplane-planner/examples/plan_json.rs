//! Reads a plan request (the JSON `POST /v1/plans` takes) on stdin and prints the planner's result as JSON on
//! stdout, exactly as serde writes it. Used to produce the runtime's test fixtures from the real planner:
//!
//!     echo '{"model":{"architecture":{...}},"workload":{"kind":"train"},"cluster":{"gpu":"h100","gpus":4},
//!            "pins":{"tp":2,"pp":1,"dp":2}}' | cargo run -q -p gpuplane-planner --example plan_json
use std::io::Read;

fn main() {
    let mut input = String::new();
    if let Err(err) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("plan_json: cannot read stdin: {err}");
        std::process::exit(2);
    }
    let request: gpuplane_planner::PlanRequest = match serde_json::from_str(&input) {
        Ok(request) => request,
        Err(err) => {
            eprintln!("plan_json: not a plan request: {err}");
            std::process::exit(2);
        }
    };
    match gpuplane_planner::plan_request(&request) {
        Ok(result) => println!("{}", serde_json::to_string_pretty(&result).expect("a plan serializes")),
        Err(err) => {
            println!("{}", serde_json::to_string_pretty(&err).expect("an error serializes"));
            std::process::exit(1);
        }
    }
}
