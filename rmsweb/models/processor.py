"""An image-only Qwen3-VL processor, and the loader that picks it.

Qwen3VLProcessor insists on a video processor, which needs torchvision; the
PyPI torchvision builds fail beside the CPU torch. Screenshots are images, so
this subclass has no video processor at all.

How it fits transformers 5.24's ProcessorMixin (processing_utils.py):
1. The sub-processors are the `__init__` parameters whose names contain a
   modality (`get_attributes`). Leaving `video_processor` out of our signature
   makes the processor {image_processor, tokenizer}: no class check for a
   video processor (that check is what raised `VIDEO_PROCESSOR_MAPPING has no
   attribute '_extra_content'` without torchvision), nothing saved or loaded
   for it, and `__call__` skips videos because `self.video_processor` is unset.
2. Qwen3VLProcessor.__init__ still passes three positional arguments up; the
   mixin zips them with our two attributes, so the trailing None is dropped.
3. `save_pretrained` writes processor_class "ImageOnlyQwen3VLProcessor". A
   process that has not called `register()` cannot resolve that name and
   AutoProcessor then silently returns the bare tokenizer (images dropped),
   so rmsweb loads processors through `load_processor`, never AutoProcessor
   directly, serves tiny VL models through `serve_main`, and tests check that
   an image adds prompt tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
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
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    @classmethod
    def _get_arguments_from_pretrained(
        cls, pretrained_model_name_or_path: Any, processor_dict: Any = None, **kwargs: Any
    ) -> list[Any]:
        # The PIL backend, whatever the folder names: AutoImageProcessor would pick the
        # torchvision one for real Qwen3-VL checkpoints where torchvision is installed,
        # and fail where it is not. Same resize and normalisation, up to interpolation
        # rounding.
        image_processor = Qwen2VLImageProcessorPil.from_pretrained(
            pretrained_model_name_or_path, **_hub_kwargs(kwargs)
        )
        tokenizer = cls._load_tokenizer_from_pretrained(
            "tokenizer", pretrained_model_name_or_path, **kwargs
        )
        return [image_processor, tokenizer]


def _hub_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    keep = ("revision", "cache_dir", "local_files_only", "token", "subfolder")
    return {k: v for k, v in kwargs.items() if k in keep}


def register() -> None:
    """Make AutoProcessor return the image-only processor for Qwen3-VL in this process."""
    AutoProcessor.register(Qwen3VLConfig, ImageOnlyQwen3VLProcessor, exist_ok=True)


def make_processor(tokenizer: Any, patch_size: int = 16) -> ImageOnlyQwen3VLProcessor:
    """The processor of a tiny VL model: small images, so tiny models stay fast."""
    merge = 2
    unit = patch_size * merge  # one merged visual token covers unit x unit pixels
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch_size,
        merge_size=merge,
        temporal_patch_size=2,
        # Pixel-area bounds: 4 to 64 merged tokens an image, whatever the screenshot size.
        size={"shortest_edge": unit * unit * 4, "longest_edge": unit * unit * 64},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return ImageOnlyQwen3VLProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )


def _local_model_type(path: Path) -> str | None:
    config = path / "config.json"
    if not config.is_file():
        return None
    return json.loads(config.read_text()).get("model_type")


def load_processor(name_or_path: str | Path, revision: str | None = None) -> Any:
    """The image-only processor for Qwen3-VL models, the tokenizer for text models.

    No trust_remote_code: the class lives here. Hub ids are resolved through their
    config (from the local cache when offline).
    """
    from transformers import AutoConfig, AutoTokenizer

    path = Path(name_or_path)
    model_type = _local_model_type(path) if path.is_dir() else None
    if model_type is None:
        model_type = AutoConfig.from_pretrained(str(name_or_path), revision=revision).model_type
    if model_type == "qwen3_vl":
        register()
        kwargs = {"revision": revision} if revision else {}
        return ImageOnlyQwen3VLProcessor.from_pretrained(str(name_or_path), **kwargs)
    return AutoTokenizer.from_pretrained(str(name_or_path), revision=revision)


def serve_main(argv: list[str] | None = None) -> None:
    """`transformers serve`, with the image-only processor registered first.

    A plain `transformers serve` process cannot resolve "ImageOnlyQwen3VLProcessor",
    falls back to the tokenizer and drops images without a word (measured: the
    same prompt_tokens with and without an image). The server runs in this
    process, so registering here is enough:
    `python -m rmsweb.models.processor serve PATH --device cpu --host 127.0.0.1 --port N`.
    """
    import sys

    from transformers.cli.transformers import main

    register()
    sys.argv = ["transformers", *(sys.argv[1:] if argv is None else argv)]
    main()


if __name__ == "__main__":
    # Through the package module, so the class registered is the one everyone imports.
    from rmsweb.models.processor import serve_main as _serve_main

    _serve_main()
