"""How much matmul work sharing a prompt saves: the ratio `reward_throughput.py` and `bon_scoring.py` results are
read against. It counts what each path computes, not how efficiently it runs: a baseline that runs its work less
efficiently (a padded batch too large for the CPU's caches, an underused GPU) can be beaten by more."""

from __future__ import annotations

LLAMA3_8B_SHAPE = {  # Llama-3-8B's published config: hidden, heads, key/value heads, head size, MLP size
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
}


def matmul_work_ratio(shape: dict, prompts: list[int], completions: list[list[int]]) -> float:
    """Multiply-adds of one decoder layer's matmuls (projections, MLP, attention scores and values) with every
    completion scored in full, over the same with each prompt run once and its completions on top. `shape`: a
    model config's fields; `prompts[n]`: prompt n's tokens; `completions[n]`: its completions' tokens. Norms,
    padding and tokenization are left out.

    >>> matmul_work_ratio(LLAMA3_8B_SHAPE, [100], [[50]])  # one completion: nothing to share
    1.0
    >>> round(matmul_work_ratio(LLAMA3_8B_SHAPE, [2900] * 8, [[300] * 8] * 8), 2)
    4.73
    """
    hidden, heads, kv = (shape[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads"))
    head = shape.get("head_dim") or hidden // heads
    per_token = 2 * hidden * heads * head + 2 * hidden * kv * head + 3 * hidden * shape["intermediate_size"]
    per_pair = 2 * heads * head  # one (query, key) pair: its score and its share of the value sum

    def work(context: int, new: int) -> int:
        return new * per_token + per_pair * (new * context + new * (new + 1) // 2)

    full = sum(work(0, p + c) for p, group in zip(prompts, completions) for c in group)
    shared = sum(work(0, p) + sum(work(p, c) for c in group) for p, group in zip(prompts, completions))
    return full / shared
