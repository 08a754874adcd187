"""Model configs: which network, how it is adapted, how it is prompted and served."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .common import SpecFieldError, SpecModel


class LoraSpec(SpecModel):
    """Low-rank adapters via PEFT. Off for tiny models (full fine-tune is cheaper)."""

    enabled: bool = Field(False, description="Train LoRA adapters instead of all weights.")
    rank: int = Field(16, ge=1, le=1024, description="LoRA rank; higher: better fit, more memory.")
    alpha: int = Field(32, ge=1, description="LoRA scaling numerator (scale = alpha / rank).")
    dropout: float = Field(0.05, ge=0, lt=1, description="Dropout on the LoRA branch.")
    targets: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="Module names that get adapters (PEFT target_modules).",
    )


class PromptSpec(SpecModel):
    """How observations become prompts (shared by teachers, SFT, mining, RL and eval)."""

    system: Literal["full", "compact", "none"] = Field(
        "full",
        description="System text: full action syntax, a one-line compact form (cheaper for tiny "
        "models), or none.",
    )
    history_steps: int = Field(
        3, ge=0, le=50, description="Previous steps (action and error) shown in the prompt."
    )
    max_prompt_tokens: int = Field(
        1024, ge=64, description="Token budget of a prompt; long observations are truncated."
    )
    max_new_tokens: int = Field(48, ge=4, description="Generation limit of one step.")
    thoughts: bool = Field(
        False, description="Ask for a `Thought:` line before the action (and train on it)."
    )
    screenshot: bool = Field(
        False, description="Put the screenshot into the prompt (VL models only)."
    )


class HFBackend(SpecModel):
    """Roll out checkpoints with transformers `generate` (CPU or GPU)."""

    kind: Literal["hf"] = "hf"
    batch_size: int = Field(16, ge=1, description="Prompts per generate call.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Device for generation; auto picks CUDA when available."
    )


class VLLMBackend(SpecModel):
    """Roll out checkpoints with vLLM's offline engine (GPU extra)."""

    kind: Literal["vllm"] = "vllm"
    gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, description="Share of GPU memory vLLM may take."
    )
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per engine.")
    max_model_len: int = Field(16384, ge=512, description="Context length of the engine.")


BackendSpec = Annotated[HFBackend | VLLMBackend, Field(discriminator="kind")]


class _ModelBase(SpecModel):
    lora: LoraSpec = Field(default_factory=LoraSpec, description="LoRA adapters.")
    prompt: PromptSpec = Field(default_factory=PromptSpec, description="Prompt construction.")
    backend: BackendSpec = Field(
        default_factory=HFBackend, description="Rollout backend for this model's checkpoints."
    )


class TinyModel(_ModelBase):
    """A tiny random Qwen3 (text) or Qwen3-VL model built offline by the `model` stage.

    The tokenizer is trained with `tokenizers` on texts of the suite itself (the scripted
    experts' episodes on train seeds), not on an arm's collected data, so every arm of a
    study starts from the same model; nothing is downloaded.
    """

    kind: Literal["tiny"] = "tiny"
    arch: Literal["qwen3", "qwen3_vl"] = Field(
        "qwen3", description="qwen3: text only; qwen3_vl: text + image."
    )
    vocab_size: int = Field(1536, ge=300, le=65536, description="BPE vocabulary size.")
    corpus_seeds_per_task: int = Field(
        50,
        ge=1,
        description="Train seeds per task whose expert episodes the tokenizer is trained on "
        "(tasks without an expert contribute their start page).",
    )
    hidden_size: int = Field(64, ge=16, description="Width of the transformer.")
    num_layers: int = Field(2, ge=1, description="Decoder layers.")
    num_heads: int = Field(4, ge=1, description="Attention heads.")
    num_kv_heads: int = Field(2, ge=1, description="Key/value heads (grouped-query attention).")
    head_dim: int = Field(16, ge=4, description="Width of one attention head.")
    intermediate_size: int = Field(192, ge=16, description="FFN width.")
    max_position_embeddings: int = Field(2048, ge=128, description="Longest sequence.")
    vision_depth: int = Field(2, ge=1, description="Vision tower blocks (qwen3_vl only).")
    vision_hidden_size: int = Field(32, ge=8, description="Vision tower width (qwen3_vl only).")
    patch_size: int = Field(16, ge=2, description="Vision patch size in px (qwen3_vl only).")

    @model_validator(mode="after")
    def _shapes(self) -> TinyModel:
        if self.num_heads % self.num_kv_heads:
            raise SpecFieldError(
                "num_kv_heads",
                f"num_heads ({self.num_heads}) is not a multiple of num_kv_heads "
                f"({self.num_kv_heads}); grouped-query attention shares each KV head "
                "between a whole number of query heads. Fix: pick a divisor of num_heads.",
            )
        if self.arch == "qwen3_vl" and self.head_dim % 2:
            raise SpecFieldError(
                "head_dim",
                f"head_dim ({self.head_dim}) must be even for Qwen3-VL's multimodal rotary "
                "embedding. Fix: use an even head_dim.",
            )
        if self.prompt.screenshot and self.arch != "qwen3_vl":
            raise SpecFieldError(
                "prompt.screenshot",
                "prompt.screenshot is true but arch is qwen3 (text only); the model cannot "
                "see images. Fix: set arch: qwen3_vl or prompt.screenshot: false.",
            )
        return self


class PretrainedModel(_ModelBase):
    """Any Hugging Face id or local folder, e.g. Qwen/Qwen3-VL-8B-Instruct."""

    kind: Literal["pretrained"] = "pretrained"
    name_or_path: str = Field(
        ..., min_length=1, description="Hugging Face id or local path of the base model."
    )
    revision: str | None = Field(None, description="Git revision of the hub model (pin it).")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Weights dtype for training and rollouts."
    )
    trust_remote_code: bool = Field(False, description="Allow code shipped with the model.")
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2"] = Field(
        "sdpa", description="Attention kernel."
    )


ModelSpec = Annotated[TinyModel | PretrainedModel, Field(discriminator="kind")]
