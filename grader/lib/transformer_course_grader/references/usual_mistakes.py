"""The usual mistakes of the exercises, recomputed: what each gives on a case, and the hint that names it.

For each exercise, one function ``(arguments, right) -> [(message, output, compared where), ...]``: ``arguments``
are a case's keyword arguments, ``right`` the reference's output on them, and each entry is the output one usual
mistake gives there (None where the mistake does not apply to these arguments), with the message that names it.
An output that is a tuple may hold None in place of the items the mistake is not judged by (they are not
compared). ``compared where`` is None (the whole output) or a bool array over the leading axes.

These recompute answers one slip away, so they live in the grader only, and where a mistake is the reference with
a switch (01.2, 03.3, 04.5, 05.3, 07.5, 07.6, 09.3, 09.5, 10.2, 11.1, 11.3) they call the reference. The students'
checks get their outputs on the public cases as data, written into ``public_cases.json`` by
:func:`~transformer_course_grader.references.public_cases`; the grader computes them on the secret cases
(:func:`~transformer_course_grader.references.mistakes`). A hint that is a property of the received value, not
an output to compare with (a row that goes on after its end token, symbols that do not spell the word), stays a
judge in the students' catalogue.
"""

from __future__ import annotations

import math

import numpy as np

from . import REGISTRY

__all__ = ["MISTAKES"]


def _reference(exercise_id):
    """The reference of ``exercise_id``, whose keyword switches make its usual mistakes."""
    return REGISTRY[exercise_id].reference


def _floats(*arrays):
    return tuple(np.asarray(array, dtype="float64") for array in arrays)


# --- 01 to 03 -----------------------------------------------------------------------------------------------


def _lstm_step(arguments, right):
    def step(**switches):
        return _reference("01.2")(**arguments, **switches)

    return [
        (
            "the input and forget gates are swapped: Keras' kernel holds the gates in the order i, f, c̃, o (input, "
            "forget, candidate, output).",
            step(order=(1, 0, 2, 3)),
            None,
        ),
        ("the candidate and the output gate are swapped: the order is i, f, c̃, o.", step(order=(0, 1, 3, 2)), None),
        (
            "h = o · tanh(c): the new cell state goes through tanh before the output gate scales it.",
            (step(tanh_of_cell=False)[0], None),
            None,
        ),
    ]


def _luong_general(arguments, right):
    keys, weight, query = _floats(arguments["keys"], arguments["weight"], arguments["query"])
    return [
        (
            "the result is what `weight` transposed gives: score[s] = keys[s] @ weight @ query.",
            keys @ weight.T @ query,
            None,
        )
    ]


def _encode_word(arguments, right):
    word, merges = arguments["word"], list(arguments["merges"])
    encode = _reference("03.3")
    return [
        (
            "the leftmost pair that is a merge was merged first: merge the pair of lowest **rank** (the earliest "
            "merge learned) wherever it is in the word, then look again.",
            encode(word, merges, leftmost=True),
            None,
        ),
        (
            "the last merge learned was applied first: the lowest rank, the first merge in the list, goes first.",
            encode(word, merges[::-1]),
            None,
        ),
        (
            "only the first merge was applied: after each merge, look at the new neighbours again and keep merging "
            "while some pair is a learned merge.",
            encode(word, merges, at_most=1),
            None,
        ),
    ]


def _skipgram_pairs(arguments, right):
    ids, window = list(arguments["token_ids"]), arguments["window"]
    near = [(i, j) for i in range(len(ids)) for j in range(len(ids)) if abs(i - j) <= window]

    def off_by_one(reach):
        return [(ids[i], ids[j]) for i in range(len(ids)) for j in range(len(ids)) if 0 < abs(i - j) <= reach]

    return [
        ("each word was paired with itself: leave out position i.", [(ids[i], ids[j]) for i, j in near], None),
        (
            "only the words after the centre were paired: the window reaches `window` positions on both sides.",
            [(ids[i], ids[j]) for i, j in near if j > i],
            None,
        ),
        *(
            (
                f"the window reached {wrong} positions on each side: the context of position i is positions "
                "i − window … i + window, both ends included, i itself left out.",
                off_by_one(reach),
                None,
            )
            for reach, wrong in ((window - 1, "only `window` - 1"), (window + 1, "`window` + 1"))
        ),
    ]


# --- 04: attention, heads and positions ---------------------------------------------------------------------


def _scaled_attention(arguments, right):
    expected_weights = np.asarray(right[1], dtype="float64")
    depth = np.asarray(arguments["query"]).shape[-1]
    # Without the scaling, each weight is the expected one raised to the power sqrt(d_k), renormalised.
    sharpened = expected_weights ** np.sqrt(depth)
    total = sharpened.sum(axis=-1, keepdims=True)
    unscaled = np.where(total > 0, sharpened / np.where(total > 0, total, 1.0), 0.0)
    return [
        (
            f"the weights are those of unscaled scores: divide Q Kᵀ by √d_k = √{depth} before the softmax.",
            (None, unscaled),
            None,
        )
    ]


def _one_reshape(argument, message):
    """The mistake of a single reshape of ``argument`` to the answer's shape (the axes not moved first)."""

    def found(arguments, right):
        return [(message, np.asarray(arguments[argument]).reshape(np.shape(right)), None)]

    return found


_split_heads = _one_reshape(
    "x",
    "one reshape straight to (B, N, T, H) mixes positions into heads: reshape to (B, T, N, H) first, then "
    "transpose to (B, N, T, H).",
)
_merge_heads = _one_reshape(
    "x",
    "transpose (B, N, T, H) to (B, T, N, H) before the reshape, or the heads' rows get mixed up.",
)
_patchify = _one_reshape(
    "images",
    'one reshape straight to (B, M, P·P·C) makes each "patch" a strip of pixels across several patches: '
    "reshape to (B, height/P, P, width/P, P, C), transpose to (B, height/P, width/P, P, P, C), then flatten.",
)


def _sinusoidal(arguments, right):
    length, depth = arguments["length"], arguments["depth"]
    positions = np.arange(length, dtype="float64")[:, None]
    pair_angles = positions / 10000 ** (np.arange(0, depth, 2) / depth)  # (T, E/2)
    column_angles = positions / 10000 ** (np.arange(depth // 2) / depth)  # the exponent 2i/d written i/d
    from_one = (positions + 1) / 10000 ** (np.arange(0, depth, 2) / depth)

    def interleaved(first, second):
        table = np.zeros((length, depth))
        table[:, 0::2], table[:, 1::2] = first, second
        return table

    return [
        (
            "the positions start at 1: the first row is position 0 (sin 0 = 0 and cos 0 = 1 in every pair).",
            interleaved(np.sin(from_one), np.cos(from_one)),
            None,
        ),
        (
            "the sines fill the first half and the cosines the second: interleave them, sin in even columns 2i and "
            "cos in odd columns 2i + 1.",
            np.concatenate([np.sin(pair_angles), np.cos(pair_angles)], axis=1),
            None,
        ),
        (
            "sin and cos are swapped: column 2i holds sin, column 2i + 1 holds cos.",
            interleaved(np.cos(pair_angles), np.sin(pair_angles)),
            None,
        ),
        (
            "the frequencies fall too slowly: the exponent is 2i/d where i counts pairs of columns (column 2i and "
            "2i + 1 share one frequency), not i/d.",
            interleaved(np.sin(column_angles), np.cos(column_angles)),
            None,
        ),
    ]


def _self_attention_mask(arguments, right):
    real = np.asarray(arguments["token_ids"]) != 0  # (B, T)
    causal = arguments["causal"]
    length = real.shape[1]
    lower = np.tril(np.ones((length, length), dtype=bool))
    causal_part = lower if causal else np.ones_like(lower)
    queries, keys = real[:, :, None], real[:, None, :]
    shape = np.shape(right)
    return [
        (
            "a padded query attends to nothing: mask the rows of padding positions too (a position may attend only "
            "when it and the key are both real tokens).",
            np.broadcast_to(keys, shape) & causal_part,
            None,
        ),
        (
            "no query may attend to a padded key: mask the columns of padding positions (only the rows are masked "
            "here).",
            np.broadcast_to(queries, shape) & causal_part,
            None,
        ),
        (
            "the causal part leaves out the diagonal: a position may attend to itself, key j <= query i (np.tril, "
            "not a strict j < i).",
            queries & keys & np.tril(np.ones_like(lower), k=-1) if causal else None,
            None,
        ),
        (
            "the causal part is reversed: query i may attend keys 0 to i, the lower triangle (np.tril), not the "
            "later keys.",
            queries & keys & np.triu(np.ones_like(lower)) if causal else None,
            None,
        ),
        (
            "`causal` is not followed: with causal=True the later keys are masked, with causal=False every real key "
            "may be attended.",
            queries & keys & (np.ones_like(lower) if causal else lower),
            None,
        ),
    ]


# --- 06 to 08: pooling, decoding, the schedule, the optimizer, the masked LM ----------------------------------


def _masked_max(arguments, right):
    values = np.asarray(arguments["values"], dtype="float64")
    return [
        ("padding positions took part in the max: only positions where `mask` is True may win.", values.max(1), None)
    ]


def _masked_mean(arguments, right):
    values, mask = np.asarray(arguments["values"], dtype="float64"), np.asarray(arguments["mask"])
    return [
        (
            "the sum was divided by T, every position: divide by the number of real tokens in each row "
            "(mask.sum(axis=1)), so a short review is not diluted by its padding.",
            np.where(mask[..., None], values, 0.0).sum(axis=1) / values.shape[1],
            None,
        ),
        ("padding took part in the mean: sum only the positions where `mask` is True.", values.mean(axis=1), None),
    ]


def _cross_entropy(probabilities, labels):
    return -np.log(np.take_along_axis(np.asarray(probabilities, dtype="float64"), labels[..., None], axis=-1)[..., 0])


def _teacher_forcing_loss(arguments, right):
    target_ids = np.asarray(arguments["target_ids"])
    shifted_wrong_way = (
        "the shift goes the wrong way: the decoder reads every id but the last ([start] first) and learns to "
        "predict every id but the first (the next one)."
    )
    labels = target_ids[:, 1:]
    losses = _cross_entropy(arguments["probabilities"], labels)
    real, from_inputs = labels != 0, target_ids[:, :-1] != 0
    rows = np.array([row[keep].mean() for row, keep in zip(losses, real) if keep.any()])
    return [
        (shifted_wrong_way, (target_ids[:, 1:], None, None), None),
        (shifted_wrong_way, (None, target_ids[:, :-1], None), None),
        (
            "padding was counted: average the cross-entropy over the positions whose label is not 0.",
            (None, None, losses.mean()),
            None,
        ),
        (
            "the mask came from the decoder inputs: a position counts when its **label** is real (labels != 0); the "
            "inputs are shifted by one, so their mask keeps the first padding label and drops the last real one.",
            (None, None, losses[from_inputs].mean()) if from_inputs.any() else None,
            None,
        ),
        (
            "each sentence was averaged first, then the sentences: average over all real tokens of the batch at "
            "once, so a long sentence counts for every token it holds.",
            (None, None, rows.mean()) if rows.size else None,
            None,
        ),
    ]


def _beam_step(arguments, right):
    if not len(right[3]) or not arguments["alpha"]:
        return []
    scores, log_probabilities = _floats(arguments["scores"], arguments["log_probabilities"])
    finished = np.asarray(right[3])
    raw = scores[finished] + log_probabilities[finished, arguments["end_id"]]
    step, alpha = arguments["step"], arguments["alpha"]
    return [
        (
            "the finished scores are not length-normalised: divide each by the length penalty ((5 + step) / 6) ** "
            f"alpha, here step = {step}.",
            (None, None, None, right[3], raw),
            None,
        ),
        *(
            (
                f"the length penalty used a length of {length}: `step` = {step} is already the length each beam "
                "reaches with this token (the start id not counted).",
                (None, None, None, right[3], raw / ((5 + length) / 6) ** alpha),
                None,
            )
            for length in (step - 1, step + 1)
        ),
    ]


def _warmup_cosine(arguments, right):
    warmup, final = arguments["warmup_steps"], arguments["final_fraction"]

    def rates(**switches):
        return _reference("07.5")(**arguments, **switches)

    return [
        (
            "step 0 got a rate of 0: count steps from 1 in the warm-up, peak × (step + 1) / warmup_steps, so the "
            "first update already moves.",
            rates(first_step=0),
            None,
        ),
        (
            "the rate falls to 0: the cosine goes from the peak down to final_fraction × peak, not to 0.",
            rates(floor=0.0) if final else None,
            None,
        ),
        (
            "the cosine's progress was measured from step 0: it starts at the end of the warm-up, (step − "
            "warmup_steps) / (decay_steps − warmup_steps).",
            rates(decay_from=0) if warmup else None,
            None,
        ),
        (
            "step warmup_steps went above the peak: the warm-up covers steps 0 … warmup_steps − 1 (the last of them "
            "reaches the peak); from step warmup_steps on, the cosine.",
            rates(warmup_end=warmup + 1) if np.any(np.asarray(arguments["steps"]) == warmup) else None,
            None,
        ),
    ]


def _adamw_step(arguments, right):
    decay = arguments["weight_decay"]

    def update(**switches):
        return _reference("07.6")(**arguments, **switches)[0], None, None  # judged by the parameters

    return [
        (
            "the moments were not bias-corrected: early on m and v are pulled towards their zero start; scale the "
            "step by √(1 − β₂ᵗ) / (1 − β₁ᵗ).",
            update(corrected=False),
            None,
        ),
        (
            "the weight decay went through the gradient (L2 regularisation, Adam's way): AdamW decays the parameters "
            "directly, θ ← θ − lr · λ · θ, outside the moments.",
            update(decay="l2") if decay else None,
            None,
        ),
        ("ε went inside the square root: Keras divides by √v̂ + ε.", update(epsilon_inside=True), None),
        (
            "the decay left out the learning rate: θ ← θ − lr · λ · θ, the factor is 1 − lr · λ, not 1 − λ.",
            update(decay="without rate") if decay else None,
            None,
        ),
        (
            "the decay was applied after the step, to the updated parameters: decay θ first, θ ← θ − lr · λ · θ, then "
            "take the Adam step from the decayed θ.",
            update(decay="after") if decay else None,
            None,
        ),
    ]


def _masked_lm_loss(arguments, right):
    probabilities, labels = np.asarray(arguments["probabilities"], dtype="float64"), np.asarray(arguments["labels"])
    picked = -np.log(np.take_along_axis(probabilities, labels[..., None], axis=-1)[..., 0])
    return [
        (
            "every position was counted: the loss averages over the chosen positions only (label != 0).",
            picked.mean(),
            None,
        )
    ]


# --- 09: sampling, the cache, perplexity, the coder -------------------------------------------------------------


def _softmax(scaled):
    weights = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def _temperature(arguments, right):
    logits, temperature = np.asarray(arguments["logits"], dtype="float64"), arguments["temperature"]
    if temperature == 1:
        return []
    return [
        ("the logits were multiplied by the temperature: divide them by it.", _softmax(logits * temperature), None),
        ("the temperature was not applied: take the softmax of logits / temperature.", _softmax(logits), None),
    ]


def _nucleus(arguments, right):
    probabilities, p = np.asarray(arguments["probabilities"], dtype="float64"), arguments["p"]
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    cumulative = np.cumsum(ranked, axis=-1)

    def kept_by(keep):
        candidate = np.zeros_like(probabilities)
        np.put_along_axis(candidate, order, np.where(keep, ranked, 0.0), axis=-1)
        return candidate / candidate.sum(axis=-1, keepdims=True) if np.all(candidate.sum(axis=-1) > 0) else None

    return [
        (
            "a token whose probability ranked above it is exactly p was dropped: keep a token while that mass is at "
            "most p (<=, the rule of keras-hub's TopPSampler), not below it.",
            kept_by(cumulative - ranked < p),
            None,
        ),
        (
            "the token that makes the total reach p is missing: keep a token while the probability ranked above it "
            "is at most p.",
            kept_by(cumulative <= p),
            None,
        ),
        (
            "the kept probabilities are not renormalised: divide each row by its sum.",
            np.where(np.asarray(right, dtype="float64") > 0, probabilities, 0.0),
            None,
        ),
    ]


def _cached_attention_step(arguments, right):
    index, capacity = arguments["index"], np.shape(arguments["key_cache"])[2]

    def step(**switches):
        return _reference("09.3")(**arguments, **switches)

    return [
        (
            f"the key cache came back unchanged: write `key` at position index = {index} first.",
            (None, np.asarray(arguments["key_cache"], dtype="float64"), None),
            None,
        ),
        *(
            (
                f"the new key was written at position {wrong}: write it (and the value) at position `index` = "
                f"{index}, the new token's own position.",
                (None, step(written_at=wrong)[1], None),
                None,
            )
            for wrong in (index - 1, index + 1)
            if 0 <= wrong < capacity
        ),
        (
            "the output attended over the whole cache: positions after `index` hold stale values, not keys of this "
            "sequence. Attend over positions 0 … index only.",
            step(attended=capacity),
            None,
        ),
        (
            "the output attended over positions 0 … index - 1: include position `index`, the token itself.",
            step(attended=index) if index > 0 else None,
            None,
        ),
        (
            "the output was computed before the new key and value were written: write them at `index`, then attend.",
            step(attend_before_writing=True),
            None,
        ),
    ]


def _perplexity_and_bits(arguments, right):
    scores = np.asarray(arguments["log_probabilities"], dtype="float64")
    real = np.asarray(arguments["targets"]) != 0
    characters = arguments["characters"]
    return [
        (
            "padding was counted in the perplexity's mean: average over the real targets only (targets != 0).",
            (math.exp(-scores.mean()), None),
            None,
        ),
        (
            "the bits per character are in nats: divide the natural-log sum by ln 2.",
            (None, -scores[real].sum() / characters),
            None,
        ),
        (
            "that is bits per token: divide by the number of characters, not of tokens.",
            (None, -scores[real].sum() / math.log(2) / real.sum()) if real.any() else None,
            None,
        ),
    ]


def _narrow_interval(arguments, right):
    """09.6: each usual slip of the narrowing, exactly (the ends are integers near 2**32; compared exactly)."""
    low, high, symbol = int(arguments["low"]), int(arguments["high"]), int(arguments["symbol"])
    cumulative = [0, *np.cumsum(np.asarray(arguments["frequencies"], dtype="int64")).tolist()]
    total, width = cumulative[-1], high - low + 1
    below, through = cumulative[symbol], cumulative[symbol + 1]
    return [
        (
            "the new high is one too large: high is inclusive, so it is low + width * (c + f) // total - 1.",
            (low + width * below // total, low + width * through // total),
            None,
        ),
        (
            "the width is one too small: the interval [low, high] holds high - low + 1 integers.",
            (low + (width - 1) * below // total, low + (width - 1) * through // total - 1),
            None,
        ),
        (
            "the share starts one symbol late: symbol s starts at the sum of the frequencies *before* it "
            "(frequencies[:s], 0 for the first symbol; np.cumsum has no leading 0) and ends f[s] later.",
            (low + width * through // total, low + width * (through + through - below) // total - 1),
            None,
        ),
        (
            "the new high was computed from the new low: compute both ends from the old low.",
            (low + width * below // total, low + width * below // total + width * through // total - 1),
            None,
        ),
    ]


# --- 10 to 13 ----------------------------------------------------------------------------------------------------


def _rollout(arguments, right):
    def rollout(**switches):
        return _reference("10.2")(**arguments, **switches)

    return [
        (
            "the layers are multiplied in the wrong order: the last layer's matrix goes on the left, rollout = "
            "Ã_L ··· Ã_2 Ã_1.",
            rollout(last_on_left=False),
            None,
        ),
        (
            "the identity is missing: add it to each layer's head-averaged weights (the residual connection) before "
            "renormalising.",
            rollout(identity=False),
            None,
        ),
        (
            "the rows are not renormalised: after adding the identity each row sums to 2; divide it by its sum.",
            rollout(renormalised=False),
            None,
        ),
    ]


def _rotation(arguments, right):
    return [
        (
            "feature i was paired with feature i + 1 (interleaved); pair i with i + H/2, the two halves.",
            _reference("11.1")(**arguments, interleaved=True),
            None,
        ),
        ("the positions started at 0: x[:, t] sits at start_index + t.", _reference("11.1")(arguments["x"], 0), None),
        (
            "the rotation turns the wrong way: the first half gets x₁ cos − x₂ sin, the second x₂ cos + x₁ sin.",
            _reference("11.1")(**arguments, direction=-1),
            None,
        ),
    ]


def _rms_norm(arguments, right):
    x, scale = _floats(arguments["x"], arguments["scale"])
    epsilon = arguments["epsilon"]
    centred = x - x.mean(axis=-1, keepdims=True)
    root_mean_square = np.sqrt((x**2).mean(axis=-1, keepdims=True))
    return [
        (
            "the mean was subtracted (that is LayerNorm): divide x itself by its root mean square.",
            centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + epsilon) * scale,
            None,
        ),
        (
            "epsilon was added outside the square root: sqrt(mean(x²) + epsilon).",
            x / (root_mean_square + epsilon) * scale,
            None,
        ),
        ("the scale was not applied: multiply by scale at the end.", x / np.sqrt(root_mean_square**2 + epsilon), None),
    ]


def _grouped_attention(arguments, right):
    heads, groups = np.shape(arguments["query"])[2], np.shape(arguments["key"])[2]
    return [
        (
            "query head n read key/value head n % G (np.tile): the heads of a group are neighbours, so head n reads "
            "head n // (N / G) (np.repeat along the heads' axis).",
            _reference("11.3")(**arguments, tiled=True) if 1 < groups < heads else None,
            None,
        ),
        (
            "the scores were not divided by √H (the head width).",
            _reference("11.3")(**arguments, scaled=False),
            None,
        ),
        (
            "the softmax ran over the queries: each query's weights must sum to 1 over the keys.",
            _reference("11.3")(**arguments, softmax_axis=-2),
            None,
        ),
    ]


def _tiled_attention(arguments, right):
    tiled = _reference("11.4")
    tiles = -(-np.shape(arguments["key"])[0] // int(arguments["tile_size"]))
    moved = tiles > 1  # with one tile the running maximum never moves: the rescalings cannot show
    return [
        (
            "the output accumulated so far was not rescaled when the maximum grew: multiply it by "
            "exp(old maximum − new maximum) before adding the new tile's weighted values.",
            tiled(**arguments, rescale_output=False) if moved else None,
            None,
        ),
        (
            "the running sum was not rescaled when the maximum grew: multiply it by exp(old maximum − new maximum) "
            "before adding the new tile's weights.",
            tiled(**arguments, rescale_sum=False) if moved else None,
            None,
        ),
        ("the scores were not divided by √H (the head width).", tiled(**arguments, scaled=False), None),
        (
            "the mask was not applied: a masked score is −∞ before the maximum and the exponential (its weight 0).",
            tiled(**arguments, masked=False) if not np.all(arguments["mask"]) else None,
            None,
        ),
        (
            "the log-sum-exp left out the maximum: log Σ exp(s) = m + log Σ exp(s − m), with m the final running "
            "maximum and the sum the running one.",
            (None, tiled(**arguments, lse_max=False)[1]),
            None,
        ),
    ]


def _absmax(arguments, right):
    weights = np.asarray(arguments["weights"], dtype="float64")
    largest = np.abs(weights).max(axis=1)
    step = np.where(largest == 0, 1.0, largest / 127)
    whole = np.abs(weights).max() / 127 or 1.0
    return [
        (
            "the scales are 127 / max|w|, a multiplier: return the step max|w| / 127, so that w ≈ integers · scale.",
            (None, 1 / step, None),
            None,
        ),
        *(
            (
                f"the scale divides by {divisor}: the integers run over [-127, 127], so it is max|w| / 127.",
                (None, np.where(largest == 0, 1.0, largest / divisor), None),
                None,
            )
            for divisor in (128, 255)
        ),
        (
            "the integers were cut, not rounded: use np.round(w / scale).",
            (np.trunc(weights / step[:, None]), None, None),
            None,
        ),
        (
            "the integers were cut, not rounded: use np.round(w / scale).",
            (np.floor(weights / step[:, None]), None, None),
            None,
        ),
        (
            "one scale for the whole matrix: each row gets its own, from its own largest |w|.",
            (np.round(weights / whole), None, None),
            None,
        ),
    ]


def _groupwise_int4(arguments, right):
    weights = np.asarray(arguments["weights"], dtype="float64")
    size = int(arguments["group_size"])
    rows, columns = weights.shape
    groups = weights.reshape(rows, columns // size, size)
    largest = np.abs(groups).max(axis=2)
    step = np.where(largest == 0, 1.0, largest / 7)
    row_largest = np.abs(weights).max(axis=1, keepdims=True)
    row_step = np.where(row_largest == 0, 1.0, row_largest / 7)
    return [
        *(
            (
                f"the scale divides by {divisor}: int4's symmetric integers run over [-7, 7], so it is max|w| / 7.",
                (None, np.where(largest == 0, 1.0, largest / divisor), None),
                None,
            )
            for divisor in (8, 15)
        ),
        (
            "one scale for the whole row: each group of group_size consecutive weights of a row gets its own, from "
            "its own largest |w|.",
            (np.round(weights / row_step), None, None) if size != columns else None,
            None,
        ),
        (
            "the integers were cut, not rounded: use np.round(w / scale).",
            (np.trunc(groups / step[..., None]).reshape(rows, columns), None, None),
            None,
        ),
        (
            "the scales are 7 / max|w|, a multiplier: return the step max|w| / 7, so that w ≈ integers · scale.",
            (None, 1 / step, None),
            None,
        ),
        (
            "each scale served the wrong weights when dequantizing: repeat each group's scale over its group_size "
            "consecutive weights (np.repeat(scales, group_size, axis=1)), not the scales laid end to end "
            "(np.tile).",
            (None, None, right[0] * np.tile(right[1], (1, size))) if size > 1 and columns > size else None,
            None,
        ),
    ]


def _merge_lora(arguments, right):
    kernel, a, b = _floats(arguments["kernel"], arguments["a"], arguments["b"])
    alpha, rank = float(arguments["alpha"]), a.shape[1]
    change = a @ b
    return [
        ("the change AB was added without its scale α / r.", kernel + change, None),
        ("the change was scaled by α: the scale is α / r (r = A's second axis).", kernel + alpha * change, None),
        ("the scale is upside down: α / r, not r / α.", kernel + rank / alpha * change, None),
        ("W itself was left out: the merged kernel is W + (α / r) A B.", alpha / rank * change, None),
        (
            "the rank was read from A's first axis (d): r is its second, A is (d, r).",
            kernel + alpha / a.shape[0] * change,
            None,
        ),
    ]


def _data_parallel(arguments, right):
    x, y, w = _floats(arguments["x"], arguments["y"], arguments["w"])
    devices = int(arguments["devices"])
    shards = np.array(
        [rows_x.T @ (rows_x @ w - rows_y) for rows_x, rows_y in zip(np.split(x, devices), np.split(y, devices))]
    )  # each shard's sum of per-row gradients / 2
    rows = len(y) // devices
    no_factor_two = "the factor 2 of the squared error's derivative is missing: ∇(u²) = 2u ∇u."
    return [
        (
            "the shards' gradients were added up: DataParallel averages them (divide the sum by D).",
            (None, 2 / rows * shards.sum(axis=0)),
            None,
        ),
        (
            "each shard divided by the whole batch's B: a shard's loss is the mean over its own B / D rows.",
            (2 / len(y) * shards, None),
            None,
        ),
        (no_factor_two, (shards / rows, None), None),
        (no_factor_two, (None, shards.mean(axis=0) / rows), None),
    ]


def _chosen_log_probabilities(arguments):
    probabilities = np.asarray(arguments["probabilities"], dtype="float64")
    targets = np.asarray(arguments["targets"])
    return np.log(np.take_along_axis(probabilities, targets[..., None], axis=-1)[..., 0]), targets


def _prompt_masked(arguments, right):
    log_p, targets = _chosen_log_probabilities(arguments)
    positions = np.arange(targets.shape[1])[None, :]
    starts = np.asarray(arguments["prompt_lengths"])[:, None]
    real = targets != 0

    def mean_over(where):
        return float(-log_p[where].sum() / where.sum()) if where.any() else 0.0

    counted = (positions >= starts - 1) & real
    per_row = [-log_p[row][counted[row]].mean() for row in range(len(targets)) if counted[row].any()]
    return [
        (
            "every real target counted, the prompt's too: the loss is on the answer's tokens only.",
            mean_over(real),
            None,
        ),
        (
            "the mask starts one target late: target t predicts token t + 1, so the answer's first token is target "
            "prompt_length - 1.",
            mean_over((positions >= starts) & real),
            None,
        ),
        ("padding (target 0) was counted: leave it out.", mean_over(positions >= starts - 1), None),
        (
            "every target counted, the prompt's and the padding's too: the loss is on the answer's real tokens only.",
            mean_over(np.ones_like(real)),
            None,
        ),
        ("the sum of the answer tokens' losses: return their mean.", float(-log_p[counted].sum()), None),
        (
            "a mean per row, then over rows: the mean is over every answer token of the batch at once.",
            float(np.mean(per_row)) if per_row else None,
            None,
        ),
    ]


def _sequence_log_probability(arguments, right):
    logits = np.asarray(arguments["logits"], dtype="float64")
    targets, mask = np.asarray(arguments["targets"]), np.asarray(arguments["mask"], dtype="float64")
    raw = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    chosen = np.log(np.take_along_axis(_softmax(logits), targets[..., None], axis=-1)[..., 0])
    return [
        (
            "the logits themselves were summed: take log softmax first (subtract each position's log-sum-exp).",
            (raw * mask).sum(axis=-1),
            None,
        ),
        ("the probabilities were summed: sum their logs.", (np.exp(chosen) * mask).sum(axis=-1), None),
        ("every position counted: only the tokens the mask marks belong to the answer.", chosen.sum(axis=-1), None),
        (
            "the mean over the answer's tokens: a sequence's log-probability is their sum.",
            (chosen * mask).sum(axis=-1) / np.maximum(mask.sum(axis=-1), 1),
            None,
        ),
    ]


def _dpo(arguments, right):
    beta = float(arguments["beta"])
    chosen, rejected, reference_chosen, reference_rejected = _floats(
        *(arguments[name] for name in ("policy_chosen", "policy_rejected", "reference_chosen", "reference_rejected"))
    )
    margin = beta * ((chosen - reference_chosen) - (rejected - reference_rejected))
    return [
        (
            "the reference was left out: each reward is β (log π − log π_ref).",
            np.logaddexp(0, -beta * (chosen - rejected)),
            None,
        ),
        ("β is missing from the margin.", np.logaddexp(0, -margin / beta), None),
        ("the sign is turned: the loss is −log σ(margin) = log(1 + e^(−margin)).", np.logaddexp(0, margin), None),
        ("log σ(margin) without its minus sign: the loss must be ≥ 0.", -np.logaddexp(0, -margin), None),
        ("the mean over the pairs: return one loss per pair.", np.logaddexp(0, -margin).mean(), None),
    ]


def _kl_estimators(arguments, right):
    q, p = _floats(arguments["q"], arguments["p"])
    samples = np.asarray(arguments["samples"])

    def estimates(log_ratio):
        return np.array([-log_ratio, 0.5 * log_ratio**2, np.expm1(log_ratio) - log_ratio]).mean(axis=1)

    log_ratio = np.log(p[samples]) - np.log(q[samples])
    right_estimates = np.asarray(right[1], "float64")
    return [
        (
            "the ratio upside down: r = p(x) / q(x), the other distribution's probability over the sampler's.",
            (None, estimates(-log_ratio)),
            None,
        ),
        ("KL(p ‖ q), the other direction: KL(q ‖ p) = Σ_x q(x) log(q(x) / p(x)).",
         (float(np.sum(p * np.log(p / q))), None), None),
        ("k2 without its ½: k2 = ½ (log r)².",
         (None, right_estimates * np.array([1.0, 2.0, 1.0])), None),
        ("k3 with its sign turned: k3 = (r − 1) − log r, never negative.",
         (None, right_estimates * np.array([1.0, 1.0, -1.0])), None),
        ("in bits (log base 2): the estimates and the divergence are in nats (natural logs).",
         (float(np.sum(q * np.log(q / p))) / np.log(2), right_estimates / np.log(2)), None),
        ("averaged over the outcomes, not over the samples drawn from q.",
         (None, estimates(np.log(p) - np.log(q))), None),
    ]  # fmt: skip


def _grpo_group(arguments, right):
    rewards = np.asarray(arguments["rewards"], dtype="float64")
    centred = rewards - rewards.mean()
    advantages = np.asarray(right[0], dtype="float64")[:, None]
    epsilon = float(arguments["clip_epsilon"])
    ratio = np.exp(
        np.asarray(arguments["log_probabilities"], "float64")
        - np.asarray(arguments["old_log_probabilities"], "float64")
    )
    weights = np.asarray(arguments["mask"], dtype="float64")

    def per_answer_mean(per_token):
        return float(((per_token * weights).sum(axis=1) / weights.sum(axis=1)).mean())

    clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantages
    surrogate = np.minimum(ratio * advantages, clipped)
    return [
        (
            "the standard deviation over G − 1: the group's is the population one, over G (np.std's default).",
            (centred / (rewards.std(ddof=1) + 1e-4), None) if rewards.std(ddof=1) > 0 else None,
            None,
        ),
        (
            "the advantages were not divided by the group's standard deviation (+ 1e-4).",
            (centred, None) if rewards.std() > 0 else None,
            None,
        ),
        (
            "the ratio was not clipped: min(r Â, clip(r, 1 − ε, 1 + ε) Â).",
            (None, per_answer_mean(ratio * advantages)),
            None,
        ),
        (
            "max where the objective takes min: min(r Â, clip(r) Â) keeps the pessimistic one.",
            (None, per_answer_mean(np.maximum(ratio * advantages, clipped))),
            None,
        ),
        ("the clipped term alone: take the min of r Â and clip(r) Â.", (None, per_answer_mean(clipped)), None),
        (
            "one mean over every token of the group: average each answer's tokens first, then the answers.",
            (None, float((surrogate * weights).sum() / weights.sum())),
            None,
        ),
    ]


# --- 04.5, 05.3, 09.5: whole layers and models, their references with a switch -----------------------------------


def _multi_head_attention(arguments, right):
    attend = _reference("04.5")
    weights = arguments["weights"]
    found = [
        (
            "the scores were divided by √E, the model's width: divide by √H, the width of one head "
            f"(√{np.shape(weights['query_kernel'])[-1]}).",
            attend(**arguments, scale_width=np.shape(arguments["query"])[-1]),
            None,
        ),
        (
            "the heads were concatenated but not projected: multiply by the output kernel W_O (N, H, E) and add "
            "its bias.",
            attend(**arguments, project=False),
            None,
        ),
        (
            "the heads were flattened in the wrong order: (B, N, T, H) reshaped straight to (B, T, N·H) mixes "
            "positions and heads; move the head axis first, (B, T, N, H), then flatten (or contract with W_O "
            "(N, H, E) over both axes).",
            attend(**arguments, merge_unmoved=True),
            None,
        ),
        (
            "the mask was ignored: where it is False, the score must become -inf before the softmax.",
            attend(**{**arguments, "mask": None}) if arguments["mask"] is not None else None,
            None,
        ),
    ]
    return found


def _encoder_block(arguments, right):
    block, mask, first = _reference("05.3"), arguments.get("mask"), arguments.get("normalize_first", False)
    unmasked = block(**{**arguments, "mask": None}) if mask is not None else None
    return [
        (
            (
                "post-norm was computed where `normalize_first` is True: a pre-norm block normalises each "
                "sub-layer's input, x + F(LayerNorm(x))."
            )
            if first
            else (
                "pre-norm was computed where `normalize_first` is False: a post-norm block normalises after the "
                "residual sum, LayerNorm(x + F(x))."
            ),
            block(**{**arguments, "normalize_first": not first}),
            None,
        ),
        (
            "the residual connections are missing: add each sub-layer's input to its output.",
            block(**arguments, residual=False),
            None,
        ),
        (
            "the LayerNorm was applied to the sub-layer's output, x + LayerNorm(F(x)): pre-norm normalises the "
            "sub-layer's input, x + F(LayerNorm(x)); post-norm the sum, LayerNorm(x + F(x)).",
            block(**arguments, norm_output=True),
            None,
        ),
        (
            "padding took part in attention: build the attention mask (B, T, T) from `mask`, so no query attends "
            "to a padding key.",
            unmasked,
            None,
        ),
        # Equal to attention over every key at the real positions only: the mask went on the queries (rows), which
        # changes nothing but the padding positions' own outputs.
        (
            "the mask was applied to the queries, not the keys: at the real positions every query still attends to "
            "the padding keys. Mask the key axis, mask[:, None, :] broadcast to (B, T, T), so no query attends to a "
            "padding key.",
            unmasked,
            None if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool)[:, :, None], np.shape(right)),
        ),
    ]


def _gpt(arguments, right):
    forward, config = _reference("09.5"), arguments["config"]
    first, real = config["normalize_first"], np.asarray(arguments["token_ids"]) != 0
    found = [
        (
            "position 0 sees the future: without the causal mask every position attends to later tokens. "
            "Position t may attend to positions 0 … t only.",
            forward(**arguments, causal=False),
        ),
        (
            "the position embeddings were added after the blocks: add them to the token embeddings, before the "
            "first block.",
            forward(**arguments, positions_after_blocks=True),
        ),
        (
            "post-norm blocks were computed where the config says pre-norm (`normalize_first`): x + F(LayerNorm(x))."
            if first
            else "pre-norm blocks were computed where the config says post-norm: LayerNorm(x + F(x)).",
            forward(**arguments, normalize_first=not first),
        ),
        (
            "the final LayerNorm (weights['final_norm']) was skipped: apply it after the last block, before the "
            "tied output.",
            forward(**arguments, final_norm=False) if "final_norm" in arguments["weights"] else None,
        ),
    ]
    return [(message, output, real) for message, output in found]


# Each exercise's usual mistakes, recomputed on a case, and the tolerance they are told apart with (0 compares
# exactly).
MISTAKES = {
    "01.2": (_lstm_step, 1e-6),
    "02.1": (_luong_general, 1e-6),
    "03.3": (_encode_word, 0),
    "03.4": (_skipgram_pairs, 0),
    "04.1": (_scaled_attention, 1e-5),
    "04.2": (_split_heads, 1e-6),
    "04.3": (_merge_heads, 1e-6),
    "04.4": (_sinusoidal, 1e-5),
    "04.5": (_multi_head_attention, 1e-5),
    "04.6": (_self_attention_mask, 0),
    "05.3": (_encoder_block, 1e-5),
    "06.1": (_masked_max, 1e-6),
    "06.2": (_masked_mean, 1e-6),
    "07.3": (_teacher_forcing_loss, 1e-6),
    "07.4": (_beam_step, 1e-6),
    "07.5": (_warmup_cosine, 1e-9),
    "07.6": (_adamw_step, 1e-6),
    "08.1": (_masked_lm_loss, 1e-6),
    "09.1": (_temperature, 1e-6),
    "09.2": (_nucleus, 1e-6),
    "09.3": (_cached_attention_step, 1e-5),
    "09.4": (_perplexity_and_bits, 1e-6),
    "09.5": (_gpt, 1e-4),
    "09.6": (_narrow_interval, 0),
    "10.1": (_patchify, 1e-6),
    "10.2": (_rollout, 1e-6),
    "11.1": (_rotation, 1e-6),
    "11.2": (_rms_norm, 1e-6),
    "11.3": (_grouped_attention, 1e-6),
    "11.4": (_tiled_attention, 1e-6),
    "12.1": (_absmax, 1e-6),
    "12.2": (_merge_lora, 1e-6),
    "12.3": (_data_parallel, 1e-6),
    "12.4": (_groupwise_int4, 1e-6),
    "13.1": (_prompt_masked, 1e-6),
    "13.2": (_sequence_log_probability, 1e-6),
    "13.3": (_dpo, 1e-6),
    "13.4": (_grpo_group, 1e-6),
    "13.5": (_kl_estimators, 1e-6),
}
