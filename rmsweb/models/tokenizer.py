"""Train a byte-level BPE tokenizer offline on the suite's own texts (nothing downloaded).

The special tokens are Qwen's, so tiny models use the same chat markup as real
ones; `{%-` in Jinja eats the newline after the role, so it is emitted literally.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Qwen's chat and vision markup, in Qwen's order.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Always in the training corpus: the action syntax and chat words, so they are
# cheap tokens even when collection saw few of them.
SEED_TEXT = (
    'Action: click( fill( select( press("Enter") scroll("down") scroll("up") goto( go_back() '
    "answer( stop() click_xy( Thought: Task: Page: Previous actions: Lessons from earlier "
    "attempts: -> error: system user assistant button link textbox checkbox radio combobox "
    "option tab heading text listitem list menuitem dialog StaticText"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """A PreTrainedTokenizerFast with Qwen special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )

    def corpus() -> Iterable[str]:
        for _ in range(50):  # weight the seed text like a frequent document
            yield SEED_TEXT
        yield from texts

    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=1 << 20,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"  # generation pads on the left; training collators set their own
    return fast
