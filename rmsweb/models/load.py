"""Load a policy model: a local folder (tiny or trained) or any Hugging Face id.

Errors a user can fix (a folder that is not a model, a missing path) become
UserError with what to do, not a traceback from deep inside transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError

DTYPES = {"auto": "auto", "bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any  # the text tokenizer (chat template, pad/eos)
    processor: Any  # image processor for VL models, else the tokenizer
    is_vl: bool


def resolve_device(device: str) -> str:
    """`auto` -> cuda or cpu; under torchrun a bare `cuda` becomes this rank's GPU.

    torchrun sets LOCAL_RANK per process; without it every rank would load its copy
    onto cuda:0. An explicit `cuda:<i>` and `cpu` are kept as given.
    """
    import os

    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        if torch.cuda.is_available():
            torch.cuda.set_device(device)
    return device


def _model_type(path: Path) -> str:
    config = path / "config.json"
    if not config.is_file():
        raise UserError(
            f"{path} is not a model folder (no config.json). Point model.name_or_path at a "
            "Hugging Face id or a folder written by `save_pretrained` (e.g. runs/sft/<exp>/model)."
        )
    try:
        return json.loads(config.read_text()).get("model_type", "")
    except json.JSONDecodeError as exc:
        raise UserError(f"{config} is not valid JSON: {exc}") from None


def is_vl_type(model_type: str) -> bool:
    return model_type.endswith("_vl") or "vl" in model_type.split("_")


def load_model(
    name_or_path: str | Path,
    dtype: str = "float32",
    device: str = "auto",
    trust_remote_code: bool = False,
    revision: str | None = None,
    adapter: str | Path | None = None,
) -> LoadedModel:
    """Load model + tokenizer (+ image processor for Qwen3-VL), optionally with a LoRA adapter."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from .copy_head import register

    register()  # tiny models with a copy head (model_type qwen3_copy) load like any other
    local = Path(name_or_path)
    looks_local = local.exists() or str(name_or_path).startswith((".", "/", "runs/"))
    if looks_local:
        if not local.exists():
            raise UserError(f"model folder {local} does not exist; run its stage first.")
        model_type = _model_type(local)
    else:
        try:
            model_type = AutoConfig.from_pretrained(
                str(name_or_path), revision=revision, trust_remote_code=trust_remote_code
            ).model_type
        except OSError as exc:
            raise UserError(f"cannot load model {name_or_path!r}: {exc}") from None
    device = resolve_device(device)
    kwargs: dict[str, Any] = {"dtype": DTYPES[dtype], "trust_remote_code": trust_remote_code}
    if revision:
        kwargs["revision"] = revision
    vl = is_vl_type(model_type)
    if vl:
        from transformers import AutoModelForImageTextToText

        from .processor import load_processor

        model = AutoModelForImageTextToText.from_pretrained(str(name_or_path), **kwargs)
        processor = load_processor(name_or_path)
        tokenizer = processor.tokenizer
    else:
        model = AutoModelForCausalLM.from_pretrained(str(name_or_path), **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path), revision=revision)
        processor = tokenizer
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.to(device)
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LoadedModel(model, tokenizer, processor, vl)
