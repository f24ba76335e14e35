"""The grader's references and case generators: the answers, and where the cases come from.

:data:`REGISTRY` holds the grader's half of every exercise (:class:`Registration`): its case
generator, its reference and the course package's own implementation of it, if any. Only the
grader uses this module, and **no student's install holds it**: it ships in the grader's own
distribution, which students never install, and the grading sandbox mounts a copy of the grader
over it in which this module is one line that raises ``ImportError``. The references are written
here independently of the package's own implementations, which notebooks import: a wrapper
around a function a student can reach is never the reference itself.

Students' instant checks use the public cases (seed 0) stored with their expected outputs in
``transformer_course/exercises/public_cases.json``, which :func:`write_public_cases` writes from
this module (a test keeps it current).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from transformer_course.decoding import NextTokenTable
from transformer_course.exercises import values as exercise_values
from transformer_course.exercises.hints import equal_at
from transformer_course.exercises.values import encode

__all__ = [
    "Registration",
    "REGISTRY",
    "cases",
    "expected",
    "answer",
    "public_cases",
    "write_public_cases",
    "PUBLIC_CASES",
]

# The course package's file of public cases (students' checks read it), wherever that package is installed.
PUBLIC_CASES = Path(exercise_values.__file__).resolve().parent / "public_cases.json"


# --- 01: the reversal task ------------------------------------------------------------------


def _one_hot_cases(rng):
    return [
        ("the notes' example [2, 8, 1, 6], 10 features", {"sequence": [2, 8, 1, 6], "n_features": 10}),
        (
            "a batch of 3 sequences of length 5, 7 features",
            {"sequence": rng.integers(0, 7, size=(3, 5)), "n_features": 7},
        ),
        ("a single symbol 0, 1 feature", {"sequence": [0], "n_features": 1}),
    ]


def _one_hot_encode_reference(sequence, n_features):
    return np.eye(n_features, dtype="float32")[np.asarray(sequence, dtype="int64")]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _lstm_step_reference(x, h, c, kernel, recurrent_kernel, bias, order=(0, 1, 2, 3), tanh_of_cell=True):
    """``order`` (the gates read from the kernel's blocks in another order) and ``tanh_of_cell`` make usual
    mistakes (:mod:`.usual_mistakes`)."""
    units = h.shape[-1]
    z = x @ kernel + h @ recurrent_kernel + bias  # (B, 4U): the gates i, f, candidate, o, in Keras' order
    gates = [z[:, index * units : (index + 1) * units] for index in order]
    c = _sigmoid(gates[1]) * c + _sigmoid(gates[0]) * np.tanh(gates[2])
    return _sigmoid(gates[3]) * (np.tanh(c) if tanh_of_cell else c), c


def _lstm_step_cases(rng):
    def case(batch, features, units):
        return {
            "x": rng.normal(size=(batch, features)),
            "h": rng.normal(0, 0.5, size=(batch, units)),
            "c": rng.normal(size=(batch, units)),
            "kernel": rng.normal(0, 0.5, size=(features, 4 * units)),
            "recurrent_kernel": rng.normal(0, 0.5, size=(units, 4 * units)),
            "bias": rng.normal(size=4 * units),
        }

    return [
        (
            "one step from zero states, 3 features, 2 units",
            {**case(1, 3, 2), "h": np.zeros((1, 2)), "c": np.zeros((1, 2))},
        ),
        ("a batch of 4, 5 features, 3 units", case(4, 5, 3)),
        ("random sizes", case(int(rng.integers(1, 5)), int(rng.integers(1, 8)), int(rng.integers(1, 6)))),
    ]


# --- 02: alignment scores -------------------------------------------------------------------


def _score_cases(rng, general: bool):
    cases = []
    for label, source_length, units in (("3 source steps, 4 units", 3, 4), ("7 source steps, 16 units", 7, 16)):
        arguments = {"query": rng.normal(size=units), "keys": rng.normal(size=(source_length, units))}
        if general:
            arguments["weight"] = rng.normal(size=(units, units))
        else:
            arguments.update(
                query_weight=rng.normal(size=(units, units)),
                keys_weight=rng.normal(size=(units, units)),
                v=rng.normal(size=units),
            )
        cases.append((label, arguments))
    return cases


def _luong_general_reference(query, keys, weight):
    return keys @ (weight @ query)  # score(h_t, h_s) = h_tᵀ W h_s for every source step s


def _bahdanau_reference(query, keys, query_weight, keys_weight, v):
    return np.tanh(query @ query_weight + keys @ keys_weight) @ v  # vᵀ tanh(W₁ q + W₂ k_s)


# --- 03: text to vectors --------------------------------------------------------------------


def _standardize(text):
    return text.lower().translate(str.maketrans("", "", string.punctuation))


def _vectorize_reference(text, vocabulary):
    index = {word: position for position, word in enumerate(vocabulary)}
    return np.array([index.get(word, 1) for word in _standardize(text).split()], dtype="int64")


_WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "film", "was", "good", "bad", "plot", "it"]


def _sentence(rng, words, count):
    """`count` words drawn from `words`, some capitalised, with punctuation a standardisation removes."""
    drawn = [str(word).capitalize() if rng.random() < 0.3 else str(word) for word in rng.choice(words, size=count)]
    return " ".join(word + ("," if rng.random() < 0.2 else "") for word in drawn) + str(rng.choice([".", "!", "?"]))


def _vectorize_cases(rng):
    known = [str(word) for word in rng.permutation(_WORDS)[: int(rng.integers(5, 9))]]
    vocabulary = ["", "[UNK]", *known]
    return [
        ("all words known", {"text": _sentence(rng, known, int(rng.integers(4, 8))), "vocabulary": vocabulary}),
        ("unknown words become 1", {"text": _sentence(rng, _WORDS, 10), "vocabulary": vocabulary}),
        ("an empty string", {"text": "", "vocabulary": vocabulary}),
    ]


def _merge_step_reference(words, counts):
    counts_of = {}
    for word, count in zip(words, counts):
        symbols = word.split(" ")
        for index in range(len(symbols) - 1):
            pair = (symbols[index], symbols[index + 1])
            counts_of[pair] = counts_of.get(pair, 0) + count
    best = sorted(counts_of.items(), key=lambda item: (-item[1], item[0]))[0][0]
    merged = []
    for word in words:
        symbols, index, out = word.split(" "), 0, []
        while index < len(symbols):
            if index + 1 < len(symbols) and symbols[index] == best[0] and symbols[index + 1] == best[1]:
                out.append(best[0] + best[1])
                index += 2
            else:
                out.append(symbols[index])
                index += 1
        merged.append(" ".join(out))
    return f"{best[0]} {best[1]}", merged


def _merge_step_cases(rng):
    letters = list("abcdelnorstw")
    random_words = [
        " ".join(rng.choice(letters[: int(rng.integers(3, 6))], size=int(rng.integers(2, 7))))
        for _ in range(int(rng.integers(4, 8)))
    ]
    return [
        (
            "Sennrich's corpus: a tie, 'e s' first",
            {"words": ["l o w", "l o w e r", "n e w e s t", "w i d e s t"], "counts": [5, 2, 6, 3]},
        ),
        (
            "a repeated symbol: left to right, and the pair twice in a row",
            {"words": ["a a a", "b a a", "a b", "a a a a"], "counts": [int(rng.integers(2, 5)), 1, 1, 1]},
        ),
        (
            "symbols of several letters",
            {"words": ["b c", "ab c", "c ab c", "b cb"], "counts": [int(rng.integers(3, 6)), 1, 1, 1]},
        ),
        (
            "random words and counts",
            {"words": random_words, "counts": [int(c) for c in rng.integers(1, 10, size=len(random_words))]},
        ),
        _merge_tie_case(rng),
    ]


def _merge_tie_case(rng):
    """A tie that the tie rule decides: the first pair seen while counting is not the smallest as a tuple.

    Two words of equal count each hold one pair; the word holding the larger pair comes first, so a
    solution that keeps the first pair it counted picks the wrong one. A third word holds a pair
    seen less often.
    """
    small, large, other = (str(symbol) for symbol in rng.choice(list("abcdefghij"), size=3, replace=False))
    small, large = sorted((small, large))
    count = int(rng.integers(2, 9))
    words = [f"{large} {other}", f"{small} {other}", f"{other} {other}"]
    return (
        "a tie the tie rule decides: the first pair counted is not the smallest",
        {"words": words, "counts": [count, count, int(rng.integers(1, count))]},
    )


def _merge_word(symbols, pair):
    """``symbols`` with every occurrence of ``pair`` merged, left to right."""
    merged, index = [], 0
    while index < len(symbols):
        if index + 1 < len(symbols) and (symbols[index], symbols[index + 1]) == pair:
            merged.append(pair[0] + pair[1])
            index += 2
        else:
            merged.append(symbols[index])
            index += 1
    return merged


def _encode_word_reference(word, merges, leftmost=False, at_most=None):
    """``leftmost`` (the leftmost pair that is a merge at all, whatever its rank, one occurrence at a time) and
    ``at_most`` (how many merges are applied) make usual mistakes (:mod:`.usual_mistakes`)."""
    ranks = {tuple(merge.split(" ")): rank for rank, merge in enumerate(merges)}
    symbols, applied = list(word), 0
    while len(symbols) > 1 and (at_most is None or applied < at_most):
        if leftmost:
            index = next((i for i, pair in enumerate(zip(symbols, symbols[1:])) if pair in ranks), None)
            if index is None:
                break
            symbols = symbols[:index] + [symbols[index] + symbols[index + 1]] + symbols[index + 2 :]
        else:
            rank, pair = min((ranks.get(pair, math.inf), pair) for pair in zip(symbols, symbols[1:]))
            if rank == math.inf:
                break
            symbols = _merge_word(symbols, pair)
        applied += 1
    return symbols


def _encode_left_to_right(word, merges):
    """A usual mistake: merge the leftmost pair that is a merge at all, whatever its rank."""
    return _encode_word_reference(word, merges, leftmost=True)


def _encode_last_rank_first(word, merges):
    """A usual mistake: the highest rank (the last merge learned) first."""
    return _encode_word_reference(word, list(reversed(merges)))


def _learned_merges(words, counts, number):
    """The first ``number`` merges byte-pair encoding learns from ``words`` (as symbols) and their counts."""
    merges = []
    for _ in range(number):
        if not any(" " in word for word in words):
            break
        pair, words = _merge_step_reference(words, counts)
        merges.append(pair)
    return merges


def _encode_word_cases(rng):
    sennrich = _learned_merges(["l o w", "l o w e r", "n e w e s t", "w i d e s t"], [5, 2, 6, 3], 10)
    letters = list("abcdelnorst")
    corpus = ["".join(rng.choice(letters[:6], size=int(rng.integers(3, 7)))) for _ in range(8)]
    merges = _learned_merges(
        [" ".join(word) for word in corpus], [int(c) for c in rng.integers(1, 9, size=len(corpus))], 12
    )
    words = ["".join(rng.choice(letters[:6], size=int(rng.integers(5, 10)))) for _ in range(200)]

    def telling(word):  # a word on which both usual mistakes go wrong
        right = _encode_word_reference(word, merges)
        return right != _encode_left_to_right(word, merges) and right != _encode_last_rank_first(word, merges)

    told = next((word for word in words if telling(word)), words[0])
    return [
        ("Sennrich's corpus, 10 merges: 'lowest'", {"word": "lowest", "merges": sennrich}),
        ("Sennrich's corpus, 10 merges: 'newer'", {"word": "newer", "merges": sennrich}),
        ("a word of letters no merge joins", {"word": "xyz", "merges": sennrich}),
        ("a random corpus's 12 merges, a word from it", {"word": corpus[0], "merges": merges}),
        ("a random corpus's 12 merges, a new word where the rank decides", {"word": told, "merges": merges}),
    ]


def _skipgram_pairs_reference(token_ids, window):
    pairs = []
    for centre, centre_id in enumerate(token_ids):
        for context, context_id in enumerate(token_ids):
            if context != centre and abs(context - centre) <= window:
                pairs.append((centre_id, context_id))
    return pairs


def _skipgram_pairs_cases(rng):
    return [
        ("the notes' five words, window 2", {"token_ids": [2, 3, 5, 1, 4], "window": 2}),
        ("a window wider than the sentence", {"token_ids": [7, 8, 9], "window": 5}),
        ("one word: no pairs", {"token_ids": [4], "window": 1}),
        ("repeated ids, window 1", {"token_ids": [3, 3, 6, 3], "window": 1}),
        (
            "random ids and window",
            {
                "token_ids": [int(i) for i in rng.integers(1, 50, int(rng.integers(4, 12)))],
                "window": int(rng.integers(1, 4)),
            },
        ),
    ]


# --- 04: attention --------------------------------------------------------------------------


def _attention_reference(query, key, value, mask=None):
    scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    peak = np.max(scores, axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    weights = np.exp(scores - peak)
    total = weights.sum(-1, keepdims=True)
    weights = np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)
    return weights @ value, weights


def _attention_cases(rng):
    batch, heads, length, width = 2, 3, 5, 4
    q, k, v = (rng.normal(size=(batch, heads, length, width)) for _ in range(3))
    padding = np.array([[True] * 5, [True, True, True, False, False]])[:, None, None, :]  # (B, 1, 1, S)
    causal = np.tril(np.ones((length, length), dtype=bool))
    blocked = np.broadcast_to(causal, (batch, 1, length, length)).copy()
    blocked[:, :, 2] = False  # query 2 may attend to nothing
    return [
        ("no mask", {"query": q, "key": k, "value": v, "mask": None}),
        ("a padding mask on the keys", {"query": q, "key": k, "value": v, "mask": padding}),
        ("padding AND causal", {"query": q, "key": k, "value": v, "mask": padding & causal}),
        ("cross-attention: 5 queries, 3 keys", {"query": q, "key": k[:, :, :3], "value": v[:, :, :3], "mask": None}),
        (
            "a query with every key masked: zero weights, zero output",
            {"query": q, "key": k, "value": v, "mask": blocked},
        ),
    ]


def _split_heads_reference(x, num_heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(0, 2, 1, 3)


def _merge_heads_reference(x):
    batch, heads, length, head_width = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_width)


def _split_cases(rng):
    return [
        ("B=2, T=3, E=8 into 2 heads", {"x": rng.normal(size=(2, 3, 8)), "num_heads": 2}),
        ("B=1, T=5, E=12 into 4 heads", {"x": np.arange(60.0).reshape(1, 5, 12), "num_heads": 4}),
    ]


def _merge_cases(rng):
    return [
        ("B=2, N=2, T=3, H=4", {"x": rng.normal(size=(2, 2, 3, 4))}),
        ("B=1, N=4, T=5, H=3", {"x": np.arange(60.0).reshape(1, 4, 5, 3)}),
    ]


def _sinusoidal_reference(length, depth):
    table = np.zeros((length, depth))
    for position in range(length):
        for i in range(depth // 2):
            angle = position / 10000 ** (2 * i / depth)
            table[position, 2 * i], table[position, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return table


def _sinusoidal_cases(rng):
    return [
        ("the notes' example: positions 0-3 in 128 dimensions", {"length": 4, "depth": 128}),
        ("one position, 2 dimensions", {"length": 1, "depth": 2}),
        ("random sizes", {"length": int(rng.integers(5, 30)), "depth": 2 * int(rng.integers(2, 12))}),
    ]


def _attention_weight_dict(rng, width, heads, head_width):
    """Keras' ``MultiHeadAttention`` weights as a dict: kernels (E, N, H) and (N, H, E), biases (N, H) and (E,)."""
    scale = 1 / math.sqrt(width)
    weights = {
        f"{name}_kernel": rng.normal(0, scale, size=(width, heads, head_width)) for name in ("query", "key", "value")
    }
    weights.update({f"{name}_bias": rng.normal(0, 0.1, size=(heads, head_width)) for name in ("query", "key", "value")})
    weights["output_kernel"] = rng.normal(0, 1 / math.sqrt(heads * head_width), size=(heads, head_width, width))
    weights["output_bias"] = rng.normal(0, 0.1, size=width)
    return weights


def _softmax_rows(scores):
    """Softmax over the last axis; a row whose every score is -inf gets zero weights."""
    peak = np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(peak), peak, 0.0))
    total = weights.sum(axis=-1, keepdims=True)
    return np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)


def _multi_head_attention_reference(
    query, value, weights, mask=None, scale_width=None, project=True, merge_unmoved=False
):
    """``scale_width``, ``project`` and ``merge_unmoved`` make the usual mistakes (:data:`MISTAKES`); the exercise
    passes none."""
    q = np.einsum("bte,enh->bnth", query, weights["query_kernel"]) + weights["query_bias"][None, :, None, :]
    k = np.einsum("bse,enh->bnsh", value, weights["key_kernel"]) + weights["key_bias"][None, :, None, :]
    v = np.einsum("bse,enh->bnsh", value, weights["value_kernel"]) + weights["value_bias"][None, :, None, :]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(scale_width or q.shape[-1])  # (B, N, T, S)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool)[:, None], scores, -np.inf)
    context = _softmax_rows(scores) @ v  # (B, N, T, H)
    if merge_unmoved:  # (B, N, T, H) flattened to (B, T, N·H) without moving the head axis first
        batch, heads, length, width = context.shape
        merged = context.reshape(batch, length, heads * width)
        return merged @ weights["output_kernel"].reshape(heads * width, -1) + weights["output_bias"]
    if not project:
        return context.transpose(0, 2, 1, 3).reshape(context.shape[0], context.shape[2], -1)
    return np.einsum("bnth,nhe->bte", context, weights["output_kernel"]) + weights["output_bias"]


def _multi_head_attention_cases(rng):
    def case(batch, length, source, width, heads, masked):
        arguments = {
            "query": rng.normal(size=(batch, length, width)),
            "value": rng.normal(size=(batch, source, width)),
            "weights": _attention_weight_dict(rng, width, heads, width // heads),
            "mask": None,
        }
        if masked:  # padding on the keys: every query keeps at least one key
            real = rng.integers(1, source + 1, size=batch)
            real[0] = source - 1
            arguments["mask"] = np.broadcast_to(
                np.arange(source)[None, None, :] < real[:, None, None], (batch, length, source)
            ).copy()
        return arguments

    return [
        ("self-attention, B=2, T=4, E=8, 2 heads, no mask", case(2, 4, 4, 8, 2, False)),
        ("cross-attention, T=3 queries, S=5 keys, E=12, 3 heads, padded keys", case(2, 3, 5, 12, 3, True)),
        (
            "random sizes, 4 heads, padded keys",
            case(
                int(rng.integers(1, 4)),
                int(rng.integers(2, 6)),
                int(rng.integers(2, 6)),
                4 * int(rng.integers(2, 4)),
                4,
                True,
            ),
        ),
    ]


# --- 05: the encoder block ------------------------------------------------------------------


def _self_attention_mask_reference(token_ids, causal):
    ids = np.asarray(token_ids)
    batch, length = ids.shape
    mask = np.zeros((batch, length, length), dtype=bool)
    for b in range(batch):
        for query in range(length):
            for key in range(length):
                both_real = ids[b, query] != 0 and ids[b, key] != 0
                mask[b, query, key] = both_real and (not causal or key <= query)
    return mask


def _self_attention_mask_cases(rng):
    def padded_batch(size, length):  # each row: 1 to `length` real tokens, then padding (id 0); the first row
        # at least 2, so that a causal mask and a full one differ in every batch (a mistake ignoring `causal` fails)
        ids = rng.integers(1, 50, size=(size, length)).astype("int32")
        for index, row in enumerate(ids):
            row[int(rng.integers(2 if index == 0 else 1, length + 1)) :] = 0
        return ids

    causal_first = bool(rng.integers(2))
    return [
        (
            "the lesson's batch, four words and two padding, causal",
            {"token_ids": np.array([[5, 7, 3, 9, 0, 0]], dtype="int32"), "causal": True},
        ),
        (
            "a padded batch, causal" if causal_first else "a padded batch, not causal",
            {"token_ids": padded_batch(int(rng.integers(2, 4)), int(rng.integers(3, 8))), "causal": causal_first},
        ),
        (
            "a padded batch, not causal" if causal_first else "a padded batch, causal",
            {"token_ids": padded_batch(int(rng.integers(2, 4)), int(rng.integers(3, 8))), "causal": not causal_first},
        ),
        (
            "one sequence without padding, causal",
            {"token_ids": rng.integers(1, 50, size=(1, int(rng.integers(2, 6)))).astype("int32"), "causal": True},
        ),
        ("one token, not causal", {"token_ids": rng.integers(1, 50, size=(1, 1)).astype("int32"), "causal": False}),
    ]


def _layer_norm_reference(x, gamma, beta, epsilon=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(variance + epsilon) + beta


def _layer_norm_cases(rng):
    return [
        ("B=2, T=3, E=4", {"x": rng.normal(3.0, 2.0, size=(2, 3, 4)), "gamma": np.ones(4), "beta": np.zeros(4)}),
        (
            "learned scale and shift",
            {"x": rng.normal(size=(1, 5, 6)), "gamma": rng.normal(size=6), "beta": rng.normal(size=6)},
        ),
    ]


def _feed_forward_reference(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def _feed_forward_cases(rng):
    width, hidden = 4, 6
    weights = {
        "w1": rng.normal(size=(width, hidden)),
        "b1": rng.normal(size=hidden),
        "w2": rng.normal(size=(hidden, width)),
        "b2": rng.normal(size=width),
    }
    return [
        ("B=2, T=3, E=4, F=6", {"x": rng.normal(size=(2, 3, width)), **weights}),
        ("one position", {"x": rng.normal(size=(1, 1, width)), **weights}),
    ]


def _norm_weights(rng, width):
    return {"gamma": 1 + rng.normal(0, 0.2, size=width), "beta": rng.normal(0, 0.2, size=width)}


def _block_weight_dict(rng, width, heads, hidden):
    """One Transformer block's weights as a dict of dicts (the layout of exercises 05.3 and 09.5)."""
    return {
        "attention": _attention_weight_dict(rng, width, heads, width // heads),
        "attention_norm": _norm_weights(rng, width),
        "feedforward": {
            "hidden_kernel": rng.normal(0, 1 / math.sqrt(width), size=(width, hidden)),
            "hidden_bias": rng.normal(0, 0.1, size=hidden),
            "output_kernel": rng.normal(0, 1 / math.sqrt(hidden), size=(hidden, width)),
            "output_bias": rng.normal(0, 0.1, size=width),
        },
        "feedforward_norm": _norm_weights(rng, width),
    }


def _activation(name):
    if name == "relu":
        return lambda x: np.maximum(x, 0.0)
    return lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))  # gelu_approximate


def _block_reference(
    x, weights, attention_mask, normalize_first, activation="relu", epsilon=1e-5, residual=True, norm_output=False
):
    """One Transformer block (self-attention, then the feed-forward network), post- or pre-norm.

    ``attention_mask`` is (B, T, T) or None; ``residual`` and ``norm_output`` make usual mistakes (:data:`MISTAKES`).
    """

    def norm(values, parameters):
        return _layer_norm_reference(values, parameters["gamma"], parameters["beta"], epsilon)

    def feedforward(values):
        ff = weights["feedforward"]
        return (
            _activation(activation)(values @ ff["hidden_kernel"] + ff["hidden_bias"]) @ ff["output_kernel"]
            + ff["output_bias"]
        )

    for sublayer, norm_weights in (
        (
            lambda values: _multi_head_attention_reference(values, values, weights["attention"], attention_mask),
            weights["attention_norm"],
        ),
        (feedforward, weights["feedforward_norm"]),
    ):
        if norm_output:  # x + LayerNorm(F(x)): the sub-layer's output normalised, not its input
            x = (x if residual else 0) + norm(sublayer(x), norm_weights)
        elif normalize_first:
            x = (x if residual else 0) + sublayer(norm(x, norm_weights))
        else:
            x = norm((x if residual else 0) + sublayer(x), norm_weights)
    return x


def _key_mask(x, mask):
    """A padding mask (B, T), or None, as the attention mask (B, T, T) that keeps every query off padding keys."""
    if mask is None:
        return None
    return np.broadcast_to(np.asarray(mask, dtype=bool)[:, None, :], (x.shape[0], x.shape[1], x.shape[1]))


def _encoder_block_reference(x, weights, mask=None, normalize_first=False, residual=True, norm_output=False):
    """``residual`` and ``norm_output`` make usual mistakes (:mod:`.usual_mistakes`)."""
    x = np.asarray(x, dtype="float64")
    return _block_reference(x, weights, _key_mask(x, mask), normalize_first, residual=residual, norm_output=norm_output)


def _encoder_block_cases(rng):
    def case(batch, length, width, heads, normalize_first, padded):
        mask = None
        if padded:
            mask = np.arange(length)[None, :] < rng.integers(1, length + 1, size=batch)[:, None]
            mask[0] = np.arange(length) < length - 2
        return {
            "x": rng.normal(size=(batch, length, width)),
            "weights": _block_weight_dict(rng, width, heads, 2 * width),
            "mask": mask,
            "normalize_first": normalize_first,
        }

    return [
        ("post-norm, B=2, T=3, E=4, 2 heads, no padding", case(2, 3, 4, 2, False, False)),
        ("post-norm, padded reviews", case(2, 5, 8, 2, False, True)),
        ("pre-norm, padded reviews", case(3, 5, 8, 4, True, True)),
        (
            "random sizes, pre- or post-norm, padded",
            case(int(rng.integers(1, 4)), int(rng.integers(3, 7)), 6, 3, bool(rng.integers(2)), True),
        ),
    ]


# --- 06: pooling ----------------------------------------------------------------------------


def _masked_max_reference(values, mask):
    pooled = np.max(np.where(mask[..., None], values, -np.inf), axis=1)
    return np.where(mask.any(axis=1)[:, None], pooled, 0.0)


def _masked_mean_reference(values, mask):
    counts = mask.sum(axis=1, keepdims=True)
    total = np.where(mask[..., None], values, 0.0).sum(axis=1)
    return np.where(counts > 0, total / np.maximum(counts, 1), 0.0)


def _pooling_cases(rng):
    values = rng.normal(size=(3, 5, 4))
    values[1, 3:] = 100.0  # padding that would win an unmasked max
    mask = np.array([[True] * 5, [True, True, True, False, False], [False] * 5])
    return [
        ("every token real", {"values": values[:1], "mask": mask[:1]}),
        ("padding with large values", {"values": values[:2], "mask": mask[:2]}),
        ("a review with no real token", {"values": values, "mask": mask}),
    ]


# --- 07: decoding ---------------------------------------------------------------------------


def _causal_reference(length):
    return np.tril(np.ones((length, length), dtype=bool))


def _causal_cases(rng):
    lengths = (1, int(rng.integers(2, 6)), int(rng.integers(6, 12)))
    return [(f"length {length}", {"length": length}) for length in lengths]


def _greedy_cases(rng):
    vocabulary = 6
    table = rng.random((vocabulary, vocabulary))
    table[:, 0] = 0.0  # never padding
    table /= table.sum(axis=1, keepdims=True)
    ending = table.copy()
    ending[[1, 4, 5], 2] = 5.0  # from these ids, the end id 2 wins
    ending /= ending.sum(axis=1, keepdims=True)
    return [
        (
            "one sequence that reaches max_length",
            {
                "next_token_probabilities": NextTokenTable(table),
                "start_ids": np.array([1]),
                "end_id": 9,
                "max_length": 5,
            },
        ),
        (
            "three sequences that end at different steps",
            {
                "next_token_probabilities": NextTokenTable(ending),
                "start_ids": np.array([1, 3, 4]),
                "end_id": 2,
                "max_length": 6,
            },
        ),
    ]


def _greedy_reference(next_token_probabilities, start_ids, end_id, max_length):
    decoded = np.atleast_1d(np.asarray(start_ids, dtype="int64"))[:, None]
    finished = np.zeros(len(decoded), dtype=bool)
    for _ in range(max_length):
        next_ids = np.where(finished, 0, np.asarray(next_token_probabilities(decoded)).argmax(axis=-1))
        decoded = np.concatenate([decoded, next_ids[:, None]], axis=1)
        finished |= next_ids == end_id
        if finished.all():
            break
    return decoded


def _teacher_forcing_loss_reference(target_ids, probabilities):
    target_ids = np.asarray(target_ids, dtype="int64")
    inputs, labels = target_ids[:, :-1], target_ids[:, 1:]
    return inputs, labels, _masked_lm_loss_reference(probabilities, labels)  # the same masked mean, defined in 08


def _teacher_forcing_loss_cases(rng):
    def case(rows, length, vocabulary):
        target_ids = np.zeros((rows, length), dtype="int64")
        for row in range(rows):
            words = int(rng.integers(1, length - 1)) if row else length - 2  # the first row fills its length
            target_ids[row, : words + 2] = [1, *rng.integers(3, vocabulary, size=words), 2]  # [start] ... [end]
        values = rng.random((rows, length - 1, vocabulary)) ** 2 + 0.01
        return {"target_ids": target_ids, "probabilities": values / values.sum(axis=-1, keepdims=True)}

    return [
        ("one sentence, no padding", case(1, 5, 8)),
        ("3 sentences of different lengths", case(3, 7, 10)),
        ("random sizes", case(int(rng.integers(2, 6)), int(rng.integers(5, 10)), int(rng.integers(6, 20)))),
    ]


def _beam_step_reference(scores, log_probabilities, beam_width, end_id, step, alpha):
    scores, log_probabilities = np.asarray(scores, dtype="float64"), np.asarray(log_probabilities, dtype="float64")
    vocabulary = log_probabilities.shape[1]
    ranked = sorted(
        (
            (float(scores[beam] + log_probabilities[beam, token]), beam * vocabulary + token)
            for beam in range(len(scores))
            for token in range(vocabulary)
        ),
        key=lambda item: (-item[0], item[1]),
    )
    parents, tokens, kept, finished_parents, finished_scores = [], [], [], [], []
    for candidate, flat in ranked[: 2 * beam_width]:
        if not math.isfinite(candidate) or len(parents) == beam_width:
            break
        beam, token = divmod(flat, vocabulary)
        if token == end_id:
            finished_parents.append(beam)
            finished_scores.append(candidate / ((5 + step) / 6) ** alpha)
        else:
            parents.append(beam)
            tokens.append(token)
            kept.append(candidate)
    return (
        np.array(parents, dtype="int64"),
        np.array(tokens, dtype="int64"),
        np.array(kept, dtype="float64"),
        np.array(finished_parents, dtype="int64"),
        np.array(finished_scores, dtype="float64"),
    )


def _beam_step_cases(rng):
    def case(beams, vocabulary, beam_width, step, ending):
        scores = -np.sort(rng.random(beams) * step)  # summed log-probabilities so far, best first
        values = rng.random((beams, vocabulary)) ** 3 + 1e-3
        if ending:
            values[0, 2] = values[0].max() * 3  # the best beam most likely ends here
        return {
            "scores": scores,
            "log_probabilities": np.log(values / values.sum(axis=-1, keepdims=True)),
            "beam_width": beam_width,
            "end_id": 2,
            "step": step,
            "alpha": 0.6,
        }

    first = case(1, 6, 3, 1, False)  # step 1: one beam, the start id
    first["log_probabilities"][0, [0, 1, 3, 4]] = -np.inf  # four ids impossible: fewer than 3 extensions exist
    tied = {**case(3, 7, 3, 4, True), "alpha": 0.0}
    tied["scores"][1] = tied["scores"][0]  # beams 0 and 1 alike: every extension of one ties with the other's
    tied["log_probabilities"][1] = tied["log_probabilities"][0]
    return [
        ("the first step: one beam, width 3, four ids impossible (-inf): stop at -inf", first),
        ("4 beams of 8 ids; the best beam ends", case(4, 8, 4, 5, True)),
        ("3 beams, no length penalty (alpha = 0); beams 0 and 1 alike, so the tie rule decides", tied),
        (
            "random sizes, one ending",
            case(
                int(rng.integers(2, 5)),
                int(rng.integers(6, 12)),
                int(rng.integers(2, 5)),
                int(rng.integers(2, 9)),
                True,
            ),
        ),
    ]


def _warmup_cosine_reference(
    steps, peak, warmup_steps, decay_steps, final_fraction, first_step=1, floor=None, decay_from=None, warmup_end=None
):
    """``first_step`` (the warm-up's count at step 0), ``floor`` (the cosine's end, else ``final_fraction``),
    ``decay_from`` (where the cosine's progress starts) and ``warmup_end`` (the first step of the cosine) make usual
    mistakes (:mod:`.usual_mistakes`)."""
    floor = final_fraction if floor is None else floor
    decay_from = warmup_steps if decay_from is None else decay_from
    warmup_end = warmup_steps if warmup_end is None else warmup_end
    rates = []
    for step in np.asarray(steps).ravel():
        if step < warmup_end:
            rates.append(peak * (step + first_step) / warmup_steps)
        else:
            progress = min(max((step - decay_from) / (decay_steps - decay_from), 0.0), 1.0)
            rates.append(peak * (floor + (1 - floor) * (1 + math.cos(math.pi * progress)) / 2))
    return np.array(rates, dtype="float64").reshape(np.shape(steps))


def _warmup_cosine_cases(rng):
    warmup = int(rng.integers(3, 20))
    total = warmup + int(rng.integers(10, 100))
    return [
        (
            "10 warm-up steps of 100, every step",
            {"steps": np.arange(110), "peak": 1e-3, "warmup_steps": 10, "decay_steps": 100, "final_fraction": 0.05},
        ),
        (
            "no floor (final_fraction 0), a few steps",
            {
                "steps": np.array([0, 1, 4, 5, 6, 30, 60, 61]),
                "peak": 0.5,
                "warmup_steps": 5,
                "decay_steps": 60,
                "final_fraction": 0.0,
            },
        ),
        (
            "random settings",
            {
                "steps": np.arange(total + 5),
                "peak": float(rng.uniform(1e-4, 1e-2)),
                "warmup_steps": warmup,
                "decay_steps": total,
                "final_fraction": float(rng.uniform(0, 0.2)),
            },
        ),
    ]


def _adamw_step_reference(
    parameters,
    gradients,
    m,
    v,
    step,
    learning_rate,
    beta_1,
    beta_2,
    epsilon,
    weight_decay,
    decay="decoupled",
    corrected=True,
    epsilon_inside=False,
):
    """``decay`` ("decoupled"; "l2": through the gradient; "without rate": a factor 1 - λ; "after": on the updated
    parameters), ``corrected`` and ``epsilon_inside`` make usual mistakes (:mod:`.usual_mistakes`)."""
    parameters, gradients = np.asarray(parameters, dtype="float64"), np.asarray(gradients, dtype="float64")
    if decay == "l2":
        gradients = gradients + weight_decay * parameters
    m = beta_1 * np.asarray(m, dtype="float64") + (1 - beta_1) * gradients
    v = beta_2 * np.asarray(v, dtype="float64") + (1 - beta_2) * gradients**2
    factor = {"decoupled": 1 - learning_rate * weight_decay, "without rate": 1 - weight_decay}.get(decay, 1.0)
    decayed = parameters * factor  # decoupled: never through the moments
    scale = learning_rate * math.sqrt(1 - beta_2**step) / (1 - beta_1**step)  # Keras' form of the correction
    scale = scale if corrected else learning_rate
    updated = decayed - scale * m / (np.sqrt(v + epsilon) if epsilon_inside else np.sqrt(v) + epsilon)
    return updated * (1 - learning_rate * weight_decay) if decay == "after" else updated, m, v


def _adamw_step_cases(rng):
    def case(shape, step, weight_decay, fresh, epsilon=1e-7, gradient_scale=1.0, learning_rate=1e-2):
        moments = (
            (np.zeros(shape), np.zeros(shape))
            if fresh
            else (rng.normal(0, 0.1 * gradient_scale, size=shape), rng.random(shape) * 0.01 * gradient_scale**2)
        )
        return {
            "parameters": rng.normal(size=shape),
            "gradients": rng.normal(0, gradient_scale, size=shape),
            "m": moments[0],
            "v": moments[1],
            "step": step,
            "learning_rate": learning_rate,
            "beta_1": 0.9,
            "beta_2": 0.999,
            "epsilon": epsilon,
            "weight_decay": weight_decay,
        }

    return [
        ("the first step, fresh moments, no weight decay (Adam)", case((3,), 1, 0.0, True)),
        (
            "the first step, weight decay 0.1 and learning rate 0.1: where the decay goes shows",
            case((2, 3), 1, 0.1, True, learning_rate=0.1),
        ),
        (
            "step 50, moments from earlier steps; small gradients and ε = 10⁻³, where ε's place matters",
            case((4, 2), 50, 0.05, False, epsilon=1e-3, gradient_scale=1e-3),
        ),
        (
            "a random step",
            case((int(rng.integers(1, 6)), 3), int(rng.integers(2, 500)), float(rng.uniform(0, 0.1)), False),
        ),
    ]


# --- 08: BERT-style pre-training ------------------------------------------------------------


def _masked_lm_loss_reference(probabilities, labels):
    probabilities, labels = np.asarray(probabilities, dtype="float64"), np.asarray(labels)
    total, count = 0.0, 0
    for row in range(labels.shape[0]):
        for position in range(labels.shape[1]):
            if labels[row, position] != 0:
                total -= math.log(probabilities[row, position, labels[row, position]])
                count += 1
    return total / count if count else 0.0


def _masked_lm_loss_cases(rng):
    def distributions(shape):
        values = rng.random(shape) + 0.05
        return values / values.sum(axis=-1, keepdims=True)

    labels = rng.integers(1, 7, size=(3, 5))
    labels[rng.random((3, 5)) < 0.6] = 0
    labels[0, 0] = 4  # at least one chosen position
    return [
        (
            "one chosen position",
            {"probabilities": np.array([[[0.0, 0.1, 0.6, 0.3], [0.0, 0.5, 0.25, 0.25]]]), "labels": np.array([[2, 0]])},
        ),
        ("3 rows of 5 positions, 7 words", {"probabilities": distributions((3, 5, 7)), "labels": labels}),
        ("nothing chosen", {"probabilities": distributions((1, 3, 4)), "labels": np.zeros((1, 3), dtype=int)}),
    ]


def _bert_corruption_reference(token_ids, seed, vocabulary_size, mask_token_id, special_ids):
    """The rates every right answer shows (its outputs are a random draw): BERT's 15%, then 80/10/10."""
    return {"selection": 0.15, "mask": 0.8, "random": 0.1}


def _bert_corruption_answer(token_ids, seed, vocabulary_size, mask_token_id, special_ids):
    """One right answer, position by position (the judge checks properties, not these exact draws)."""
    rng = np.random.default_rng(seed)
    token_ids = np.asarray(token_ids)
    corrupted, labels = token_ids.copy(), np.zeros_like(token_ids)
    for index in np.ndindex(token_ids.shape):
        if token_ids[index] == 0 or token_ids[index] in special_ids or rng.random() >= 0.15:
            continue
        labels[index], action = token_ids[index], rng.random()
        if action < 0.8:
            corrupted[index] = mask_token_id
        elif action < 0.9:
            corrupted[index] = rng.integers(vocabulary_size)
    return corrupted, labels


def _bert_corruption_cases(rng):
    special = [int(i) for i in rng.permutation(np.arange(1, 10))[:3]]  # [CLS], [SEP], [MASK] ids
    cls_id, sep_id, mask_id = special

    def rows(count, length):
        token_ids = rng.integers(10, 1000, size=(count, length)).astype("int16")  # small ids: a small public file
        token_ids[:, 0], lengths = cls_id, rng.integers(3 * length // 4, length + 1, size=count)
        for row, real in enumerate(lengths):
            token_ids[row, real - 1], token_ids[row, real:] = sep_id, 0
        return token_ids

    arguments = {"vocabulary_size": 1000, "mask_token_id": mask_id, "special_ids": special}
    return [
        ("2 short rows with padding", {"token_ids": rows(2, 12), "seed": int(rng.integers(2**31)), **arguments}),
        (
            "100 rows of 750-1,000 tokens: the rates",
            {"token_ids": rows(100, 1000), "seed": int(rng.integers(2**31)), **arguments},
        ),
        (
            "only padding and special tokens",
            {
                "token_ids": np.array([[cls_id, sep_id, 0, 0], [cls_id, mask_id, sep_id, 0]]),
                "seed": int(rng.integers(2**31)),
                **arguments,
            },
        ),
    ]


# --- 09: sampling ---------------------------------------------------------------------------


def _temperature_reference(logits, temperature):
    logits = np.asarray(logits, dtype="float64")
    rows = []
    for row in logits:
        weights = np.exp((row - row.max()) / temperature)
        rows.append(weights / weights.sum())
    return np.array(rows)


def _temperature_cases(rng):
    return [
        ("3 logits, T = 1", {"logits": np.array([[1.0, 2.0, 3.0]]), "temperature": 1.0}),
        ("2 rows of 6, T = 0.5 (sharper)", {"logits": rng.normal(size=(2, 6)) * 2, "temperature": 0.5}),
        ("4 rows of 10, T = 2 (flatter)", {"logits": rng.normal(size=(4, 10)) * 3, "temperature": 2.0}),
        ("large logits, T = 0.1", {"logits": np.array([[1000.0, 999.0, 990.0]]), "temperature": 0.1}),
        (
            "two rows of very different scale, T = 1",
            {"logits": np.array([[1000.0, 999.0, 990.0], [1.0, 2.0, 3.0]]), "temperature": 1.0},
        ),
    ]


def _nucleus_reference(probabilities, p):
    probabilities = np.asarray(probabilities, dtype="float64")
    result = np.zeros_like(probabilities)
    for index, row in enumerate(probabilities):
        total = 0.0
        for token in sorted(range(len(row)), key=lambda token: (-row[token], token)):
            if total > p:  # keep a token while the mass ranked above it is at most p
                break
            result[index, token] = row[token]
            total += row[token]
        result[index] /= result[index].sum()
    return result


def _nucleus_cases(rng):
    def rows(count, width):
        values = rng.random((count, width)) ** 4  # uneven, like a language model's distribution
        return values / values.sum(axis=-1, keepdims=True)

    return [
        ("[0.5, 0.3, 0.15, 0.05], p = 0.7", {"probabilities": np.array([[0.5, 0.3, 0.15, 0.05]]), "p": 0.7}),
        ("3 rows of 8, p = 0.9", {"probabilities": rows(3, 8), "p": 0.9}),
        ("2 rows of 20, p = 0.35", {"probabilities": rows(2, 20), "p": 0.35}),
        ("p = 1 keeps every token", {"probabilities": rows(1, 5), "p": 1.0}),
        (
            "[0.125, 0.5, 0.125, 0.25], p = 0.75: the mass above id 0 is exactly p; ids 0 and 2 tie",
            {"probabilities": np.array([[0.125, 0.5, 0.125, 0.25]]), "p": 0.75},
        ),
    ]


def _cached_attention_step_reference(
    query, key, value, key_cache, value_cache, index, written_at=None, attended=None, attend_before_writing=False
):
    """``written_at`` (the position the new key and value go to, else ``index``), ``attended`` (how many positions
    the query reads, else index + 1) and ``attend_before_writing`` make usual mistakes (:mod:`.usual_mistakes`)."""
    key_cache, value_cache = np.array(key_cache, dtype="float64"), np.array(value_cache, dtype="float64")
    before = key_cache.copy(), value_cache.copy()
    written_at = index if written_at is None else written_at
    key_cache[:, :, written_at] = key[:, :, 0]
    value_cache[:, :, written_at] = value[:, :, 0]
    read = before if attend_before_writing else (key_cache, value_cache)
    attended = index + 1 if attended is None else attended
    keys, values = read[0][:, :, :attended], read[1][:, :, :attended]  # positions 0 ... t
    scores = query @ np.swapaxes(keys, -1, -2) / math.sqrt(query.shape[-1])  # (B, N, 1, t + 1)
    return _softmax_rows(scores) @ values, key_cache, value_cache


def _cached_attention_step_cases(rng):
    def case(batch, heads, capacity, width, index):
        stale = rng.normal(size=(2, batch, heads, capacity, width))  # what a reused cache holds after t
        return {
            "query": rng.normal(size=(batch, heads, 1, width)),
            "key": rng.normal(size=(batch, heads, 1, width)),
            "value": rng.normal(size=(batch, heads, 1, width)),
            "key_cache": stale[0],
            "value_cache": stale[1],
            "index": index,
        }

    capacity = int(rng.integers(6, 12))
    return [
        ("the first position, t = 0", case(1, 2, 4, 3, 0)),
        ("B=2, N=2, room for 6, t = 3", case(2, 2, 6, 4, 3)),
        ("the last position of the cache", case(1, 1, 5, 2, 4)),
        (
            "random sizes and t",
            case(int(rng.integers(1, 4)), int(rng.integers(1, 4)), capacity, 4, int(rng.integers(1, capacity - 1))),
        ),
    ]


def _narrow_interval_reference(low, high, frequencies, symbol):
    cumulative = [0, *np.cumsum(np.asarray(frequencies, dtype="int64")).tolist()]
    total, width = cumulative[-1], int(high) - int(low) + 1
    return (int(low) + width * cumulative[symbol] // total, int(low) + width * cumulative[symbol + 1] // total - 1)


def _narrow_interval_cases(rng):
    top = 2**32 - 1

    def case(low, high, size, total_bits):
        frequencies = rng.integers(1, 2**total_bits // size, size=size).astype("int64")
        frequencies[int(rng.integers(size))] = 0  # a token the model rules out: never the symbol coded
        symbol = int(rng.choice(np.flatnonzero(frequencies)))
        return {"low": int(low), "high": int(high), "frequencies": frequencies, "symbol": symbol}

    low = int(rng.integers(0, 2**30))
    return [
        (
            "the worked example: frequencies 2, 1, 1, symbol 2, the whole interval",
            {"low": 0, "high": top, "frequencies": np.array([2, 1, 1]), "symbol": 2},
        ),
        (
            "the first symbol takes the bottom of the interval",
            {"low": 0, "high": top, "frequencies": np.array([2, 1, 1]), "symbol": 0},
        ),
        (
            "an interval that starts above 0, a middle symbol",
            {"low": 2**30, "high": 3 * 2**30 - 1, "frequencies": np.array([1, 3, 2, 2]), "symbol": 1},
        ),
        (
            "random frequencies totalling up to 2**24, an interval inside the middle half",
            case(low + 2**30, low + 2**31 + int(rng.integers(2**30)), int(rng.integers(5, 40)), 24),
        ),
        ("random frequencies, the whole interval", case(0, top, int(rng.integers(3, 10)), 16)),
    ]


def _perplexity_and_bits_reference(log_probabilities, targets, characters):
    real = np.asarray(targets) != 0
    scores = np.asarray(log_probabilities, dtype="float64")[real]
    return math.exp(-scores.mean()), float(-scores.sum() / math.log(2) / characters)


def _perplexity_and_bits_cases(rng):
    def case(rows, length, padded):
        targets = rng.integers(1, 50, size=(rows, length))
        if padded:
            for row in range(rows):
                targets[row, int(rng.integers(1, length + 1)) :] = 0
            targets[0, -1] = 0
        log_probabilities = np.where(targets != 0, np.log(rng.uniform(0.01, 0.9, size=(rows, length))), 0.0)
        characters = int((targets != 0).sum() * rng.uniform(2.5, 4.5))
        return {"log_probabilities": log_probabilities, "targets": targets, "characters": characters}

    return [
        (
            "two tokens of probability 1/2 and 1/4, 3 characters",
            {"log_probabilities": np.log([[0.5, 0.25]]), "targets": np.array([[5, 6]]), "characters": 3},
        ),
        ("3 rows of 6 tokens, padded", case(3, 6, True)),
        ("random rows, padded", case(int(rng.integers(2, 6)), int(rng.integers(4, 12)), True)),
    ]


def _gpt_reference(
    token_ids,
    weights,
    config,
    causal=True,
    positions_after_blocks=False,
    final_norm=True,
    output_bias=True,
    normalize_first=None,
):
    """The decoder-only forward pass, on the weight dictionary of exercise 09.5; logits (B, T, V).

    The keyword arguments after ``config`` exist for the hints' usual mistakes; the exercise passes none.
    """
    token_ids = np.asarray(token_ids)
    length = token_ids.shape[1]
    x = np.asarray(weights["token_embedding"], dtype="float64")[token_ids]  # (B, T, E)
    positions = np.asarray(weights["position_embedding"], dtype="float64")[:length]  # (T, E)
    if not positions_after_blocks:
        x = x + positions
    allowed = token_ids[:, None, :] != 0  # (B, 1, T): padding is never a key
    if causal:
        allowed = allowed & np.tril(np.ones((length, length), dtype=bool))
    allowed = np.broadcast_to(allowed, (token_ids.shape[0], length, length))
    pre_norm = config["normalize_first"] if normalize_first is None else normalize_first
    for block in weights["blocks"]:
        x = _block_reference(x, block, allowed, pre_norm, config["activation"], config["layer_norm_epsilon"])
    if positions_after_blocks:
        x = x + positions
    if "final_norm" in weights and final_norm:
        x = _layer_norm_reference(
            x, weights["final_norm"]["gamma"], weights["final_norm"]["beta"], config["layer_norm_epsilon"]
        )
    logits = x @ np.asarray(weights["token_embedding"], dtype="float64").T
    return logits + weights["output_bias"] if output_bias else logits


def _gpt_weights(rng, vocabulary, capacity, width, heads, layers, final_norm):
    weights = {
        "token_embedding": rng.normal(0, 0.5, size=(vocabulary, width)),
        "position_embedding": rng.normal(0, 0.5, size=(capacity, width)),
        "blocks": [_block_weight_dict(rng, width, heads, 2 * width) for _ in range(layers)],
        "output_bias": rng.normal(0, 0.1, size=vocabulary),
    }
    if final_norm:
        weights["final_norm"] = _norm_weights(rng, width)
    return weights


def _padded_ids(rng, rows, length, vocabulary):
    token_ids = rng.integers(1, vocabulary, size=(rows, length))
    for row in range(1, rows):
        token_ids[row, int(rng.integers(2, length + 1)) :] = 0
    return token_ids


def _gpt_cases(rng):
    def case(rows, length, vocabulary, width, heads, layers, normalize_first, activation, final_norm, epsilon=1e-5):
        config = {
            "num_heads": heads,
            "normalize_first": normalize_first,
            "activation": activation,
            "layer_norm_epsilon": epsilon,
        }
        return {
            "token_ids": _padded_ids(rng, rows, length, vocabulary),
            "weights": _gpt_weights(rng, vocabulary, length + 2, width, heads, layers, final_norm=final_norm),
            "config": config,
        }

    heads = int(rng.choice([2, 4]))
    # The layout, the activation, the final norm and epsilon are independent settings: the third case
    # pairs them as neither of the first two does, so none of them can be read off another.
    return [
        ("post-norm (the original), 1 block, ReLU", case(2, 5, 20, 8, 2, 1, False, "relu", False)),
        ("pre-norm with a final norm (GPT-2), 2 blocks, GELU", case(3, 6, 30, 8, 2, 2, True, "gelu_approximate", True)),
        (
            "random sizes; post-norm with GELU, a final norm and layer_norm_epsilon 1e-2",
            case(
                int(rng.integers(2, 4)),
                int(rng.integers(4, 9)),
                int(rng.integers(20, 40)),
                4 * heads,
                heads,
                int(rng.integers(1, 4)),
                False,
                "gelu_approximate",
                True,
                epsilon=1e-2,
            ),
        ),
    ]


# --- 10: the Vision Transformer -------------------------------------------------------------


def _patchify_reference(images, patch_size):
    images = np.asarray(images)
    batch, height, width, channels = images.shape
    patches = []
    for top in range(0, height, patch_size):  # reading order: row of patches by row of patches
        for left in range(0, width, patch_size):
            patches.append(images[:, top : top + patch_size, left : left + patch_size, :].reshape(batch, -1))
    return np.stack(patches, axis=1)


def _patchify_cases(rng):
    return [
        ("one 4×4 grey image, 2×2 patches", {"images": np.arange(16.0).reshape(1, 4, 4, 1), "patch_size": 2}),
        ("two 6×9 images with 3 channels, 3×3 patches", {"images": rng.random((2, 6, 9, 3)), "patch_size": 3}),
        ("1×1 patches: pixels as tokens", {"images": rng.random((1, 2, 3, 2)), "patch_size": 1}),
        ("one patch as large as the image", {"images": rng.random((3, 4, 4, 1)), "patch_size": 4}),
    ]


def _rollout_reference(attention_weights, last_on_left=True, identity=True, renormalised=True):
    """``last_on_left``, ``identity`` and ``renormalised`` make usual mistakes (:mod:`.usual_mistakes`)."""
    weights = np.asarray(attention_weights, dtype="float64")
    layers, batch, _, tokens, _ = weights.shape
    result = np.zeros((batch, tokens, tokens))
    for example in range(batch):
        combined = np.eye(tokens)
        for layer in range(layers):
            mixed = weights[layer, example].mean(axis=0) + (np.eye(tokens) if identity else 0.0)
            mixed = mixed / mixed.sum(axis=1, keepdims=True) if renormalised else mixed
            # the later layer acts on what the earlier ones produced
            combined = mixed @ combined if last_on_left else combined @ mixed
        result[example] = combined
    return result


def _rollout_cases(rng):
    def distributions(shape):
        values = rng.random(shape) ** 3  # uneven rows, so the order of the layers matters
        return values / values.sum(axis=-1, keepdims=True)

    return [
        ("one layer, one head, T = 2", {"attention_weights": np.array([[[[[0.5, 0.5], [0.2, 0.8]]]]])}),
        ("2 layers, 2 examples, 3 heads, T = 5", {"attention_weights": distributions((2, 2, 3, 5, 5))}),
        ("4 layers, 1 example, 2 heads, T = 3", {"attention_weights": distributions((4, 1, 2, 3, 3))}),
    ]


# --- 11: today's decoders ------------------------------------------------------------------


def _rotate_reference(x, start_index, interleaved=False, direction=1):
    """``interleaved`` (feature i paired with i + 1) and ``direction`` (-1 turns the other way) make usual mistakes
    (:mod:`.usual_mistakes`)."""
    x = np.asarray(x, dtype="float64")
    batch, length, heads, width = x.shape
    result = np.empty_like(x)
    for t in range(length):  # one pair at a time, as the formula reads
        position = start_index + t
        for i in range(width // 2):
            angle = direction * position * 10000.0 ** (-2.0 * i / width)
            pair = (2 * i, 2 * i + 1) if interleaved else (i, i + width // 2)
            first, second = x[:, t, :, pair[0]], x[:, t, :, pair[1]]
            result[:, t, :, pair[0]] = first * np.cos(angle) - second * np.sin(angle)
            result[:, t, :, pair[1]] = second * np.cos(angle) + first * np.sin(angle)
    return result


def _rotate_cases(rng):
    return [
        ("one head of width 2 at positions 0 and 1", {"x": np.array([[[[1.0, 0.0]], [[1.0, 0.0]]]]), "start_index": 0}),
        ("B=2, T=5, N=3, H=8, from position 0", {"x": rng.normal(size=(2, 5, 3, 8)), "start_index": 0}),
        ("a cached step: T=1 at position 37", {"x": rng.normal(size=(1, 1, 2, 16)), "start_index": 37}),
        (
            "random sizes",
            {
                "x": rng.normal(
                    size=(
                        int(rng.integers(1, 3)),
                        int(rng.integers(2, 7)),
                        int(rng.integers(1, 4)),
                        2 * int(rng.integers(1, 9)),
                    )
                ),
                "start_index": int(rng.integers(0, 50)),
            },
        ),
    ]


def _rms_norm_reference(x, scale, epsilon):
    x = np.asarray(x, dtype="float64")
    root_mean_square = np.sqrt((x**2).sum(axis=-1, keepdims=True) / x.shape[-1] + epsilon)
    return x / root_mean_square * np.asarray(scale, dtype="float64")


def _rms_norm_cases(rng):
    return [
        ("one vector (3, 4), scale 1", {"x": np.array([[3.0, 4.0]]), "scale": np.ones(2), "epsilon": 0.0}),
        (
            "B=2, T=3, E=6, a mean far from 0",
            {"x": rng.normal(3.0, 2.0, size=(2, 3, 6)), "scale": rng.normal(size=6), "epsilon": 1e-6},
        ),
        (
            "a large epsilon on small values",
            {"x": rng.normal(0.0, 0.01, size=(4, 5)), "scale": np.ones(5), "epsilon": 1e-3},
        ),
    ]


def _grouped_attention_reference(query, key, value, tiled=False, scaled=True, softmax_axis=-1):
    """``tiled`` (head n reads group n % G), ``scaled`` and ``softmax_axis`` make usual mistakes
    (:mod:`.usual_mistakes`)."""
    query, key, value = (np.asarray(array, dtype="float64") for array in (query, key, value))
    batch, length, heads, width = query.shape
    groups = key.shape[2]
    output = np.zeros_like(query)
    for head in range(heads):
        group = head % groups if tiled else head * groups // heads  # heads 0 .. N/G - 1 read group 0, and so on
        scores = np.einsum("bth,bsh->bts", query[:, :, head], key[:, :, group]) / (math.sqrt(width) if scaled else 1)
        weights = np.exp(scores - scores.max(axis=softmax_axis, keepdims=True))
        weights /= weights.sum(axis=softmax_axis, keepdims=True)
        output[:, :, head] = np.einsum("bts,bsh->bth", weights, value[:, :, group])
    return output


def _grouped_attention_cases(rng):
    def case(batch, length, keys, heads, groups, width):
        return {
            "query": rng.normal(size=(batch, length, heads, width)),
            "key": rng.normal(size=(batch, keys, groups, width)),
            "value": rng.normal(size=(batch, keys, groups, width)),
        }

    groups = int(rng.choice([1, 2, 3]))
    return [
        ("N = 4 query heads share G = 2 key/value heads", case(1, 3, 3, 4, 2, 4)),
        ("G = N = 3: multi-head attention", case(2, 4, 4, 3, 3, 8)),
        ("G = 1: multi-query attention, 5 keys for 2 queries", case(1, 2, 5, 4, 1, 6)),
        (
            "random sizes",
            case(
                int(rng.integers(1, 3)),
                int(rng.integers(1, 6)),
                int(rng.integers(1, 7)),
                groups * int(rng.integers(1, 4)),
                groups,
                2 * int(rng.integers(1, 5)),
            ),
        ),
    ]


def _absmax_reference(weights):
    weights = np.asarray(weights, dtype="float64")
    scales = np.array([max(abs(value) for value in row) / 127 if np.any(row) else 1.0 for row in weights])
    integers = np.round(weights / scales[:, None])
    return integers, scales, integers * scales[:, None]


def _absmax_cases(rng):
    outlier = rng.normal(0, 0.02, size=(3, 16))
    outlier[int(rng.integers(3)), int(rng.integers(16))] = float(rng.choice([-1.0, 1.0]))
    return [
        ("the row [0.5, -1.0, 0.25]", {"weights": np.array([[0.5, -1.0, 0.25]])}),
        (
            "4 rows of 8, a different spread in each",
            {"weights": rng.normal(size=(4, 8)) * rng.uniform(0.01, 3, (4, 1))},
        ),
        ("a row of zeros beside a row of small weights", {"weights": np.vstack([np.zeros(5), rng.normal(0, 1e-3, 5)])}),
        ("one outlier among small weights", {"weights": outlier}),
    ]


def _groupwise_int4_reference(weights, group_size):
    weights = np.asarray(weights, dtype="float64")
    rows, columns = weights.shape
    integers, scales = np.zeros((rows, columns)), np.ones((rows, columns // group_size))
    for row in range(rows):
        for group in range(columns // group_size):
            part = slice(group * group_size, (group + 1) * group_size)
            largest = max(abs(value) for value in weights[row, part])
            if largest > 0:
                scales[row, group] = largest / 7
            integers[row, part] = np.round(weights[row, part] / scales[row, group])
    return integers, scales, integers * np.repeat(scales, group_size, axis=1)


def _groupwise_int4_cases(rng):
    outlier = rng.normal(0, 0.02, size=(2, 16))
    outlier[int(rng.integers(2)), int(rng.integers(16))] = float(rng.choice([-1.0, 1.0]))
    zeros = rng.normal(0, 0.5, size=(3, 8))
    zeros[1, :4] = 0.0
    return [
        ("the row [0.7, -0.35, 0.14, 0.07] in groups of 2", {"weights": np.array([[0.7, -0.35, 0.14, 0.07]]),
                                                             "group_size": 2}),
        ("4 rows of 12, groups of 4, a different spread in each group",
         {"weights": rng.normal(size=(4, 12)) * rng.uniform(0.01, 3, (4, 3)).repeat(4, axis=1), "group_size": 4}),
        ("one outlier among small weights, groups of 4", {"weights": outlier, "group_size": 4}),
        ("a group of zeros beside groups of weights", {"weights": zeros, "group_size": 4}),
        ("the group is the whole row (one scale a row)", {"weights": rng.normal(size=(3, 6)), "group_size": 6}),
        ("groups of 1 (every weight its own scale)", {"weights": rng.normal(size=(2, 3)), "group_size": 1}),
    ]  # fmt: skip


def _merge_lora_reference(kernel, a, b, alpha):
    a = np.asarray(a, dtype="float64")
    rank = a.shape[1]
    return np.asarray(kernel, dtype="float64") + (alpha / rank) * np.einsum("dr,rk->dk", a, np.asarray(b, "float64"))


def _merge_lora_cases(rng):
    def case(rows, columns, rank, alpha):
        return {
            "kernel": rng.normal(size=(rows, columns)),
            "a": rng.normal(size=(rows, rank)),
            "b": rng.normal(size=(rank, columns)),
            "alpha": alpha,
        }

    return [
        (
            "W = 0 (2 x 2), A = [[1], [0]], B = [[2, 3]], alpha = 2",
            {"kernel": np.zeros((2, 2)), "a": np.array([[1.0], [0.0]]), "b": np.array([[2.0, 3.0]]), "alpha": 2.0},
        ),
        ("d = 6, k = 5, r = 2, alpha = 8", case(6, 5, 2, 8.0)),
        ("r = 4, alpha = r (scale 1)", case(5, 7, 4, 4.0)),
        (
            "random sizes",
            case(
                int(rng.integers(2, 9)),
                int(rng.integers(2, 9)),
                int(rng.integers(1, 5)),
                float(rng.choice([1.0, 4.0, 16.0])),
            ),
        ),  # fmt: skip
    ]


def _data_parallel_reference(x, y, w, devices):
    x, y, w = (np.asarray(array, dtype="float64") for array in (x, y, w))
    rows = len(y) // devices
    shards = []
    for device in range(devices):
        part = slice(device * rows, (device + 1) * rows)
        residual = x[part] @ w - y[part]
        shards.append(2.0 * (residual[:, None] * x[part]).sum(axis=0) / rows)
    return np.array(shards), np.array(shards).mean(axis=0)


def _data_parallel_cases(rng):
    def case(devices, rows_each, features):
        rows = devices * rows_each
        return {
            "x": rng.normal(size=(rows, features)),
            "y": rng.normal(size=rows),
            "w": rng.normal(size=features),
            "devices": devices,
        }

    return [
        ("B = 4 rows on D = 2 devices, 3 features", case(2, 2, 3)),
        ("D = 1: the whole batch on one device", case(1, 6, 2)),
        ("D = 4 devices of 3 rows, 5 features", case(4, 3, 5)),
        ("random sizes", case(int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 7)))),
    ]


# exercise id -> (case generator: rng -> [(label, arguments)], reference: arguments -> output)
@dataclass(frozen=True)
class Registration:
    """The grader's half of one exercise: what no student's install holds.

    The other half, which students' checks read, is the course package's catalogue entry
    (:class:`transformer_course.exercises.Exercise`: title, function name, points, tolerance,
    hints); the public cases students check against are derived from this half
    (:func:`write_public_cases`), and so are similarity's known answers (:mod:`..similarity`).

    Attributes:
        cases: callable ``(numpy Generator) -> [(label, keyword arguments), ...]``: seed 0 gives the
            public cases, each student's secret seed their own; every size and value comes from the
            generator.
        reference: callable ``(**arguments) -> output``, written here independently of the package.
        twin: optional ``"module:qualified name"`` of the course package's own implementation of the
            same function: a student's copy of it is flagged in the report.
        answer: optional callable ``(**arguments) -> output``, for an exercise judged by properties
            (its right answers are random): one independently written right answer, whose output
            :func:`answer` gives; where None, :func:`answer` gives the reference's output.
    """

    cases: Callable
    reference: Callable
    twin: str | None = None
    answer: Callable | None = None


# Every exercise the grader grades, by id: the one table the references, the public cases and similarity's known
# answers are read from.


# --- 13: post-training -----------------------------------------------------------------------------------------


def _log_softmax(logits):
    logits = np.asarray(logits, dtype="float64")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _answer_positions(targets, prompt_lengths):
    targets = np.asarray(targets)
    positions = np.arange(targets.shape[1])[None, :]
    return (positions >= np.asarray(prompt_lengths)[:, None] - 1) & (targets != 0)


def _prompt_masked_reference(probabilities, targets, prompt_lengths):
    probabilities = np.asarray(probabilities, dtype="float64")
    chosen = np.take_along_axis(probabilities, np.asarray(targets)[..., None], axis=-1)[..., 0]
    counted = _answer_positions(targets, prompt_lengths)
    return float(-np.log(chosen[counted]).sum() / counted.sum()) if counted.any() else 0.0


def _instruction_batch(rng, rows, length, vocabulary):
    """Rows of a prompt, an answer and padding: targets (B, T), prompt lengths (B,), probabilities (B, T, V)."""
    targets = np.zeros((rows, length), dtype="int64")
    prompt_lengths = np.zeros(rows, dtype="int64")
    for row in range(rows):
        prompt = int(rng.integers(2, length - 2))
        answer = int(rng.integers(1, length - prompt + 1))
        targets[row, : prompt - 1 + answer] = rng.integers(1, vocabulary, size=prompt - 1 + answer)
        prompt_lengths[row] = prompt
    probabilities = rng.dirichlet(np.ones(vocabulary), size=(rows, length))
    return probabilities, targets, prompt_lengths


def _prompt_masked_cases(rng):
    worked = np.full((1, 4, 3), 0.25)
    worked[0, :, 1] = 0.5  # every position: p = 0.25, 0.5, 0.25
    return [
        (
            "one row: prompt of 2 tokens (target 0 is the prompt's), answer targets 1 and 2, one padding",
            {"probabilities": worked, "targets": np.array([[2, 1, 2, 0]]), "prompt_lengths": np.array([2])},
        ),
        *(
            (label, dict(zip(("probabilities", "targets", "prompt_lengths"), _instruction_batch(rng, *sizes))))
            for label, sizes in (
                ("3 rows of 8, vocabulary 5", (3, 8, 5)),
                ("5 rows of 12, vocabulary 7, prompts of every length", (5, 12, 7)),
            )
        ),
    ]


def _sequence_log_probability_reference(logits, targets, mask):
    chosen = np.take_along_axis(_log_softmax(logits), np.asarray(targets)[..., None], axis=-1)[..., 0]
    return (chosen * np.asarray(mask, dtype="float64")).sum(axis=-1)


def _sequence_log_probability_cases(rng):
    def case(rows, length, vocabulary, offset=0.0):
        _, targets, prompt_lengths = _instruction_batch(rng, rows, length, vocabulary)
        return {
            "logits": rng.normal(0, 3, size=(rows, length, vocabulary)) + offset,
            "targets": targets,
            "mask": _answer_positions(targets, prompt_lengths),
        }

    return [
        (
            "logits [0, log 3] at two positions, both counted, targets 1 then 0",
            {
                "logits": np.array([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]]),
                "targets": np.array([[1, 0]]),
                "mask": np.array([[True, True]]),
            },
        ),
        ("2 rows of 6, vocabulary 4", case(2, 6, 4)),
        # exp(800) overflows: a log-softmax without its maximum taken out first returns inf or nan here.
        ("4 rows of 10, vocabulary 9, logits far from 0 (about 800)", case(4, 10, 9, offset=800.0)),
    ]


def _dpo_reference(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta):
    chosen = beta * (np.asarray(policy_chosen, "float64") - np.asarray(reference_chosen, "float64"))
    rejected = beta * (np.asarray(policy_rejected, "float64") - np.asarray(reference_rejected, "float64"))
    return np.logaddexp(0.0, rejected - chosen)


def _dpo_cases(rng):
    def wide_margins(arguments):  # pairs 1 and 3: the rejected answer far less likely; pair 2: the chosen one
        arguments["policy_rejected"] = arguments["policy_rejected"] * np.array([0.0, 1.0, 0.0]) + [-400.0, 0.0, -500.0]
        arguments["policy_chosen"] = arguments["policy_chosen"] * np.array([1.0, 0.0, 1.0]) + [0.0, -600.0, 0.0]
        return arguments

    def case(pairs, beta):
        reference = rng.normal(-20, 6, size=(2, pairs))
        return {
            "policy_chosen": reference[0] + rng.normal(0, 3, pairs),
            "policy_rejected": reference[1] + rng.normal(0, 3, pairs),
            "reference_chosen": reference[0],
            "reference_rejected": reference[1],
            "beta": beta,
        }

    return [
        (
            "the policy equals the reference: every loss log 2",
            {
                "policy_chosen": np.array([-3.0, -7.5]),
                "policy_rejected": np.array([-4.0, -2.0]),
                "reference_chosen": np.array([-3.0, -7.5]),
                "reference_rejected": np.array([-4.0, -2.0]),
                "beta": 0.1,
            },
        ),
        ("4 pairs, beta 0.1", case(4, 0.1)),
        ("6 pairs, beta 0.5", case(6, 0.5)),
        # Either way: -log sigmoid of a margin of minus hundreds overflows unless written stably.
        ("margins of hundreds of nats, for and against the chosen answer, beta 2", wide_margins(case(3, 2.0))),
    ]


def _grpo_group_reference(rewards, log_probabilities, old_log_probabilities, mask, clip_epsilon):
    rewards = np.asarray(rewards, dtype="float64")
    spread = rewards.std()
    advantages = (rewards - rewards.mean()) / (spread + 1e-4) if spread + 1e-4 > 0 else np.zeros_like(rewards)
    ratio = np.exp(np.asarray(log_probabilities, "float64") - np.asarray(old_log_probabilities, "float64"))
    surrogate = np.minimum(
        ratio * advantages[:, None], np.clip(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantages[:, None]
    )
    weights = np.asarray(mask, dtype="float64")
    return advantages, float(((surrogate * weights).sum(axis=1) / weights.sum(axis=1)).mean())


def _grpo_group_cases(rng):
    def case(answers, length, clip_epsilon):
        lengths = rng.integers(1, length + 1, size=answers)
        old = np.log(rng.uniform(0.05, 0.95, size=(answers, length)))
        return {
            "rewards": rng.integers(0, 2, size=answers).astype("float64"),
            "log_probabilities": old + rng.normal(0, 0.4, size=(answers, length)),
            "old_log_probabilities": old,
            "mask": np.arange(length)[None, :] < lengths[:, None],
            "clip_epsilon": clip_epsilon,
        }

    forced = case(6, 5, 0.2)
    forced["rewards"] = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    return [
        (
            "two answers, one right; the policy has not moved (ratio 1)",
            {
                "rewards": np.array([1.0, 0.0]),
                "log_probabilities": np.log([[0.5, 0.5], [0.25, 1.0]]),
                "old_log_probabilities": np.log([[0.5, 0.5], [0.25, 1.0]]),
                "mask": np.array([[True, True], [True, False]]),
                "clip_epsilon": 0.2,
            },
        ),
        ("6 answers of up to 5 tokens, 2 right, epsilon 0.2", forced),
        ("8 answers of up to 7 tokens, epsilon 0.1", case(8, 7, 0.1)),
        ("every answer right: advantages 0", {**case(4, 3, 0.2), "rewards": np.ones(4)}),
    ]


def _tiled_attention_reference(
    query, key, value, mask, tile_size, rescale_sum=True, rescale_output=True, scaled=True, masked=True, lse_max=True
):
    """Attention over key tiles with an online softmax (FlashAttention's forward pass, Dao et al., 2022, Algorithm 1,
    one block of queries); the switches make usual mistakes (:mod:`.usual_mistakes`)."""
    query, key, value = (np.asarray(array, dtype="float64") for array in (query, key, value))
    mask = np.asarray(mask, dtype=bool)
    length, width = query.shape
    running_max, running_sum = np.full(length, -np.inf), np.zeros(length)
    output = np.zeros((length, value.shape[1]))
    for start in range(0, key.shape[0], int(tile_size)):
        tile = slice(start, start + int(tile_size))
        scores = query @ key[tile].T / (math.sqrt(width) if scaled else 1.0)  # (T, tile)
        if masked:
            scores = np.where(mask[:, tile], scores, -np.inf)
        new_max = np.maximum(running_max, scores.max(axis=1))
        safe_max = np.where(np.isfinite(new_max), new_max, 0.0)  # a row with nothing seen yet: no rescaling
        correction = np.exp(running_max - safe_max)  # (T,): earlier tiles' terms, moved to the new maximum
        weights = np.exp(scores - safe_max[:, None])
        running_sum = (running_sum * correction if rescale_sum else running_sum) + weights.sum(axis=1)
        output = (output * correction[:, None] if rescale_output else output) + weights @ value[tile]
        running_max = new_max
    return output / running_sum[:, None], np.log(running_sum) + (running_max if lse_max else 0.0)


def _tiled_attention_cases(rng):
    def case(length, keys, width, tile_size, mask, spread=1.0):
        return {
            "query": spread * rng.normal(size=(length, width)),
            "key": rng.normal(size=(keys, width)),
            "value": rng.normal(size=(keys, width)),
            "mask": mask,
            "tile_size": tile_size,
        }

    def padded(length, keys, real):  # every query may read the first `real` keys (the rest are padding)
        return np.arange(keys)[None, :].repeat(length, axis=0) < real

    causal = np.tril(np.ones((6, 6), dtype=bool))
    causal_padded = np.tril(np.ones((7, 7), dtype=bool)) & padded(7, 7, 5)
    length = int(rng.integers(3, 9))
    return [
        ("causal, 6 positions, tiles of 2 keys", case(6, 6, 4, 2, causal)),
        ("5 queries, 7 keys of which the last 2 are padding, tiles of 3", case(5, 7, 4, 3, padded(5, 7, 5))),
        ("causal and padded, tiles of 1 key: the maximum moves often", case(7, 7, 8, 1, causal_padded, spread=4.0)),
        ("large scores (queries × 30): exp without the maximum overflows", case(4, 6, 4, 2, padded(4, 6, 6), 30.0)),
        ("random sizes, causal", case(length, length, 2 * int(rng.integers(1, 5)), int(rng.integers(1, length + 1)),
                                     np.tril(np.ones((length, length), dtype=bool)))),
    ]  # fmt: skip


def _kl_estimators_reference(q, p, samples):
    q, p = np.asarray(q, "float64"), np.asarray(p, "float64")
    log_ratio = np.log(p[np.asarray(samples)]) - np.log(q[np.asarray(samples)])  # log r, r = p(x) / q(x), x ~ q
    estimates = np.array([-log_ratio, 0.5 * log_ratio**2, np.expm1(log_ratio) - log_ratio]).mean(axis=1)
    return float(np.sum(q * (np.log(q) - np.log(p)))), estimates


def _kl_estimators_cases(rng):
    def case(outcomes, draws, concentration):
        q, p = rng.dirichlet(np.full(outcomes, concentration)), rng.dirichlet(np.full(outcomes, concentration))
        q, p = (np.maximum(v, 1e-3) / np.maximum(v, 1e-3).sum() for v in (q, p))  # no outcome almost impossible
        return {"q": q, "p": p, "samples": rng.choice(outcomes, size=draws, p=q)}

    near = case(5, 40, 2.0)
    near["p"] = 0.9 * near["q"] + 0.1 * near["p"]  # close to q: k2's bias small
    same = case(4, 12, 1.0)
    same["p"] = same["q"].copy()
    return [
        ("two outcomes, one sample of each (the worked example)",
         {"q": np.array([0.5, 0.5]), "p": np.array([0.25, 0.75]), "samples": np.array([0, 1])}),
        ("6 outcomes, 60 samples from q", case(6, 60, 1.0)),
        ("5 outcomes, p close to q, 40 samples", near),
        ("p equals q: every estimate and the divergence 0", same),
    ]  # fmt: skip


REGISTRY = {
    "01.1": Registration(_one_hot_cases, _one_hot_encode_reference, twin="transformer_course.reversal:one_hot_encode"),
    "01.2": Registration(_lstm_step_cases, _lstm_step_reference),
    "02.1": Registration(lambda rng: _score_cases(rng, True), _luong_general_reference),
    "02.2": Registration(lambda rng: _score_cases(rng, False), _bahdanau_reference),
    "03.1": Registration(_vectorize_cases, _vectorize_reference),
    "03.2": Registration(_merge_step_cases, _merge_step_reference),
    "03.3": Registration(
        _encode_word_cases, _encode_word_reference, twin="transformer_course.bpe:BytePairEncoding._encode_piece"
    ),
    "03.4": Registration(
        _skipgram_pairs_cases, _skipgram_pairs_reference, twin="transformer_course.word_vectors:skipgram_pairs"
    ),
    "04.1": Registration(
        _attention_cases, _attention_reference, twin="transformer_course.attention:scaled_dot_product_attention"
    ),
    "04.2": Registration(_split_cases, _split_heads_reference),
    "04.3": Registration(_merge_cases, _merge_heads_reference),
    "04.4": Registration(
        _sinusoidal_cases, _sinusoidal_reference, twin="transformer_course.positional:sinusoidal_encoding"
    ),
    "04.5": Registration(_multi_head_attention_cases, _multi_head_attention_reference),
    "04.6": Registration(
        _self_attention_mask_cases, _self_attention_mask_reference, twin="transformer_course.masks:attention_mask"
    ),
    "05.1": Registration(_layer_norm_cases, _layer_norm_reference),
    "05.2": Registration(_feed_forward_cases, _feed_forward_reference),
    "05.3": Registration(_encoder_block_cases, _encoder_block_reference),
    "06.1": Registration(_pooling_cases, _masked_max_reference),
    "06.2": Registration(_pooling_cases, _masked_mean_reference),
    "07.1": Registration(_causal_cases, _causal_reference, twin="transformer_course.masks:causal_mask"),
    "07.2": Registration(_greedy_cases, _greedy_reference, twin="transformer_course.decoding:greedy_decode"),
    "07.3": Registration(_teacher_forcing_loss_cases, _teacher_forcing_loss_reference),
    "07.4": Registration(_beam_step_cases, _beam_step_reference),
    "07.5": Registration(_warmup_cosine_cases, _warmup_cosine_reference),
    "07.6": Registration(_adamw_step_cases, _adamw_step_reference),
    "08.1": Registration(_masked_lm_loss_cases, _masked_lm_loss_reference),
    "08.3": Registration(
        _bert_corruption_cases,
        _bert_corruption_reference,
        twin="transformer_course.pretraining:mask_tokens",
        answer=_bert_corruption_answer,
    ),
    "09.1": Registration(
        _temperature_cases, _temperature_reference, twin="transformer_course.decoding:apply_temperature"
    ),
    "09.2": Registration(_nucleus_cases, _nucleus_reference, twin="transformer_course.decoding:top_p_filter"),
    "09.3": Registration(_cached_attention_step_cases, _cached_attention_step_reference),
    "09.4": Registration(_perplexity_and_bits_cases, _perplexity_and_bits_reference),
    "09.5": Registration(_gpt_cases, _gpt_reference),
    "09.6": Registration(_narrow_interval_cases, _narrow_interval_reference),
    "10.1": Registration(_patchify_cases, _patchify_reference, twin="transformer_course.vision:extract_patches"),
    "10.2": Registration(_rollout_cases, _rollout_reference, twin="transformer_course.vision:attention_rollout"),
    "11.1": Registration(_rotate_cases, _rotate_reference, twin="transformer_course.rotary:rotary_embedding"),
    "11.2": Registration(_rms_norm_cases, _rms_norm_reference, twin="transformer_course.transformer:RMSNorm.call"),
    "11.3": Registration(_grouped_attention_cases, _grouped_attention_reference),
    "11.4": Registration(_tiled_attention_cases, _tiled_attention_reference),
    "12.1": Registration(_absmax_cases, _absmax_reference),
    "12.2": Registration(_merge_lora_cases, _merge_lora_reference, twin="transformer_course.lora:LoRA.merged_kernel"),
    "12.3": Registration(_data_parallel_cases, _data_parallel_reference),
    "12.4": Registration(_groupwise_int4_cases, _groupwise_int4_reference),
    "13.1": Registration(_prompt_masked_cases, _prompt_masked_reference),
    "13.2": Registration(_sequence_log_probability_cases, _sequence_log_probability_reference),
    "13.3": Registration(_dpo_cases, _dpo_reference, twin="transformer_course.post_training:dpo_loss"),
    "13.4": Registration(_grpo_group_cases, _grpo_group_reference),
    "13.5": Registration(_kl_estimators_cases, _kl_estimators_reference),
}


# --- the usual mistakes, as data for the students' checks -----------------------------------------------------

# Each exercise's usual mistakes: (the mistakes on a case, ``(arguments, right) -> [(message, output, compared where),
# ...]``, the tolerance they are told apart with; 0 compares exactly), from :mod:`.usual_mistakes`. Students' checks
# get their outputs on the public cases as data (public_cases.json); the grader computes them on the secret cases.
# No copy of these answers is in the students' install.
from .usual_mistakes import MISTAKES  # noqa: E402 - it calls the references of REGISTRY, above


def mistakes(exercise_id: str, arguments: dict) -> list:
    """The usual mistakes of ``exercise_id`` that change the output on ``arguments``: ``[(message, output, compared
    where or None, tolerance), ...]`` ([] for an exercise without such a table). A mistake that does not apply to
    these arguments (its output None), or whose output equals the right one where it is compared, is left out:
    on this case it changes nothing, so it cannot be what went wrong."""
    if exercise_id not in MISTAKES:
        return []
    function, atol = MISTAKES[exercise_id]
    right = expected(exercise_id, arguments)
    with np.errstate(all="ignore"):
        found = function(arguments, right)
    return [
        (message, output, where, atol)
        for message, output, where in found
        if output is not None and not equal_at(right, output, atol, where)
    ]


def answer(exercise_id: str, arguments: dict):
    """A right answer's output on ``arguments``: the reference output, or for an exercise judged by
    its properties (its outputs are random) one independently written right answer."""
    registration = REGISTRY[exercise_id]
    return registration.answer(**arguments) if registration.answer else registration.reference(**arguments)


def cases(exercise_id: str, rng) -> list:
    """The cases of ``exercise_id`` drawn with ``rng``: a list of ``(label, keyword arguments)``.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return REGISTRY[exercise_id].cases(rng)


def expected(exercise_id: str, arguments: dict):
    """The reference output of ``exercise_id`` on ``arguments``."""
    return REGISTRY[exercise_id].reference(**arguments)


def public_cases() -> str:
    """The public cases (seed 0) of every exercise with their expected outputs, as JSON text.

    Format: ``{exercise id: [[label, encoded arguments, encoded expected output], ...]}``, values
    encoded with :func:`~transformer_course.exercises.values.encode`; an exercise of :data:`MISTAKES` adds to
    each case its usual mistakes, encoded: ``[[message, output, compared where or None, tolerance], ...]``.
    """
    import json

    table = {}
    for exercise_id in REGISTRY:
        table[exercise_id] = [
            [label, encode(arguments), encode(expected(exercise_id, arguments))]
            + (
                [encode([list(mistake) for mistake in mistakes(exercise_id, arguments)])]
                if exercise_id in MISTAKES
                else []
            )
            for label, arguments in cases(exercise_id, np.random.default_rng(0))
        ]
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def write_public_cases(path=PUBLIC_CASES) -> None:
    """Write :func:`public_cases` to ``path`` (the file the package ships)."""
    from transformer_course.tooling import write_text_atomically

    write_text_atomically(path, public_cases())
    Path(path).chmod(0o644)
