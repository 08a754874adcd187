"""A tiny Qwen3 with a copy (pointer) head: it can emit a token by pointing into its context.

Why: the paper's policy arrives from pretraining able to copy a value from the
instruction into a field. A 2-layer, 128-wide model has to build that out of an
induction circuit, and on the capacity runs it copies a value for 2-3 characters
and then loses it ("KL5O2" typed as "KL5" in 8 of 8 samples), so almost no sample
of a failure state is right and RL has nothing to reinforce. The copy head makes
copying one learned lookup, as in pointer-generator networks (See et al., 2017):

    p(v | t) = g_t * softmax(lm_head(h_t))[v] + (1 - g_t) * sum_{j < t, x_{j+1} = v} a_tj

where a_tj is a softmax over earlier positions j of q(h_t) . k(h_j), and g_t =
sigmoid(w . [h_t; c_t] + b) chooses between generating and copying. c_t = sum_j a_tj
E[x_{j+1}] is the embedding of what the pointer would emit, as See et al.'s gate sees
the attention's context: a value ends in the action with `")` where the instruction
has `"`, `".` or a space, and a gate on h_t alone cannot tell that the pointer is about
to emit the instruction's ending (a gate on h_t alone, at 103a4a6: pretraining's copy
skill 0.14 after 2,750 steps and p(`")`) 0.51 by benchmarks/copy_pointer.py on its
step-2,500 checkpoint; that run was stopped, so no results file holds these). It points at a position
j and emits the token that followed it (x_{j+1}): at the end of a partly typed
value, the position to point at is the same token inside the instruction, whose
successor is the next piece of the value, so an exact token match is enough.

The forward returns log p as `logits`: log_softmax of them is log p again, so every
consumer of logits (the causal-LM loss, temperature sampling, log-probs in the RL
losses) works unchanged. Under generation the keys and token ids of the positions
already seen are kept on the cache object beside the attention cache.

Only tiny text models use it (model.copy_head in the spec); a real Qwen3-VL copies
by itself. The class is registered with the Auto classes as model_type qwen3_copy.
"""

from __future__ import annotations

from typing import Any

MODEL_TYPE = "qwen3_copy"
_TINY = 1e-30  # floor under the copy probability: log(0) has no gradient to give
_MEMORY = "_rmsweb_copy_memory"  # attribute on the generation cache: (keys, ids)

_classes: tuple[Any, Any] | None = None


def copy_classes() -> tuple[Any, Any]:
    """(config class, model class), built on first use so importing this stays light."""
    global _classes
    if _classes is None:
        _classes = _build_classes()
    return _classes


def register() -> None:
    """Let AutoConfig / AutoModelForCausalLM load folders whose model_type is qwen3_copy."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config_cls, model_cls = copy_classes()
    try:
        AutoConfig.register(MODEL_TYPE, config_cls)
        AutoModelForCausalLM.register(config_cls, model_cls)
    except ValueError:  # already registered in this process
        pass


def _build_classes() -> tuple[Any, Any]:
    import torch
    from torch import nn
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class Qwen3CopyConfig(Qwen3Config):
        model_type = MODEL_TYPE

    class Qwen3CopyForCausalLM(Qwen3ForCausalLM):
        config_class = Qwen3CopyConfig

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            width = config.hidden_size
            self.copy_query = nn.Linear(width, width, bias=False)
            self.copy_key = nn.Linear(width, width, bias=False)
            self.copy_gate = nn.Linear(2 * width, 1)  # sees [h_t; c_t]
            self.post_init()

        def forward(
            self,
            input_ids: Any = None,
            attention_mask: Any = None,
            position_ids: Any = None,
            cache: Any = None,
            inputs_embeds: Any = None,
            labels: Any = None,
            use_cache: bool | None = None,
            logits_to_keep: int | Any = 0,
            **kwargs: Any,
        ) -> Any:
            if input_ids is None:
                raise ValueError("the copy head points at token ids: pass input_ids")
            if "past_key_values" in kwargs:  # the older name of `cache`
                cache = kwargs.pop("past_key_values")
            outputs = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=use_cache,
                **kwargs,
            )
            if not isinstance(logits_to_keep, int):
                raise ValueError("the copy head keeps the last logits_to_keep positions only")
            hidden = outputs.last_hidden_state
            keys, ids = self._memory(outputs.cache, hidden, input_ids)
            queries = hidden if logits_to_keep == 0 else hidden[:, -logits_to_keep:]
            total, n_query = keys.shape[1], queries.shape[1]
            query_pos = torch.arange(total - n_query, total, device=keys.device)
            query_pos = query_pos[None].expand(queries.shape[0], -1)
            log_probs = self._mixture(queries, query_pos, keys, ids, attention_mask)
            loss = None
            if labels is not None:
                loss = self.loss_function(
                    logits=log_probs, labels=labels, vocab_size=self.config.vocab_size, **kwargs
                )
            return CausalLMOutputWithPast(
                loss=loss,
                logits=log_probs,
                cache=outputs.cache,
                hidden_states=outputs.hidden_states,
                attentions=outputs.attentions,
            )

        def _memory(self, cache: Any, hidden: Any, input_ids: Any) -> tuple[Any, Any]:
            """Keys and ids of every position so far: the cached ones, then these."""
            new_keys = self.copy_key(hidden)
            if cache is None:
                return new_keys, input_ids
            seen = cache.get_seq_length() - input_ids.shape[1]
            old = getattr(cache, _MEMORY, None)
            if old is None:
                if seen:
                    raise ValueError(
                        "a cache with earlier positions but no copy memory: the copy head "
                        "needs every position's key; run the prompt through this model"
                    )
                keys, ids = new_keys, input_ids
            else:
                keys = torch.cat([old[0], new_keys], dim=1)
                ids = torch.cat([old[1], input_ids], dim=1)
            setattr(cache, _MEMORY, (keys, ids))
            return keys, ids

        def completion_log_probs(
            self, hidden: Any, input_ids: Any, attention_mask: Any, keep: Any
        ) -> Any:
            """log p at the positions whose next token is labelled (`keep`, batch x (T - 1)),
            as `hidden[:, :-1][keep]` orders them: the SFT loss's completion-only path
            (train/sft/completion_loss.py), which skips the other positions' heads."""
            batch, length = keep.shape
            counts = keep.sum(dim=1)
            width = max(int(counts.max()), 1)
            # Each row's kept positions first, in order; the rest padded and dropped below.
            positions = torch.arange(length, device=keep.device).expand(batch, -1)
            order = torch.where(keep, positions, positions + length).sort(dim=1).values
            query_pos = order[:, :width].clamp(max=length - 1)
            queries = hidden.gather(1, query_pos[..., None].expand(-1, -1, hidden.shape[-1]))
            keys = self.copy_key(hidden)
            log_probs = self._mixture(queries, query_pos, keys, input_ids, attention_mask)
            valid = torch.arange(width, device=keep.device)[None, :] < counts[:, None]
            return log_probs[valid]

        def pointer_view(self, input_ids: Any) -> tuple[Any, Any, Any]:
            """(log p, pointer scores, gate) at every position of unpadded sequences: what
            benchmarks/copy_pointer.py reads (scores: batch x T x (T - 1), source j emitting
            x_{j+1}, masked where j + 1 > t; gate: batch x T x 1, the vocabulary's share)."""
            hidden = self.model(input_ids=input_ids).last_hidden_state
            positions = torch.arange(hidden.shape[1], device=hidden.device)
            positions = positions[None].expand(hidden.shape[0], -1)
            keys = self.copy_key(hidden)
            return self._mixture(hidden, positions, keys, input_ids, None, parts=True)

        def _mixture(
            self,
            queries: Any,
            query_pos: Any,
            keys: Any,
            ids: Any,
            attention_mask: Any,
            parts: bool = False,
        ) -> Any:
            """log p over the vocabulary for each query (its absolute position in query_pos,
            batch x queries) from the keys and ids of the whole sequence so far; with
            `parts`, also the masked pointer scores and the gate."""
            n_query = queries.shape[1]
            total = keys.shape[1]
            vocab_log = torch.log_softmax(self.lm_head(queries).float(), dim=-1)
            # Source j emits ids[j + 1]: the last position has no successor yet.
            src_keys = keys[:, :-1].float()
            successors = ids[:, 1:]
            scores = self.copy_query(queries).float() @ src_keys.transpose(1, 2)
            scores = scores / queries.shape[-1] ** 0.5
            src_pos = torch.arange(total - 1, device=keys.device)
            allowed = src_pos[None, None, :] < query_pos[:, :, None]  # successor j + 1 <= t
            if attention_mask is not None and attention_mask.dim() == 2:
                real = attention_mask[:, -total:].bool()
                allowed = allowed & (real[:, :-1] & real[:, 1:])[:, None, :]
            scores = scores.masked_fill(~allowed, -1e9)
            pointer = torch.softmax(scores, dim=-1) * allowed
            copy = torch.zeros_like(vocab_log).scatter_add_(
                -1, successors[:, None, :].expand(-1, n_query, -1), pointer
            )
            emitted = self.get_input_embeddings()(successors).float()
            context = pointer @ emitted  # c_t: the embedding of what the pointer would emit
            gate_in = torch.cat([queries.float(), context], dim=-1)
            gate = torch.sigmoid(self.copy_gate(gate_in.to(queries.dtype)).float())
            can_copy = allowed.any(dim=-1, keepdim=True)
            gate = torch.where(can_copy, gate, torch.ones_like(gate))
            log_probs = torch.logaddexp(
                torch.log(gate.clamp_min(_TINY)) + vocab_log,
                torch.log((1 - gate).clamp_min(_TINY)) + torch.log(copy.clamp_min(_TINY)),
            )
            return (log_probs, scores, gate) if parts else log_probs

    return Qwen3CopyConfig, Qwen3CopyForCausalLM
