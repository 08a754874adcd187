"""Where a copy-head model's pointer points when it types a value (model.copy_head).

For held-out synthetic copy examples (the pretraining generator's copy skill, a seed no
run trains on) this teacher-forces the right action and reads, at each token of the
typed value:
- copyable: the token is the successor of some earlier position (the pointer can emit
  it at all; a value shown bare in the instruction tokenizes with a leading space that
  the quoted action does not have);
- pointed: the pointer's top source emits the token;
- gate: the share the vocabulary head gets (1 - gate goes to the pointer);
- p: the model's probability of the token.
The first token of a value (the pointer must choose among every `"` of the page) is
reported apart from the rest, and quoted values apart from bare ones; "close" is the
token that ends the value in the action (`")`), which the instruction never has after
the value (there the value ends with `"`, `".` or a space): the pointer's successor
there is wrong by construction, and the gate has to hand that token to the vocabulary.

    python benchmarks/copy_pointer.py --model runs/pretrain/EXP/model --exp EXP \
        --out benchmarks/results/copy_pointer_EXP.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT_SEED = 7_000_001  # not a pretraining seed (those are the spec's seed plus offsets)


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    return out.stdout.strip() or "unknown"


def value_span(completion: str, value: str) -> tuple[int, int]:
    """Character span of the typed value inside the action text."""
    start = completion.index(f'"{value}"') + 1
    return start, start + len(value)


def token_rows(model: Any, tokenizer: Any, prompt: str, completion: str, value: str) -> list:
    """One row per token of the value and one for the token that closes it (module doc)."""
    import torch

    text = prompt + completion
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = torch.tensor([enc["input_ids"]])
    offsets = enc["offset_mapping"]
    lo, hi = value_span(completion, value)
    lo, hi = lo + len(prompt), hi + len(prompt)
    with torch.no_grad():
        log_probs, scores, gate = (part[0] for part in model.pointer_view(ids))
    rows, seq = [], ids[0].tolist()
    for k, (start, end) in enumerate(offsets):
        closes = start == hi
        if k == 0 or not (lo <= start < hi or closes) or end <= start:
            continue
        t = k - 1  # position t predicts token k
        target = seq[k]
        successors = seq[1 : t + 1]  # sources j < t emit seq[j + 1]
        top = int(scores[t, :t].argmax()) if t else None
        rows.append(
            {
                "first": start == lo,
                "close": closes,
                "copyable": target in successors,
                "pointed": top is not None and seq[top + 1] == target,
                "gate": float(gate[t, 0]),
                "p": float(log_probs[t, target].exp()),
            }
        )
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"tokens": 0}

    def share(key: str) -> float:
        return round(sum(r[key] for r in rows) / n, 4)

    return {
        "tokens": n,
        "copyable": share("copyable"),
        "pointed": share("pointed"),
        "gate_mean": round(sum(r["gate"] for r in rows) / n, 4),
        "p_mean": round(sum(r["p"] for r in rows) / n, 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, type=Path, help="a copy-head model folder")
    ap.add_argument("--exp", required=True, help="experiment in params.yaml (its prompt)")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--examples", type=int, default=100, help="copy examples")
    ap.add_argument("--out", type=Path, help="write the summary here as JSON")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from rmsweb.agents.build import prompt_config
    from rmsweb.models.load import load_model
    from rmsweb.spec import load_from_params
    from rmsweb.train.pretrain.synthetic import generate, messages

    spec = load_from_params(args.params, args.exp)
    loaded = load_model(args.model, device="cpu")
    model, tokenizer = loaded.model, loaded.tokenizer
    if not hasattr(model, "pointer_view"):
        print(f"{args.model}: no copy head (model.copy_head is off)", file=sys.stderr)
        return 2
    prompt_cfg = prompt_config(spec.model)

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    examples = generate(args.examples, HELD_OUT_SEED, ("copy",))
    names = ("first", "rest", "close", "quoted", "bare")
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for ex in examples:
        value = ex.completion.split('"', 1)[1].rsplit('"', 1)[0]
        chat = messages(ex, prompt_cfg, count)
        prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        rows = token_rows(model, tokenizer, prompt, ex.completion, value)
        quoted = f'"{value}"' in ex.instruction
        for r in rows:
            if r["close"]:
                groups["close"].append(r)
                continue
            groups["first" if r["first"] else "rest"].append(r)
            groups["quoted" if quoted else "bare"].append(r)
    result = {
        "note": "the copy head on held-out synthetic copy values (benchmarks/copy_pointer.py)",
        "command": " ".join(["python", "benchmarks/copy_pointer.py", *sys.argv[1:]]),
        "commit": _commit(),
        "model": str(args.model),
        "examples": len(examples),
        "groups": {name: _summary(rows) for name, rows in groups.items()},
    }
    print(f"{'tokens':<8}{'n':>6}{'copyable':>10}{'pointed':>9}{'gate':>7}{'p':>7}")
    for name, s in result["groups"].items():
        if s["tokens"]:
            print(
                f"{name:<8}{s['tokens']:>6}{s['copyable']:>10.2f}{s['pointed']:>9.2f}"
                f"{s['gate_mean']:>7.2f}{s['p_mean']:>7.2f}"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
