"""Hints for the exercises that build a model piece by piece (03.4, 04.4, 04.5, 05.3, 09.3-09.5).

Each hint recomputes the output a usual mistake gives (a missing causal mask, the scaling by the
model's width instead of the head's, post-norm where the block is pre-norm...) and, when the
student's output is that one, names the mistake. Like the other hints they run only after an
output was found wrong, and a hint that cannot tell says nothing.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["encode_word_hint", "sinusoidal_hint", "multi_head_attention_hint", "encoder_block_hint",
           "cached_attention_step_hint", "perplexity_and_bits_hint", "gpt_forward_hint"]


def _same(received, candidate, atol=1e-6) -> bool:
    try:
        received, candidate = np.asarray(received, dtype="float64"), np.asarray(candidate, dtype="float64")
    except (TypeError, ValueError):
        return False
    return received.shape == candidate.shape and bool(np.allclose(received, candidate, atol=atol))


def _first_match(received, variants, atol=1e-6, where=None):
    """The message of the first ``(message, output)`` variant equal to ``received`` (at ``where`` only)."""
    for message, candidate in variants:
        if where is not None:
            try:
                received_array, candidate = np.asarray(received, dtype="float64"), np.asarray(candidate)
            except (TypeError, ValueError):
                return None
            if received_array.shape != candidate.shape:
                continue
            if _same(received_array[where], candidate[where], atol):
                return message
        elif _same(received, candidate, atol):
            return message
    return None


# --- 03.4: encoding by merge rank -------------------------------------------------------------

def _merged(symbols, pair):
    merged, index = [], 0
    while index < len(symbols):
        if index + 1 < len(symbols) and (symbols[index], symbols[index + 1]) == pair:
            merged.append(pair[0] + pair[1])
            index += 2
        else:
            merged.append(symbols[index])
            index += 1
    return merged


def encode_word_hint(arguments, received, expected):
    word, merges = arguments["word"], [tuple(merge.split(" ")) for merge in arguments["merges"]]
    received = [str(symbol) for symbol in received] if isinstance(received, (list, tuple, np.ndarray)) else received
    if isinstance(received, list) and "".join(received) != word:
        return f"the symbols must spell the word again: joined they give {''.join(received)!r:.60}, not {word!r}."
    leftmost = list(word)  # the leftmost pair that is a merge at all, whatever its rank
    while (found := next((i for i, pair in enumerate(zip(leftmost, leftmost[1:])) if pair in merges),
                         None)) is not None:
        leftmost = leftmost[:found] + [leftmost[found] + leftmost[found + 1]] + leftmost[found + 2:]
    if received == leftmost:
        return ("the leftmost pair that is a merge was merged first: merge the pair of lowest **rank** (the earliest "
                "merge learned) wherever it is in the word, then look again.")
    ranks = {pair: rank for rank, pair in enumerate(reversed(merges))}
    latest = list(word)
    while len(latest) > 1:
        rank, pair = min((ranks.get(pair, math.inf), pair) for pair in zip(latest, latest[1:]))
        if rank == math.inf:
            break
        latest = _merged(latest, pair)
    if received == latest:
        return "the last merge learned was applied first: the lowest rank, the first merge in the list, goes first."
    return None


# --- 04.4 and 04.5: positions and multi-head attention ----------------------------------------

def sinusoidal_hint(arguments, received, expected):
    length, depth = arguments["length"], arguments["depth"]
    positions = np.arange(length, dtype="float64")[:, None]
    pair_angles = positions / 10000 ** (np.arange(0, depth, 2) / depth)  # (T, E/2)
    column_angles = positions / 10000 ** (np.arange(depth // 2) / depth)  # the exponent 2i/d written i/d

    def interleaved(first, second):
        table = np.zeros((length, depth))
        table[:, 0::2], table[:, 1::2] = first, second
        return table

    return _first_match(received, [
        ("the sines fill the first half and the cosines the second: interleave them, sin in even columns 2i and "
         "cos in odd columns 2i + 1.", np.concatenate([np.sin(pair_angles), np.cos(pair_angles)], axis=1)),
        ("sin and cos are swapped: column 2i holds sin, column 2i + 1 holds cos.",
         interleaved(np.cos(pair_angles), np.sin(pair_angles))),
        ("the frequencies fall too slowly: the exponent is 2i/d where i counts pairs of columns (column 2i "
         "and 2i + 1 share one frequency), not i/d.", interleaved(np.sin(column_angles), np.cos(column_angles)))],
        atol=1e-5)


def _attention(query, value, weights, mask=None, scale_width=None, project=True):
    q = np.einsum("bte,enh->bnth", query, weights["query_kernel"]) + weights["query_bias"][:, None, :]
    k = np.einsum("bse,enh->bnsh", value, weights["key_kernel"]) + weights["key_bias"][:, None, :]
    v = np.einsum("bse,enh->bnsh", value, weights["value_kernel"]) + weights["value_bias"][:, None, :]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(scale_width or q.shape[-1])
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool)[:, None], scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    context = scores / scores.sum(axis=-1, keepdims=True) @ v  # (B, N, T, H)
    if not project:
        return context.transpose(0, 2, 1, 3).reshape(context.shape[0], context.shape[2], -1)
    return np.einsum("bnth,nhe->bte", context, weights["output_kernel"]) + weights["output_bias"]


def _attention_variants(query, value, weights, mask):
    width = np.shape(query)[-1]
    return [("the scores were divided by √E, the model's width: divide by √H, the width of one head "
             f"(√{np.shape(weights['query_kernel'])[-1]}).",
             _attention(query, value, weights, mask, scale_width=width)),
            ("the heads were concatenated but not projected: multiply by the output kernel W_O (N, H, E) and add "
             "its bias.", _attention(query, value, weights, mask, project=False)),
            ("the mask was ignored: where it is False, the score must become -inf before the softmax.",
             _attention(query, value, weights, None))]


def multi_head_attention_hint(arguments, received, expected):
    query, value = (np.asarray(arguments[name], dtype="float64") for name in ("query", "value"))
    variants = _attention_variants(query, value, arguments["weights"], arguments["mask"])
    return _first_match(received, variants if arguments["mask"] is not None else variants[:2], atol=1e-5)


# --- 05.3 and 09.5: whole blocks and a whole model --------------------------------------------

def _norm(x, parameters, epsilon):
    mean, variance = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return parameters["gamma"] * (x - mean) / np.sqrt(variance + epsilon) + parameters["beta"]


def _block(x, weights, mask, normalize_first, activation="relu", epsilon=1e-5, residual=True):
    def feedforward(values):
        ff = weights["feedforward"]
        hidden = values @ ff["hidden_kernel"] + ff["hidden_bias"]
        if activation == "relu":
            hidden = np.maximum(hidden, 0.0)
        else:
            hidden = 0.5 * hidden * (1 + np.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden ** 3)))
        return hidden @ ff["output_kernel"] + ff["output_bias"]

    def attend(values):
        return _attention(values, values, weights["attention"], mask)

    for sublayer, parameters in ((attend, weights["attention_norm"]), (feedforward, weights["feedforward_norm"])):
        kept = x if residual else 0.0
        x = kept + sublayer(_norm(x, parameters, epsilon)) if normalize_first else _norm(kept + sublayer(x), parameters,
                                                                                          epsilon)
    return x


def encoder_block_hint(arguments, received, expected):
    x, weights, mask, first = (arguments[name] for name in ("x", "weights", "mask", "normalize_first"))
    x = np.asarray(x, dtype="float64")
    key_mask = None if mask is None else np.broadcast_to(np.asarray(mask)[:, None, :],
                                                         (x.shape[0], x.shape[1], x.shape[1]))
    variants = [(("post-norm was computed where `normalize_first` is True: a pre-norm block normalises each "
                  "sub-layer's input, x + F(LayerNorm(x)).") if first else
                 ("pre-norm was computed where `normalize_first` is False: a post-norm block normalises after the "
                  "residual sum, LayerNorm(x + F(x))."), _block(x, weights, key_mask, not first)),
                ("the residual connections are missing: add each sub-layer's input to its output.",
                 _block(x, weights, key_mask, first, residual=False))]
    if mask is not None:
        variants.append(("padding took part in attention: build the attention mask (B, T, T) from `mask`, so no "
                         "query attends to a padding key.", _block(x, weights, None, first)))
    return _first_match(received, variants, atol=1e-5)


def _gpt(token_ids, weights, config, causal=True, positions_after=False, final_norm=True, normalize_first=None):
    token_ids = np.asarray(token_ids)
    length = token_ids.shape[1]
    x = np.asarray(weights["token_embedding"], dtype="float64")[token_ids]
    positions = np.asarray(weights["position_embedding"], dtype="float64")[:length]
    x = x if positions_after else x + positions
    mask = token_ids[:, None, :] != 0
    if causal:
        mask = mask & np.tril(np.ones((length, length), dtype=bool))
    mask = np.broadcast_to(mask, (len(token_ids), length, length))
    first = config["normalize_first"] if normalize_first is None else normalize_first
    for block in weights["blocks"]:
        x = _block(x, block, mask, first, config["activation"], config["layer_norm_epsilon"])
    x = x + positions if positions_after else x
    if "final_norm" in weights and final_norm:
        x = _norm(x, weights["final_norm"], config["layer_norm_epsilon"])
    return x @ np.asarray(weights["token_embedding"], dtype="float64").T + weights["output_bias"]


def gpt_forward_hint(arguments, received, expected):
    token_ids, weights, config = arguments["token_ids"], arguments["weights"], arguments["config"]
    real = np.asarray(token_ids) != 0
    first = config["normalize_first"]
    variants = [("position 0 sees the future: without the causal mask every position attends to later tokens. "
                 "Position t may attend to positions 0 … t only.", _gpt(token_ids, weights, config, causal=False)),
                ("the position embeddings were added after the blocks: add them to the token embeddings, before "
                 "the first block.", _gpt(token_ids, weights, config, positions_after=True)),
                (("post-norm blocks were computed where the config says pre-norm (`normalize_first`): "
                  "x + F(LayerNorm(x)).") if first else
                 "pre-norm blocks were computed where the config says post-norm: LayerNorm(x + F(x)).",
                 _gpt(token_ids, weights, config, normalize_first=not first))]
    if "final_norm" in weights:
        variants.append(("the final LayerNorm (weights['final_norm']) was skipped: apply it after the last block, "
                         "before the tied output.", _gpt(token_ids, weights, config, final_norm=False)))
    return _first_match(received, variants, atol=1e-4, where=real)


# --- 09.3 and 09.4: the key/value cache, perplexity and bits per character --------------------

def cached_attention_step_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 3:
        return None
    query, key, value = (np.asarray(arguments[name], dtype="float64") for name in ("query", "key", "value"))
    index = arguments["index"]
    keys, values = (np.array(arguments[name], dtype="float64") for name in ("key_cache", "value_cache"))
    if not _same(received[1], expected[1]) or not _same(received[2], expected[2]):
        if _same(received[1], arguments["key_cache"]):
            return f"the key cache came back unchanged: write `key` at position index = {index} first."
        return None

    def attend(upto, key_cache, value_cache):
        scores = query @ np.swapaxes(key_cache[:, :, :upto], -1, -2) / math.sqrt(query.shape[-1])
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return scores / scores.sum(axis=-1, keepdims=True) @ value_cache[:, :, :upto]

    new_keys, new_values = np.asarray(expected[1]), np.asarray(expected[2])
    variants = [("the output attended over the whole cache: positions after `index` hold stale values, not keys of "
                 "this sequence. Attend over positions 0 … index only.", attend(keys.shape[2], new_keys, new_values)),
                ("the output attended over positions 0 … index - 1: include position `index`, the token itself.",
                 attend(index, new_keys, new_values) if index > 0 else None),
                ("the output was computed before the new key and value were written: write them at `index`, "
                 "then attend.", attend(index + 1, keys, values))]
    return _first_match(received[0], [(message, output) for message, output in variants if output is not None],
                        atol=1e-5)


def perplexity_and_bits_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    scores = np.asarray(arguments["log_probabilities"], dtype="float64")
    real = np.asarray(arguments["targets"]) != 0
    characters = arguments["characters"]
    perplexity, bits = (float(np.asarray(value, dtype="float64")) for value in received)
    if not np.isclose(perplexity, expected[0], rtol=1e-5) and np.isclose(perplexity, math.exp(-scores.mean()),
                                                                      rtol=1e-5):
        return "padding was counted in the perplexity's mean: average over the real targets only (targets != 0)."
    if np.isclose(bits, -scores[real].sum() / characters, rtol=1e-5):
        return "the bits per character are in nats: divide the natural-log sum by ln 2."
    if np.isclose(bits, -scores[real].sum() / math.log(2) / real.sum(), rtol=1e-5):
        return "that is bits per token: divide by the number of characters, not of tokens."
    return None
