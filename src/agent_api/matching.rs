//! Does a GPU the driver reports belong in a pool of a given catalog model? Pure functions.

use crate::inventory::gpu_models::GpuModel;

fn normalize(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// Match an NVML name (`NVIDIA H100 80GB HBM3`, `NVIDIA A100-SXM4-80GB`, `NVIDIA GeForce RTX 4090`) and memory
/// to a catalog model. Built-in models match by their marketing number, with memory telling the A100 40GB
/// from the 80GB; operator-added models match when one normalized name contains the other.
pub fn gpu_matches_model(gpu_name: &str, gpu_memory_bytes: i64, model: &GpuModel) -> bool {
    let name = normalize(gpu_name);
    let has = |token: &str| name.contains(token);
    const GB: i64 = 1_000_000_000;
    match model.key.as_str() {
        "rtx4090" => has("4090"),
        "a10" => has("a10") && !has("a100"),
        "a100-40g" => has("a100") && gpu_memory_bytes < 60 * GB,
        "a100-80g" => has("a100") && gpu_memory_bytes >= 60 * GB,
        "h100" => has("h100"),
        "h200" => has("h200"),
        "b200" => has("b200"),
        _ => {
            let model_name = normalize(&model.name);
            !model_name.is_empty() && (name.contains(&model_name) || model_name.contains(&name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(key: &str, name: &str) -> GpuModel {
        GpuModel {
            key: key.into(),
            name: name.into(),
            memory_bytes: 1,
            memory_bandwidth_gbps: 1,
            bf16_tflops: 1.0,
            fp8_tflops: None,
            gpu_link: "none".into(),
            gpu_link_gbps: 0,
            host_link: "pcie4".into(),
        }
    }

    #[test]
    fn nvml_names_match_their_catalog_models_only() {
        const MIB: i64 = 1024 * 1024;
        let cases = [
            ("NVIDIA H100 80GB HBM3", 81559 * MIB, "h100"),
            ("NVIDIA H200", 143771 * MIB, "h200"),
            ("NVIDIA A100-SXM4-80GB", 81920 * MIB, "a100-80g"),
            ("NVIDIA A100-SXM4-40GB", 40960 * MIB, "a100-40g"),
            ("NVIDIA A10", 23028 * MIB, "a10"),
            ("NVIDIA GeForce RTX 4090", 24564 * MIB, "rtx4090"),
            ("NVIDIA B200", 183359 * MIB, "b200"),
        ];
        let keys = ["rtx4090", "a10", "a100-40g", "a100-80g", "h100", "h200", "b200"];
        for (name, memory, expected) in cases {
            for key in keys {
                assert_eq!(gpu_matches_model(name, memory, &model(key, key)), key == expected, "{name} vs {key}");
            }
        }
    }

    #[test]
    fn custom_models_match_by_name() {
        let l40s = model("l40s", "L40S");
        assert!(gpu_matches_model("NVIDIA L40S", 48 * 1024 * 1024 * 1024, &l40s));
        assert!(!gpu_matches_model("NVIDIA L4", 24 * 1024 * 1024 * 1024, &l40s));
    }
}
