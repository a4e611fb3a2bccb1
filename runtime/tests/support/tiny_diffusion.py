"""A tiny Stable Diffusion pipeline made on the CPU (32x32 images, one token per letter), saved where
``DiffusionPipeline.from_pretrained`` loads it: for the runtime's image tests, and run as a script
(``python tiny_diffusion.py OUT``) by the serving end-to-end test (tests/api/serving_e2e.rs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def make_tiny_pipeline(model: Path) -> Path:
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    out = model.parent / (model.name + "-tokenizer-files")
    out.mkdir(parents=True, exist_ok=True)
    # A byte-level BPE without merges: one token per character (a word's last one ending in </w>).
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["<|startoftext|>", "<|endoftext|>", "!", *letters, *(c + "</w>" for c in letters)]
    (out / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(vocab)}))
    (out / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(out / "vocab.json"), str(out / "merges.txt"), pad_token="!", model_max_length=16)
    torch.manual_seed(0)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=16,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=2,
        )
    )
    unet = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=2,
        norm_num_groups=4,
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=4,
        sample_size=32,
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    pipeline = StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipeline.save_pretrained(model)
    return model


if __name__ == "__main__":
    make_tiny_pipeline(Path(sys.argv[1]))
