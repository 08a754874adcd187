"""Model configs: which network, how it is adapted, how it is prompted and served."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from .common import SpecFieldError, SpecModel, omit_null


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


PretrainSkill = Literal["copy", "match", "attribute", "form", "select", "enter"]
PRETRAIN_SKILLS: tuple[str, ...] = ("copy", "match", "attribute", "form", "select", "enter")


class PretrainUntil(SpecModel):
    """Stop pretraining once held-out accuracy reaches a bar, with `steps` as the cap.

    Whether copying has appeared by a fixed step count is a matter of the draw (at 128
    wide and 2,500 steps one pretraining seed copied 54% of held-out values, another
    8%), so a fixed count gives SFT a different starting model per draw. The check runs
    on its own synthetic examples (another seed than the reported held-out set), so the
    reported accuracy is not the one the stop was chosen on. The learning-rate schedule
    still runs over `steps`.
    """

    accuracy: dict[PretrainSkill, float] = Field(
        ...,
        min_length=1,
        description="Skill -> the greedy exact-match share to reach, e.g. {copy: 0.5}; every "
        "listed skill must reach its bar at the same check.",
    )
    check_every: int = Field(250, ge=1, description="Optimizer steps between checks.")
    check_examples: int = Field(
        50, ge=10, description="Synthetic examples per listed skill in each check."
    )

    @field_validator("accuracy")
    @classmethod
    def _shares(cls, bars: dict[str, float]) -> dict[str, float]:
        for skill, bar in bars.items():
            if not 0 < bar <= 1:
                raise ValueError(f"{skill}: {bar} is not a share in (0, 1]; write e.g. 0.5.")
        return bars


class PretrainSpec(SpecModel):
    """Pretraining of the tiny model on synthetic pages before SFT (stage `pretrain`).

    As the paper's model arrives pretrained, the tiny one first learns generic skills on
    made-up pages and instructions that are not the suite's (their wording is checked
    against the suite's and MiniWoB++'s instructions): copying a value from the
    instruction into a field, matching an instruction's word to an element's name,
    choosing by an attribute (ordinal, role, caption), multi-step forms, drop-downs and
    the Enter key. One model is pretrained and shared by every training seed and arm.
    """

    steps: int = Field(1500, ge=1, description="Optimizer steps of pretraining.")
    batch_size: int = Field(32, ge=1, description="Samples per optimizer step.")
    learning_rate: float = Field(1e-3, gt=0, lt=1, description="Peak learning rate (cosine).")
    warmup_ratio: float = Field(0.03, ge=0, lt=1, description="Share of steps warming up.")
    samples: int = Field(
        20_000, ge=10, description="Size of the synthetic training set (one step each)."
    )
    skills: list[PretrainSkill] = Field(
        default_factory=lambda: list(PRETRAIN_SKILLS),
        min_length=1,
        description="Synthetic skills to train on (default: all): copy, match, attribute, "
        "form, select, enter.",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the synthetic data and of the model's initial weights (one "
        "pretrained model for all training seeds).",
    )
    max_seq_len: int = Field(512, ge=64, description="Longest training sequence in tokens.")
    eval_per_skill: int = Field(
        50, ge=1, description="Held-out synthetic examples per skill for the accuracy metrics."
    )
    until: PretrainUntil | None = Field(
        None,
        description="Stop early once these skill accuracies are reached on synthetic check "
        "examples (not the reported held-out set; `steps` is then the cap). null (the "
        "default): train all `steps`.",
    )

    @model_serializer(mode="wrap")
    def _omit_unset_until(self, handler: Any, info: SerializationInfo) -> Any:
        return omit_null(handler(self), "until")  # specs without it dump as before

    @model_validator(mode="after")
    def _until_skills_are_trained(self) -> PretrainSpec:
        if self.until is not None:
            extra = sorted(set(self.until.accuracy) - set(self.skills))
            if extra:
                raise SpecFieldError(
                    "until.accuracy",
                    f"{', '.join(extra)} not among the trained skills {self.skills}; "
                    "list only skills in model.pretrain.skills.",
                )
        return self

    @field_validator("skills")
    @classmethod
    def _distinct(cls, skills: list[str]) -> list[str]:
        if len(set(skills)) != len(skills):
            raise ValueError("a skill is listed twice; list each skill once.")
        return skills


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
    copy_head: bool = Field(
        False,
        description="Add a copy (pointer) head: the model may emit a token by pointing at an "
        "earlier position of its context, mixed with the vocabulary by a learned gate "
        "(qwen3 only; rmsweb/models/copy_head.py says why).",
    )
    pretrain: PretrainSpec | None = Field(
        None,
        description="Pretrain on synthetic web tasks before SFT (null: no pretraining, SFT "
        "starts from the random model).",
    )

    @model_serializer(mode="wrap")
    def _omit_unset_fields(self, handler: Any, info: SerializationInfo) -> Any:
        data = omit_null(handler(self), "pretrain")  # specs without it dump as before
        if isinstance(data, dict) and data.get("copy_head") is False:
            data.pop("copy_head")  # likewise
        return data

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
        if self.pretrain is not None and self.arch != "qwen3":
            raise SpecFieldError(
                "pretrain",
                f"pretrain is set but arch is {self.arch}; the synthetic pages are text "
                "only and pretraining is built for qwen3. Fix: set arch: qwen3 or "
                "pretrain: null.",
            )
        if self.copy_head and self.arch != "qwen3":
            raise SpecFieldError(
                "copy_head",
                f"copy_head is true but arch is {self.arch}; the copy head is built for the "
                "text model. Fix: set arch: qwen3 or copy_head: false.",
            )
        if self.copy_head and self.backend.kind != "hf":
            raise SpecFieldError(
                "copy_head",
                "copy_head is true but backend is vllm, which does not know the copy head's "
                "model class. Fix: set backend: {kind: hf} or copy_head: false.",
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
