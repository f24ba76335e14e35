"""Hints for the exercises that build a model piece by piece (01.2, 03.3, 04.4, 04.6, 07.3-07.6, 09.3, 09.4, 09.6).

Each hint recomputes the output a usual mistake gives (the gates in the wrong order, sines before
cosines, a mask on the wrong axis...) and, when the student's output is that one, names the mistake.
Like the other hints they run only after an output was found wrong, and a hint that cannot tell
says nothing. The mistakes of whole layers and models (04.5, 05.3, 09.5) are not recomputed here,
which would take a copy of the answer: their outputs on the public cases come as data
(``public_cases.json``, written by the grader), and the check compares with them.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "equal_at",
    "lstm_step_hint",
    "encode_word_hint",
    "sinusoidal_hint",
    "teacher_forcing_loss_hint",
    "beam_step_hint",
    "warmup_cosine_hint",
    "adamw_step_hint",
    "cached_attention_step_hint",
    "perplexity_and_bits_hint",
    "narrow_interval_hint",
    "self_attention_mask_hint",
]


def _same(received, candidate, atol=1e-6) -> bool:
    try:
        received, candidate = np.asarray(received, dtype="float64"), np.asarray(candidate, dtype="float64")
    except (TypeError, ValueError):
        return False
    return received.shape == candidate.shape and bool(np.allclose(received, candidate, atol=atol))


def equal_at(value, candidate, atol, where):
    """Whether ``value`` equals ``candidate`` within ``atol`` (at ``where`` only, when given: a bool array over the
    leading axes); None when ``value`` is no array of numbers to compare there. A usual mistake's output is told
    apart with it, here and where the mistakes come as data (``public_cases.json``).

    Example:
        >>> bool(equal_at([1.0, 2.0], [1.0, 2.5], 1e-6, [True, False]))
        True
    """
    if where is None:
        return _same(value, candidate, atol)
    try:
        value, candidate = np.asarray(value, dtype="float64"), np.asarray(candidate)
    except (TypeError, ValueError):
        return None
    return value.shape == candidate.shape and _same(value[where], candidate[where], atol)


def _first_match(received, variants, atol=1e-6, where=None, expected=None):
    """The message of the first ``(message, output)`` variant equal to ``received`` (at ``where`` only).

    A variant whose output is None does not apply to these arguments and is skipped, and so is one whose
    output equals ``expected`` (the right answer): on these arguments that mistake changes nothing, so it
    cannot be what went wrong (an answer right in value but of another dtype would otherwise be told it).
    """
    for message, candidate in variants:
        if candidate is None or (expected is not None and equal_at(expected, candidate, atol, where)):
            continue
        equal = equal_at(received, candidate, atol, where)
        if equal is None:
            return None
        if equal:
            return message
    return None


# --- 01.2: one LSTM step ---------------------------------------------------------------------


def lstm_step_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    x, h, c, kernel, recurrent, bias = (
        np.asarray(arguments[name], dtype="float64") for name in ("x", "h", "c", "kernel", "recurrent_kernel", "bias")
    )
    units = h.shape[-1]
    z = x @ kernel + h @ recurrent + bias

    def step(order, tanh_of_cell=True):
        i, f, candidate, o = (z[:, index * units : (index + 1) * units] for index in order)
        sigmoid = lambda values: 1 / (1 + np.exp(-values))  # noqa: E731
        cell = sigmoid(f) * c + sigmoid(i) * np.tanh(candidate)
        return sigmoid(o) * (np.tanh(cell) if tanh_of_cell else cell), cell

    for order, message in (
        (
            (1, 0, 2, 3),
            "the input and forget gates are swapped: Keras' kernel holds the gates "
            "in the order i, f, c̃, o (input, forget, candidate, output).",
        ),
        ((0, 1, 3, 2), "the candidate and the output gate are swapped: the order is i, f, c̃, o."),
    ):
        candidate_h, candidate_c = step(order)
        if _same(received[0], candidate_h) and _same(received[1], candidate_c):
            return message
    if _same(received[0], step((0, 1, 2, 3), tanh_of_cell=False)[0]):
        return "h = o · tanh(c): the new cell state goes through tanh before the output gate scales it."
    return None


# --- 03.3: encoding by merge rank -------------------------------------------------------------


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
    while (
        found := next((i for i, pair in enumerate(zip(leftmost, leftmost[1:])) if pair in merges), None)
    ) is not None:
        leftmost = leftmost[:found] + [leftmost[found] + leftmost[found + 1]] + leftmost[found + 2 :]
    if received == leftmost:
        return (
            "the leftmost pair that is a merge was merged first: merge the pair of lowest **rank** (the earliest "
            "merge learned) wherever it is in the word, then look again."
        )
    ranks = {pair: rank for rank, pair in enumerate(reversed(merges))}
    latest = list(word)
    while len(latest) > 1:
        rank, pair = min((ranks.get(pair, math.inf), pair) for pair in zip(latest, latest[1:]))
        if rank == math.inf:
            break
        latest = _merged(latest, pair)
    if received == latest:
        return "the last merge learned was applied first: the lowest rank, the first merge in the list, goes first."
    ranked = {pair: rank for rank, pair in enumerate(merges)}
    once = list(word)  # one merge, then no looking again
    rank, pair = min(((ranked.get(pair, math.inf), pair) for pair in zip(once, once[1:])), default=(math.inf, None))
    if rank < math.inf:
        once = _merged(once, pair)
        if received == once and once != expected:
            return (
                "only the first merge was applied: after each merge, look at the new neighbours again and keep "
                "merging while some pair is a learned merge."
            )
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

    from_one = (positions + 1) / 10000 ** (np.arange(0, depth, 2) / depth)
    return _first_match(
        received,
        [
            (
                "the positions start at 1: the first row is position 0 (sin 0 = 0 and cos 0 = 1 in every pair).",
                interleaved(np.sin(from_one), np.cos(from_one)),
            ),
            (
                "the sines fill the first half and the cosines the second: interleave them, sin in even columns 2i and "
                "cos in odd columns 2i + 1.",
                np.concatenate([np.sin(pair_angles), np.cos(pair_angles)], axis=1),
            ),
            (
                "sin and cos are swapped: column 2i holds sin, column 2i + 1 holds cos.",
                interleaved(np.cos(pair_angles), np.sin(pair_angles)),
            ),
            (
                "the frequencies fall too slowly: the exponent is 2i/d where i counts pairs of columns (column 2i "
                "and 2i + 1 share one frequency), not i/d.",
                interleaved(np.sin(column_angles), np.cos(column_angles)),
            ),
        ],
        atol=1e-5,
        expected=expected,
    )


# --- 04.6: the self-attention mask of a padded batch -------------------------------------------


def self_attention_mask_hint(arguments, received, expected):
    real = np.asarray(arguments["token_ids"]) != 0  # (B, T)
    length = real.shape[1]
    lower = np.tril(np.ones((length, length), dtype=bool))
    causal_part = lower if arguments["causal"] else np.ones_like(lower)
    queries, keys = real[:, :, None], real[:, None, :]
    return _first_match(
        received,
        [
            (
                "a padded query attends to nothing: mask the rows of padding positions too (a position may attend only "
                "when it and the key are both real tokens).",
                np.broadcast_to(keys, expected.shape) & causal_part,
            ),
            (
                "no query may attend to a padded key: mask the columns of padding positions (only the rows are masked "
                "here).",
                np.broadcast_to(queries, expected.shape) & causal_part,
            ),
            (
                "the causal part leaves out the diagonal: a position may attend to itself, key j <= query i "
                "(np.tril, not a strict j < i).",
                queries & keys & np.tril(np.ones_like(lower), k=-1) if arguments["causal"] else None,
            ),
            (
                "the causal part is reversed: query i may attend keys 0 to i, the lower triangle "
                "(np.tril), not the later "
                "keys.",
                queries & keys & np.triu(np.ones_like(lower)) if arguments["causal"] else None,
            ),
            (
                "`causal` is not followed: with causal=True the later keys are masked, with "
                "causal=False every real key "
                "may be attended.",
                queries & keys & (np.ones_like(lower) if arguments["causal"] else lower),
            ),
        ],
        expected=expected,
    )


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
        for wrong in (index - 1, index + 1):
            if 0 <= wrong < keys.shape[2]:
                written = keys.copy()
                written[:, :, wrong : wrong + 1] = key
                if _same(received[1], written):
                    return (
                        f"the new key was written at position {wrong}: write it (and the value) at position "
                        f"`index` = {index}, the new token's own position."
                    )
        return None

    def attend(upto, key_cache, value_cache):
        scores = query @ np.swapaxes(key_cache[:, :, :upto], -1, -2) / math.sqrt(query.shape[-1])
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return scores / scores.sum(axis=-1, keepdims=True) @ value_cache[:, :, :upto]

    new_keys, new_values = np.asarray(expected[1]), np.asarray(expected[2])
    variants = [
        (
            "the output attended over the whole cache: positions after `index` hold stale values, not keys of "
            "this sequence. Attend over positions 0 … index only.",
            attend(keys.shape[2], new_keys, new_values),
        ),
        (
            "the output attended over positions 0 … index - 1: include position `index`, the token itself.",
            attend(index, new_keys, new_values) if index > 0 else None,
        ),
        (
            "the output was computed before the new key and value were written: write them at `index`, then attend.",
            attend(index + 1, keys, values),
        ),
    ]
    return _first_match(
        received[0],
        [(message, output) for message, output in variants if output is not None],
        atol=1e-5,
        expected=expected[0],
    )


def perplexity_and_bits_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    scores = np.asarray(arguments["log_probabilities"], dtype="float64")
    real = np.asarray(arguments["targets"]) != 0
    characters = arguments["characters"]
    perplexity, bits = (float(np.asarray(value, dtype="float64")) for value in received)
    if not np.isclose(perplexity, expected[0], rtol=1e-5) and np.isclose(
        perplexity, math.exp(-scores.mean()), rtol=1e-5
    ):
        return "padding was counted in the perplexity's mean: average over the real targets only (targets != 0)."
    if np.isclose(bits, -scores[real].sum() / characters, rtol=1e-5):
        return "the bits per character are in nats: divide the natural-log sum by ln 2."
    if np.isclose(bits, -scores[real].sum() / math.log(2) / real.sum(), rtol=1e-5):
        return "that is bits per token: divide by the number of characters, not of tokens."
    return None


def narrow_interval_hint(arguments, received, expected):
    """09.6: each usual slip of the narrowing, recomputed exactly (the ends are integers near 2**32)."""
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    try:
        got = tuple(float(np.asarray(value)) for value in received)
    except (TypeError, ValueError):
        return None
    if any(np.asarray(value).dtype.kind == "f" for value in received):
        return (
            "the ends are floats: the coder's interval holds integers. Use floor division `//` on Python "
            "ints (width * cumulative // total), never `/`."
        )
    low, high, symbol = int(arguments["low"]), int(arguments["high"]), int(arguments["symbol"])
    cumulative = [0, *np.cumsum(np.asarray(arguments["frequencies"], dtype="int64")).tolist()]
    total, width = cumulative[-1], high - low + 1
    below, through = cumulative[symbol], cumulative[symbol + 1]
    variants = [
        (
            "the new high is one too large: high is inclusive, so it is low + width * (c + f) // total - 1.",
            (low + width * below // total, low + width * through // total),
        ),
        (
            "the width is one too small: the interval [low, high] holds high - low + 1 integers.",
            (low + (width - 1) * below // total, low + (width - 1) * through // total - 1),
        ),
        (
            "the share starts one symbol late: symbol s starts at the sum of the frequencies *before* it "
            "(frequencies[:s], 0 for the first symbol; np.cumsum has no leading 0) and ends f[s] later.",
            (low + width * through // total, low + width * (through + through - below) // total - 1),
        ),
        (
            "the new high was computed from the new low: compute both ends from the old low.",
            (low + width * below // total, low + width * below // total + width * through // total - 1),
        ),
    ]
    for message, variant in variants:
        if variant is not None and variant != tuple(expected) and got == tuple(float(value) for value in variant):
            return message
    return None


# --- 07.3-07.6: teacher forcing, a beam-search step, the schedule and the optimizer ----------


def _cross_entropy(probabilities, labels):
    return -np.log(np.take_along_axis(np.asarray(probabilities, dtype="float64"), labels[..., None], axis=-1)[..., 0])


def teacher_forcing_loss_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 3:
        return None
    target_ids = np.asarray(arguments["target_ids"])
    if _same(received[0], target_ids[:, 1:]) or _same(received[1], target_ids[:, :-1]):
        return (
            "the shift goes the wrong way: the decoder reads every id but the last ([start] first) and learns to "
            "predict every id but the first (the next one)."
        )
    labels = target_ids[:, 1:]
    losses = _cross_entropy(arguments["probabilities"], labels)
    real = labels != 0
    if _same(received[2], losses.mean()):
        return "padding was counted: average the cross-entropy over the positions whose label is not 0."
    from_inputs = target_ids[:, :-1] != 0
    if not np.array_equal(from_inputs, real) and _same(received[2], losses[from_inputs].mean()):
        return (
            "the mask came from the decoder inputs: a position counts when its **label** is real (labels != 0); "
            "the inputs are shifted by one, so their mask keeps the first padding label and drops the last "
            "real one."
        )
    rows = np.array([row[keep].mean() for row, keep in zip(losses, real)])
    if _same(received[2], rows.mean()):
        return (
            "each sentence was averaged first, then the sentences: average over all real tokens of the batch "
            "at once, so a long sentence counts for every token it holds."
        )
    return None


def beam_step_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 5:
        return None
    tokens = np.asarray(received[1])
    if tokens.size and np.any(tokens == arguments["end_id"]):
        return (
            "a beam that produced `end_id` is still among the live beams: set it aside as finished (with its "
            "normalised score) and keep looking for `beam_width` live ones."
        )
    if len(expected[3]) and _same(received[3], expected[3]) and np.asarray(received[4]).shape == expected[4].shape:
        scores, log_probabilities = (
            np.asarray(arguments[name], dtype="float64") for name in ("scores", "log_probabilities")
        )
        raw = scores[np.asarray(expected[3])] + log_probabilities[np.asarray(expected[3]), arguments["end_id"]]
        if _same(received[4], raw) and arguments["alpha"] != 0:
            return (
                "the finished scores are not length-normalised: divide each by the length penalty "
                f"((5 + step) / 6) ** alpha, here step = {arguments['step']}."
            )
        for length in (arguments["step"] - 1, arguments["step"] + 1):
            if arguments["alpha"] != 0 and _same(received[4], raw / ((5 + length) / 6) ** arguments["alpha"]):
                return (
                    f"the length penalty used a length of {length}: `step` = {arguments['step']} is already "
                    "the length each beam reaches with this token (the start id not counted)."
                )
    if len(received[0]) < len(expected[0]):
        return (
            "fewer live beams than `beam_width`: look through the best 2 × beam_width candidates, since the "
            "ones that finish do not count as live."
        )
    return None


def warmup_cosine_hint(arguments, received, expected):
    steps = np.asarray(arguments["steps"], dtype="float64")
    peak, warmup, decay, final = (arguments[name] for name in ("peak", "warmup_steps", "decay_steps", "final_fraction"))

    def rates(first_step_offset=1.0, floor=final, decay_from=warmup, last_warmup_step=warmup - 1):
        progress = np.clip((steps - decay_from) / (decay - decay_from), 0.0, 1.0)
        decayed = peak * (floor + (1 - floor) * (1 + np.cos(np.pi * progress)) / 2)
        return np.where(steps <= last_warmup_step, peak * (steps + first_step_offset) / warmup, decayed)

    return _first_match(
        received,
        [
            (
                "step 0 got a rate of 0: count steps from 1 in the warm-up, peak × (step + 1) / warmup_steps, so the "
                "first update already moves.",
                rates(first_step_offset=0.0),
            ),
            (
                "the rate falls to 0: the cosine goes from the peak down to final_fraction × peak, not to 0.",
                rates(floor=0.0) if final else None,
            ),
            (
                "the cosine's progress was measured from step 0: it starts at the end of the warm-up, "
                "(step − warmup_steps) / (decay_steps − warmup_steps).",
                rates(decay_from=0) if warmup else None,
            ),
            (
                "step warmup_steps went above the peak: the warm-up covers steps 0 … warmup_steps − "
                "1 (the last of them "
                "reaches the peak); from step warmup_steps on, the cosine.",
                rates(last_warmup_step=warmup) if np.any(steps == warmup) else None,
            ),
        ],
        atol=1e-9,
        expected=expected,
    )


def adamw_step_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 3:
        return None
    values = {name: np.asarray(arguments[name], dtype="float64") for name in ("parameters", "gradients", "m", "v")}
    rate, beta_1, beta_2, epsilon, decay, step = (
        arguments[name] for name in ("learning_rate", "beta_1", "beta_2", "epsilon", "weight_decay", "step")
    )

    def update(gradients, decoupled=True, corrected=True, epsilon_inside=False, decay_factor=None, decay_after=False):
        m = beta_1 * values["m"] + (1 - beta_1) * gradients
        v = beta_2 * values["v"] + (1 - beta_2) * gradients**2
        scale = rate * np.sqrt(1 - beta_2**step) / (1 - beta_1**step) if corrected else rate
        denominator = np.sqrt(v + epsilon) if epsilon_inside else np.sqrt(v) + epsilon
        factor = (1 - rate * decay) if decay_factor is None else decay_factor
        if decay_after:
            return (values["parameters"] - scale * m / denominator) * factor
        kept = values["parameters"] * factor if decoupled else values["parameters"]
        return kept - scale * m / denominator

    gradients = values["gradients"]
    return _first_match(
        received[0],
        [
            (
                "the moments were not bias-corrected: early on m and v are pulled towards their zero start; scale the "
                "step by √(1 − β₂ᵗ) / (1 − β₁ᵗ).",
                update(gradients, corrected=False),
            ),
            (
                "the weight decay went through the gradient (L2 regularisation, Adam's way): AdamW "
                "decays the parameters "
                "directly, θ ← θ − lr · λ · θ, outside the moments.",
                update(gradients + decay * values["parameters"], decoupled=False) if decay else None,
            ),
            ("ε went inside the square root: Keras divides by √v̂ + ε.", update(gradients, epsilon_inside=True)),
            (
                "the decay left out the learning rate: θ ← θ − lr · λ · θ, the factor is 1 − lr · λ, not 1 − λ.",
                update(gradients, decay_factor=1 - decay) if decay else None,
            ),
            (
                "the decay was applied after the step, to the updated parameters: decay θ first, θ ← θ − lr · λ · θ, "
                "then take the Adam step from the decayed θ.",
                update(gradients, decay_after=True) if decay else None,
            ),
        ],
        atol=1e-6,
        expected=expected[0],
    )
