"""An image-only Qwen3-VL processor.

Qwen3VLProcessor insists on a video processor, which needs torchvision; the
PyPI torchvision builds fail beside the CPU torch. Screenshots are images, so
this subclass drops the video processor. It is registered with AutoProcessor
in-process (`register()`), and rmsweb's loader picks it for Qwen3-VL folders,
so no `trust_remote_code` is needed.
"""

from __future__ import annotations

from typing import Any

from transformers import AutoProcessor, Qwen3VLConfig
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor


class ImageOnlyQwen3VLProcessor(Qwen3VLProcessor):
    """Qwen3VLProcessor without a video processor (no torchvision needed)."""

    def __init__(
        self,
        image_processor: Any = None,
        tokenizer: Any = None,
        video_processor: Any = None,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


def register() -> None:
    AutoProcessor.register(Qwen3VLConfig, ImageOnlyQwen3VLProcessor, exist_ok=True)


def make_processor(tokenizer: Any, patch_size: int = 16) -> ImageOnlyQwen3VLProcessor:
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch_size,
        merge_size=2,
        temporal_patch_size=2,
        # Small screenshots keep tiny VL models fast: at most 64 merged tokens.
        size={
            "shortest_edge": (patch_size * 2) ** 2 * 4,
            "longest_edge": (patch_size * 2) ** 2 * 64,
        },
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return ImageOnlyQwen3VLProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )
