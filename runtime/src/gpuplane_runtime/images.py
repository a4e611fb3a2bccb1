"""Batch image generation: a JSONL file of prompts through data-parallel replicas of a diffusion pipeline.

Run on every node of a job (``python -m gpuplane_runtime.images --input IN.jsonl --output OUT_DIR --model M``),
each replica takes its share of the lines as ``gpuplane_runtime.batch`` does (line ``i`` goes to replica
``i % replicas``), loads the pipeline with ``diffusers.DiffusionPipeline.from_pretrained``, generates in batches,
and saves each image as ``OUT_DIR/images/IIIIIIII.png`` (the line's index, zero-padded) before it appends
``{"index": i, "image": "images/IIIIIIII.png", "seed": s}`` to ``OUT_DIR/part-RRRRR-of-WWWWW.jsonl`` (or
``"error"`` for a line that is not a JSON object with a ``prompt`` string, a ``negative_prompt`` string if any and
a ``seed`` from 0 to 2**64-1 if any). An image's seed is its line's ``seed``, else ``--seed`` plus its index, and
each image has its own generator: an image is the same whichever replica or batch made it. Resuming and progress
(``GPUPLANE_PROGRESS_FILE``) are as in ``gpuplane_runtime.batch``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .batch import Refused, batch_arguments, check_batch_arguments, prompt_of, start_replica

PROGRAM = "gpuplane_runtime.images"
IMAGES_DIR = "images"
MAX_SEED = 2**64 - 1


@dataclass(frozen=True)
class ImagePrompt:
    """One line of the input: what to draw, what not to, and the seed it asked for (if any)."""

    prompt: str
    negative_prompt: str | None = None
    seed: int | None = None


def image_prompt_of(record: Any, index: int) -> ImagePrompt:
    prompt = prompt_of(record, index)
    negative = record.get("negative_prompt")
    if negative is not None and not isinstance(negative, str):
        raise Refused(f'line {index + 1}: "negative_prompt" is not a string')
    seed = record.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED):
        raise Refused(f'line {index + 1}: "seed" is not an integer from 0 to 2**64-1')
    return ImagePrompt(prompt, negative, seed)


def image_name(index: int) -> str:
    """The image's path under the output directory, as its part file names it."""
    return f"{IMAGES_DIR}/{index:08d}.png"


def save_png(image: Any, path: Path) -> None:
    """The whole PNG under a temporary name, then renamed: a crash never leaves half an image under its name."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as out:
        image.save(out, format="PNG")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def one_line(err: BaseException) -> str:
    """An error as one line: its type, its message's first line, and its cause's (what a traceback would show)."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    said = f"{type(err).__name__}: {first}" if first else type(err).__name__
    cause = err.__cause__ or err.__context__
    return f"{said} (from {one_line(cause)})" if cause is not None else said


def main(argv: list[str] | None = None) -> int:
    parser = batch_arguments(f"python -m {PROGRAM}", __doc__)
    parser.add_argument("--num-inference-steps", type=int, default=30)
    parser.add_argument("--height", type=int, help="pixels (default: the pipeline's)")
    parser.add_argument("--width", type=int, help="pixels (default: the pipeline's)")
    parser.add_argument("--guidance-scale", type=float, help="classifier-free guidance (default: the pipeline's)")
    parser.add_argument(
        "--seed", type=int, default=0, help="an image's seed is this plus its index, unless its line has one"
    )
    args = parser.parse_args(argv)
    check_batch_arguments(parser, args)
    if args.num_inference_steps < 1:
        parser.error("--num-inference-steps is at least 1")
    if any(v is not None and (v < 8 or v % 8) for v in (args.height, args.width)):
        parser.error("--height and --width are multiples of 8 (the latents' scale)")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error("--seed is from 0 to 2**64-1")

    try:
        from diffusers import DiffusionPipeline
    except ImportError as err:
        raise SystemExit(
            f"{PROGRAM}: diffusers is not installed ({one_line(err)}); "
            "install gpuplane-runtime[diffusion] or runtime/requirements-diffusion.txt"
        ) from None
    import torch

    replica = start_replica(PROGRAM, args.input, args.output, image_prompt_of)
    if torch.cuda.is_available():
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    else:
        device, dtype = "cpu", torch.float32
    try:
        pipeline = DiffusionPipeline.from_pretrained(args.model, torch_dtype=dtype)  # type: ignore[no-untyped-call]
        pipeline = pipeline.to(device)
    except Exception as err:
        raise SystemExit(f"{PROGRAM}: cannot load a diffusion pipeline from {args.model}: {one_line(err)}") from None
    pipeline.set_progress_bar_config(disable=True)
    (args.output / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"num_inference_steps": args.num_inference_steps, "output_type": "pil"}
    for name in ("height", "width", "guidance_scale"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)

    def answer(prompts: list[tuple[int, ImagePrompt]]) -> dict[int, dict[str, Any]]:
        seeds = [(args.seed + index) % (MAX_SEED + 1) if p.seed is None else p.seed for index, p in prompts]
        # One generator per image, on the CPU: an image's starting noise depends on its seed only (not on its
        # batch, its replica or the GPU's kind).
        generators = [torch.Generator("cpu").manual_seed(seed) for seed in seeds]
        call = dict(options)
        if any(p.negative_prompt is not None for _, p in prompts):
            # No negative prompt is the empty one (as the pipelines take None), so a batch that mixes them draws
            # each image as it would alone.
            call["negative_prompt"] = [p.negative_prompt or "" for _, p in prompts]
        with torch.inference_mode():
            images = pipeline([p.prompt for _, p in prompts], generator=generators, **call).images
        if len(images) != len(prompts):
            raise RuntimeError(f"{PROGRAM}: the pipeline made {len(images)} images for {len(prompts)} prompts")
        records: dict[int, dict[str, Any]] = {}
        for (index, _), seed, image in zip(prompts, seeds, images, strict=True):
            save_png(image, args.output / image_name(index))
            records[index] = {"image": image_name(index), "seed": seed}
        return records

    replica.run(args.batch_size, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
