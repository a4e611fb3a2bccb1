//! Parameter and FLOP counts derived from the architecture.
//!
//! Parameters (no biases):
//! - attention: `2*h*h` (q, o) `+ 2*h*kv_heads*head_dim` (k, v; grouped-query attention);
//! - FFN: `2*h*ffn` when `ffn == 4h` (GPT MLP), else `3*h*ffn` (SwiGLU gate/up/down); with MoE
//!   `experts` copies plus an `h*experts` router;
//! - two norms `2*h` per layer, a final norm `h`;
//! - input embedding `V*h` and an untied LM head `V*h`.
//!
//! This gives llama2-7b 6.74B, llama3-70b 70.55B, gpt3-175b 175.2B, llama3.1-405b 405.8B.

use super::types::ModelArch;

impl ModelArch {
    pub fn head_dim(&self) -> u64 {
        u64::from(self.hidden.checked_div(self.heads).unwrap_or(0))
    }

    fn attention_params(&self) -> u64 {
        let h = u64::from(self.hidden);
        let kv = u64::from(self.kv_heads) * self.head_dim();
        2 * h * h + 2 * h * kv
    }

    fn ffn_params_one(&self) -> u64 {
        let h = u64::from(self.hidden);
        let f = u64::from(self.ffn);
        let mats = if f == 4 * h { 2 } else { 3 };
        mats * h * f
    }

    /// All parameters of one transformer layer (all experts).
    pub fn layer_params(&self) -> u64 {
        let h = u64::from(self.hidden);
        let ffn = match self.moe {
            Some(m) => u64::from(m.experts) * self.ffn_params_one() + h * u64::from(m.experts),
            None => self.ffn_params_one(),
        };
        self.attention_params() + ffn + 2 * h
    }

    /// Matmul parameters one token touches in one layer (routed experts only).
    pub fn active_layer_matmul_params(&self) -> u64 {
        let ffn = match self.moe {
            Some(m) => u64::from(m.experts_per_token) * self.ffn_params_one(),
            None => self.ffn_params_one(),
        };
        self.attention_params() + ffn
    }

    /// Input embedding parameters (the LM head has as many again).
    pub fn embedding_params(&self) -> u64 {
        u64::from(self.vocab) * u64::from(self.hidden)
    }

    /// Total parameters.
    pub fn param_count(&self) -> u64 {
        if let Some(d) = self.diffusion {
            return d.unet_params.saturating_add(d.text_encoder_params);
        }
        u64::from(self.layers)
            .saturating_mul(self.layer_params())
            .saturating_add(2 * self.embedding_params())
            .saturating_add(u64::from(self.hidden))
    }

    /// Parameters active per token (equals `param_count` for dense models).
    pub fn active_param_count(&self) -> u64 {
        if self.diffusion.is_some() {
            return self.param_count();
        }
        let h = u64::from(self.hidden);
        u64::from(self.layers)
            .saturating_mul(self.active_layer_matmul_params() + 2 * h)
            .saturating_add(2 * self.embedding_params())
            .saturating_add(h)
    }

    /// LoRA adapter parameters per layer: rank-`r` A and B matrices on q and v.
    pub fn lora_layer_params(&self, rank: u32) -> u64 {
        let h = u64::from(self.hidden);
        let kv = u64::from(self.kv_heads) * self.head_dim();
        u64::from(rank) * ((h + h) + (h + kv))
    }

    /// bf16 KV cache bytes per token: `2 (K,V) * layers * kv_heads * head_dim * 2 bytes`.
    pub fn kv_bytes_per_token(&self) -> u64 {
        4 * u64::from(self.layers) * u64::from(self.kv_heads) * self.head_dim()
    }
}
