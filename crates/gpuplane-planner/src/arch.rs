//! Parameter and FLOP counts derived from the architecture.
//!
//! Parameters (no biases):
//! - attention: `2*h*heads*head_dim` (q, o) `+ 2*h*kv_heads*head_dim` (k, v; grouped-query
//!   attention); `head_dim` defaults to `h / heads`;
//! - FFN: `3*h*ffn` for a gated MLP (SwiGLU gate/up/down), `2*h*ffn` for GPT's (`gated_mlp`;
//!   by default GPT's when `ffn == 4h`); with MoE
//!   `experts` routed copies plus `shared_experts` shared ones and an `h*experts` router, except
//!   in the first `dense_layers` layers, which have one dense FFN of `dense_ffn`;
//! - two norms `2*h` per layer, a final norm `h`;
//! - input embedding `V*h` and an LM head `V*h` unless it is tied to the embedding.
//!
//! This gives llama2-7b 6.74B, llama3-70b 70.55B, gpt3-175b 175.2B, llama3.1-405b 405.8B,
//! mixtral-8x7b 46.7B, mixtral-8x22b 140.6B. Per-layer figures are averages over the layers
//! (a DeepSeek-style model's dense first layers are spread over all).

use super::types::ModelArch;

/// The modules LoRA adapters go on, as the planner sizes them (and the runtime applies them by default).
pub const LORA_TARGET_MODULES: [&str; 2] = ["q_proj", "v_proj"];

impl ModelArch {
    pub fn head_dim(&self) -> u64 {
        u64::from(self.head_dim.unwrap_or_else(|| self.hidden.checked_div(self.heads).unwrap_or(0)))
    }

    /// Width of the queries (and of the attention output): `heads * head_dim`, `hidden` by
    /// default.
    pub fn q_dim(&self) -> u64 {
        u64::from(self.heads) * self.head_dim()
    }

    fn attention_params(&self) -> u64 {
        let h = u64::from(self.hidden);
        let kv = u64::from(self.kv_heads) * self.head_dim();
        2 * h * self.q_dim() + 2 * h * kv
    }

    fn ffn_params_of(&self, ffn: u32) -> u64 {
        let h = u64::from(self.hidden);
        let f = u64::from(ffn);
        let gated = self.gated_mlp.unwrap_or(f != 4 * h);
        let mats = if gated { 3 } else { 2 };
        mats * h * f
    }

    fn ffn_params_one(&self) -> u64 {
        self.ffn_params_of(self.ffn)
    }

    /// Layers with a mixture-of-experts FFN.
    pub fn moe_layers(&self) -> u64 {
        match self.moe {
            Some(m) => u64::from(self.layers.saturating_sub(m.dense_layers)),
            None => 0,
        }
    }

    /// Routed-expert parameters of the whole model (0 for dense models).
    pub fn routed_expert_params(&self) -> u64 {
        match self.moe {
            Some(m) => self.moe_layers().saturating_mul(u64::from(m.experts)).saturating_mul(self.ffn_params_one()),
            None => 0,
        }
    }

    /// All non-expert parameters of the transformer layers (attention, norms, dense FFNs,
    /// shared experts, routers).
    fn dense_layer_params_total(&self) -> u64 {
        let h = u64::from(self.hidden);
        let l = u64::from(self.layers);
        let per_layer = self.attention_params() + 2 * h;
        let ffn = match self.moe {
            Some(m) => {
                let dense = u64::from(m.dense_layers.min(self.layers));
                let dense_ffn = self.ffn_params_of(m.dense_ffn.unwrap_or(self.ffn));
                let per_moe_layer = u64::from(m.shared_experts) * self.ffn_params_one() + h * u64::from(m.experts);
                self.moe_layers().saturating_mul(per_moe_layer).saturating_add(dense.saturating_mul(dense_ffn))
            }
            None => l * self.ffn_params_one(),
        };
        l.saturating_mul(per_layer).saturating_add(ffn)
    }

    /// Non-expert parameters of one transformer layer (average over the layers).
    pub fn dense_layer_params(&self) -> u64 {
        self.dense_layer_params_total() / u64::from(self.layers.max(1))
    }

    /// Routed-expert parameters of one layer (average over the layers).
    pub fn expert_layer_params(&self) -> u64 {
        self.routed_expert_params() / u64::from(self.layers.max(1))
    }

    /// All parameters of one transformer layer (all experts; average over the layers).
    pub fn layer_params(&self) -> u64 {
        self.dense_layer_params() + self.expert_layer_params()
    }

    /// Matmul parameters one token touches in one layer (routed and shared experts only;
    /// average over the layers).
    pub fn active_layer_matmul_params(&self) -> u64 {
        match self.moe {
            Some(m) => {
                let dense = u64::from(m.dense_layers.min(self.layers));
                let dense_ffn = self.ffn_params_of(m.dense_ffn.unwrap_or(self.ffn));
                let experts = u64::from(m.experts_per_token) + u64::from(m.shared_experts);
                let ffn = self
                    .moe_layers()
                    .saturating_mul(experts * self.ffn_params_one())
                    .saturating_add(dense.saturating_mul(dense_ffn));
                self.attention_params() + ffn / u64::from(self.layers.max(1))
            }
            None => self.attention_params() + self.ffn_params_one(),
        }
    }

    /// Routed-expert matmul parameters one token touches in one layer (average).
    pub fn active_expert_layer_params(&self) -> u64 {
        match self.moe {
            Some(m) => {
                self.moe_layers().saturating_mul(u64::from(m.experts_per_token) * self.ffn_params_one())
                    / u64::from(self.layers.max(1))
            }
            None => 0,
        }
    }

    /// Input embedding parameters (the LM head has as many again, unless tied).
    pub fn embedding_params(&self) -> u64 {
        u64::from(self.vocab) * u64::from(self.hidden)
    }

    /// The embedding matrices of the whole model: 2, or 1 when the head is tied to the embedding.
    pub fn embedding_matrices(&self) -> u64 {
        if self.tied_embeddings { 1 } else { 2 }
    }

    /// Total parameters.
    pub fn param_count(&self) -> u64 {
        if let Some(d) = self.diffusion {
            return d.unet_params.saturating_add(d.text_encoder_params);
        }
        self.dense_layer_params_total()
            .saturating_add(self.routed_expert_params())
            .saturating_add(self.embedding_matrices() * self.embedding_params())
            .saturating_add(u64::from(self.hidden))
    }

    /// Parameters active per token (equals `param_count` for dense models).
    pub fn active_param_count(&self) -> u64 {
        if self.diffusion.is_some() {
            return self.param_count();
        }
        if self.moe.is_none() {
            return self.param_count();
        }
        let h = u64::from(self.hidden);
        u64::from(self.layers)
            .saturating_mul(self.active_layer_matmul_params() + 2 * h)
            .saturating_add(self.embedding_matrices() * self.embedding_params())
            .saturating_add(h)
    }

    /// LoRA adapter parameters per layer: rank-`r` A and B matrices on q and v.
    pub fn lora_layer_params(&self, rank: u32) -> u64 {
        let h = u64::from(self.hidden);
        let kv = u64::from(self.kv_heads) * self.head_dim();
        u64::from(rank) * ((h + self.q_dim()) + (h + kv))
    }

    /// bf16 KV cache bytes per token: `2 (K,V) * layers * kv_heads * head_dim * 2 bytes`.
    pub fn kv_bytes_per_token(&self) -> u64 {
        4 * u64::from(self.layers) * u64::from(self.kv_heads) * self.head_dim()
    }
}
