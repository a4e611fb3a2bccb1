//! Built-in GPU catalog and model presets (public architectures).

use super::types::{DiffusionSpec, GpuSpec, LinkKind, ModelArch};

const GB: u64 = 1_000_000_000;

#[allow(clippy::too_many_arguments)]
fn gpu(
    key: &str,
    name: &str,
    memory_gb: u64,
    mem_bandwidth_gb_s: f64,
    bf16_tflops: f64,
    fp8_tflops: Option<f64>,
    link: LinkKind,
    link_gb_s: f64,
) -> GpuSpec {
    GpuSpec {
        key: key.to_string(),
        name: name.to_string(),
        memory_bytes: memory_gb * GB,
        mem_bandwidth_gb_s,
        bf16_tflops,
        fp8_tflops,
        link,
        link_gb_s,
    }
}

/// The seven GPU models of the catalog (vendor datasheets, dense throughput).
///
/// PCIe-only cards get the PCIe 4.0 x16 one-direction bandwidth (32 GB/s) as their link.
pub fn builtin_gpus() -> Vec<GpuSpec> {
    use LinkKind::{Nvlink, Pcie};
    vec![
        gpu("rtx4090", "GeForce RTX 4090", 24, 1008.0, 165.2, Some(330.0), Pcie, 32.0),
        gpu("a10", "A10", 24, 600.0, 125.0, None, Pcie, 32.0),
        gpu("a100-40g", "A100 40GB SXM", 40, 1555.0, 312.0, None, Nvlink, 600.0),
        gpu("a100-80g", "A100 80GB SXM", 80, 2039.0, 312.0, None, Nvlink, 600.0),
        gpu("h100", "H100 SXM", 80, 3350.0, 989.0, Some(1979.0), Nvlink, 900.0),
        gpu("h200", "H200 SXM", 141, 4800.0, 989.0, Some(1979.0), Nvlink, 900.0),
        gpu("b200", "B200", 180, 8000.0, 2250.0, Some(4500.0), Nvlink, 1800.0),
    ]
}

/// A catalog GPU by key (`h100`, `a100-80g`, ...), case-insensitive.
pub fn gpu_by_key(key: &str) -> Option<GpuSpec> {
    builtin_gpus().into_iter().find(|g| g.key.eq_ignore_ascii_case(key.trim()))
}

/// Keys of the built-in GPU catalog.
pub fn gpu_keys() -> Vec<String> {
    builtin_gpus().into_iter().map(|g| g.key).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The family of a name: its leading letters ("mixtral-8x7b" -> "mixtral", "llama3-70b" ->
/// "llama"); empty when it starts with a digit.
fn family(name: &str) -> String {
    name.chars().take_while(|c| c.is_ascii_alphabetic()).collect::<String>().to_ascii_lowercase()
}

/// The names of `known` closest to `given` (case-insensitive), never a far one:
/// 1. those it is a prefix of ("mixtral" -> both Mixtrals), else those that are a prefix of it, else, for a
///    model number, those that hold it ("4090" -> "rtx4090");
/// 2. else the nearest by edit distance among names of its family ("llama-7b" -> "llama2-7b"),
///    within a third of its length (at least 2);
/// 3. else, when no name shares its family, only a typo away: the nearest within a sixth of its
///    length (at least 1), so "lama3-70b" finds "llama3-70b" but "mistral-7b" is not offered
///    "mixtral-8x7b", a different model.
pub fn suggestions<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let g = given.trim().to_ascii_lowercase();
    if g.is_empty() {
        return Vec::new();
    }
    let known: Vec<&str> = known.into_iter().collect();
    let strip = |s: &str| s.to_ascii_lowercase().replace(['-', '.', '_', ' '], "");
    let gs = strip(&g);
    // Names that extend what was given ("a100" -> "a100-40g", "a100-80g"), else names it extends.
    for extends in [true, false] {
        let prefixed: Vec<&str> = known
            .iter()
            .copied()
            .filter(|k| {
                let k = strip(k);
                !gs.is_empty() && !k.is_empty() && if extends { k.starts_with(&gs) } else { gs.starts_with(&k) }
            })
            .collect();
        if !prefixed.is_empty() {
            return prefixed;
        }
    }
    // A model number alone names the card it is in ("4090" -> "rtx4090").
    if gs.len() >= 3 && gs.chars().any(|c| c.is_ascii_digit()) {
        let containing: Vec<&str> = known.iter().copied().filter(|k| strip(k).contains(&gs)).collect();
        if !containing.is_empty() {
            return containing;
        }
    }
    let len = g.chars().count();
    let fam = family(&g);
    let same_family: Vec<&str> = known.iter().copied().filter(|k| !fam.is_empty() && family(k) == fam).collect();
    let (pool, limit) =
        if same_family.is_empty() { (known, (len / 6).max(1)) } else { (same_family, (len / 3).max(2)) };
    let mut close: Vec<(usize, &str)> =
        pool.iter().map(|k| (edit_distance(&g, &k.to_ascii_lowercase()), *k)).filter(|(d, _)| *d <= limit).collect();
    close.sort();
    let best = close.first().map_or(0, |(d, _)| *d);
    close.into_iter().take_while(|(d, _)| *d == best).map(|(_, k)| k).collect()
}

/// "unknown X 'given' (did you mean a?); known: ..." for an unknown name.
pub fn unknown_name_message<'a>(what: &str, given: &str, known: impl IntoIterator<Item = &'a str> + Clone) -> String {
    // Names are short: a long input is neither echoed whole nor compared.
    const MAX_ECHO: usize = 64;
    if given.chars().count() > MAX_ECHO {
        let head: String = given.chars().take(MAX_ECHO).collect();
        let all: Vec<&str> = known.into_iter().collect();
        return format!("unknown {what} '{head}...'; known: {}", all.join(", "));
    }
    let close = suggestions(given, known.clone());
    let all: Vec<&str> = known.into_iter().collect();
    let hint = match close.as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean '{one}'?)"),
        many => format!(" (did you mean one of {}?)", many.join(", ")),
    };
    format!("unknown {what} '{given}'{hint}; known: {}", all.join(", "))
}

fn arch(layers: u32, hidden: u32, heads: u32, kv_heads: u32, ffn: u32, vocab: u32) -> ModelArch {
    ModelArch {
        layers,
        hidden,
        heads,
        kv_heads,
        ffn,
        vocab,
        head_dim: None,
        moe: None,
        diffusion: None,
        tied_embeddings: false,
        model_type: None,
        gated_mlp: None,
    }
}

const PRESETS: [&str; 22] = [
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3.1-405b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "mistral-7b-v0.3",
    "gpt3-175b",
    "gpt-1t",
    "sdxl",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen2-57b-a14b",
    "qwen1.5-moe-a2.7b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "gpt-oss-120b",
];

/// Names accepted by [`preset`].
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.to_vec()
}

fn moe(experts: u32, experts_per_token: u32, shared_experts: u32) -> super::types::MoeSpec {
    super::types::MoeSpec {
        experts,
        experts_per_token,
        shared_experts,
        dense_layers: 0,
        dense_ffn: None,
        capacity_factor: None,
    }
}

/// A public architecture by name (case-insensitive).
///
/// `gpt-1t` is the ~1T dense GPT of Narayanan et al. 2021 (128 layers, hidden 25600, 160
/// heads). `sdxl` is Stable Diffusion XL (2.6B UNet + 0.8B text encoders); only inference is
/// planned for it.
pub fn preset(name: &str) -> Option<ModelArch> {
    let a = match name.trim().to_ascii_lowercase().as_str() {
        "llama2-7b" => arch(32, 4096, 32, 32, 11008, 32000),
        "llama2-13b" => arch(40, 5120, 40, 40, 13824, 32000),
        "llama2-70b" => arch(80, 8192, 64, 8, 28672, 32000),
        "llama3-8b" => arch(32, 4096, 32, 8, 14336, 128256),
        "llama3-70b" => arch(80, 8192, 64, 8, 28672, 128256),
        "llama3.1-405b" => arch(126, 16384, 128, 8, 53248, 128256),
        "qwen2.5-7b" => arch(28, 3584, 28, 4, 18944, 152064),
        "qwen2.5-14b" => arch(48, 5120, 40, 8, 13824, 152064),
        "qwen2.5-32b" => arch(64, 5120, 40, 8, 27648, 152064),
        "qwen2.5-72b" => arch(80, 8192, 64, 8, 29568, 152064),
        // Mistral 7B v0.3 (v0.1 and v0.2 differ only in a 32000-token vocabulary).
        "mistral-7b-v0.3" => arch(32, 4096, 32, 8, 14336, 32768),
        "gpt3-175b" => arch(96, 12288, 96, 96, 49152, 50257),
        "gpt-1t" => arch(128, 25600, 160, 160, 102400, 51200),
        "mixtral-8x7b" => ModelArch { moe: Some(moe(8, 2, 0)), ..arch(32, 4096, 32, 8, 14336, 32000) },
        "mixtral-8x22b" => ModelArch { moe: Some(moe(8, 2, 0)), ..arch(56, 6144, 48, 8, 16384, 32000) },
        // DeepSeek-V3-style: 256 routed + 1 shared expert of 2048, top-8, first 3 layers dense
        // (18432). Multi-head latent attention is approximated as 128-head MHA (parameters within
        // 10%; its KV cache is far smaller than this MHA's, so inference memory is pessimistic).
        "deepseek-v3" => ModelArch {
            moe: Some(super::types::MoeSpec { dense_layers: 3, dense_ffn: Some(18432), ..moe(256, 8, 1) }),
            ..arch(61, 7168, 128, 128, 2048, 129280)
        },
        // Qwen-MoE style: 64 experts of 2560, top-8, shared expert of 20480 (= 8 x 2560).
        "qwen2-57b-a14b" => ModelArch { moe: Some(moe(64, 8, 8)), ..arch(28, 3584, 28, 4, 2560, 151936) },
        // 60 experts of 1408, top-4, shared expert of 5632 (= 4 x 1408).
        "qwen1.5-moe-a2.7b" => ModelArch { moe: Some(moe(60, 4, 4)), ..arch(24, 2048, 16, 16, 1408, 151936) },
        // Qwen3 MoE: 128 experts, top-8, no shared expert, 128-wide heads.
        "qwen3-30b-a3b" => {
            ModelArch { head_dim: Some(128), moe: Some(moe(128, 8, 0)), ..arch(48, 2048, 32, 4, 768, 151936) }
        }
        "qwen3-235b-a22b" => {
            ModelArch { head_dim: Some(128), moe: Some(moe(128, 8, 0)), ..arch(94, 4096, 64, 4, 1536, 151936) }
        }
        // 128 experts of 2880, top-4 (alternating sliding-window attention not modelled).
        "gpt-oss-120b" => {
            ModelArch { head_dim: Some(64), moe: Some(moe(128, 4, 0)), ..arch(36, 2880, 64, 8, 2880, 201088) }
        }
        "sdxl" => ModelArch {
            diffusion: Some(DiffusionSpec {
                unet_params: 2_600_000_000,
                text_encoder_params: 800_000_000,
                tflops_per_step: 6.0,
                steps: 30,
                resolution: Some(1024),
            }),
            ..arch(0, 0, 0, 0, 0, 0)
        },
        _ => return None,
    };
    Some(a)
}
