"""The grader's references and case generators: the answers, and where the cases come from.

Only the grading process uses this module. The grading sandbox covers this file (and the
package's compiled copies) so that no student code can import or read it, and the references are
written here independently of the package's own implementations, which notebooks import: a
wrapper around a function a student can reach is never the reference itself.

Students' instant checks use the public cases (seed 0) stored with their expected outputs in
``transformer_course/exercises/public_cases.json``, which :func:`write_public_cases` writes from
this module (a test keeps it current).
"""

from __future__ import annotations

import math
import string
from pathlib import Path

import numpy as np

from ..decoding import NextTokenTable
from ..exercises.values import encode

__all__ = ["cases", "expected", "answer", "public_cases", "write_public_cases", "PUBLIC_CASES"]

PUBLIC_CASES = Path(__file__).resolve().parents[1] / "exercises" / "public_cases.json"


# --- 01: the reversal task ------------------------------------------------------------------

def _one_hot_cases(rng):
    return [("the notes' example [2, 8, 1, 6], 10 features", {"sequence": [2, 8, 1, 6], "n_features": 10}),
            ("a batch of 3 sequences of length 5, 7 features",
             {"sequence": rng.integers(0, 7, size=(3, 5)), "n_features": 7}),
            ("a single symbol 0, 1 feature", {"sequence": [0], "n_features": 1})]


def _one_hot_decode_cases(rng):
    probabilities = rng.random((4, 6, 9))
    return [("one-hot [[0,1,0],[1,0,0]]", {"encoded": np.array([[0.0, 1, 0], [1, 0, 0]])}),
            ("probabilities of shape (4, 6, 9)", {"encoded": probabilities / probabilities.sum(-1, keepdims=True)})]


def _one_hot_encode_reference(sequence, n_features):
    return np.eye(n_features, dtype="float32")[np.asarray(sequence, dtype="int64")]


def _one_hot_decode_reference(encoded):
    return np.argmax(np.asarray(encoded), axis=-1).astype("int64")


# --- 02: alignment scores -------------------------------------------------------------------

def _score_cases(rng, general: bool):
    cases = []
    for label, source_length, units in (("3 source steps, 4 units", 3, 4), ("7 source steps, 16 units", 7, 16)):
        arguments = {"query": rng.normal(size=units), "keys": rng.normal(size=(source_length, units))}
        if general:
            arguments["weight"] = rng.normal(size=(units, units))
        else:
            arguments.update(query_weight=rng.normal(size=(units, units)), keys_weight=rng.normal(size=(units, units)),
                             v=rng.normal(size=units))
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
    known = [str(word) for word in rng.permutation(_WORDS)[:int(rng.integers(5, 9))]]
    vocabulary = ["", "[UNK]", *known]
    return [("all words known", {"text": _sentence(rng, known, int(rng.integers(4, 8))), "vocabulary": vocabulary}),
            ("unknown words become 1", {"text": _sentence(rng, _WORDS, 10), "vocabulary": vocabulary}),
            ("an empty string", {"text": "", "vocabulary": vocabulary})]


def _pad_reference(ids, length):
    ids = np.asarray(ids, dtype="int64")[:length]
    return np.concatenate([ids, np.zeros(length - len(ids), dtype="int64")])


def _pad_cases(rng):
    return [("shorter: pad with 0 at the end", {"ids": [4, 9, 2], "length": 6}),
            ("longer: keep the first ids", {"ids": rng.integers(1, 50, size=12), "length": 5}),
            ("exactly the length", {"ids": [7, 7], "length": 2}),
            ("empty", {"ids": [], "length": 3})]


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
    random_words = [" ".join(rng.choice(letters[:int(rng.integers(3, 6))], size=int(rng.integers(2, 7))))
                    for _ in range(int(rng.integers(4, 8)))]
    return [("Sennrich's corpus: a tie, 'e s' first", {"words": ["l o w", "l o w e r", "n e w e s t", "w i d e s t"],
                                                       "counts": [5, 2, 6, 3]}),
            ("a repeated symbol: left to right",
             {"words": ["a a a", "b a a", "a b"], "counts": [int(rng.integers(2, 5)), 1, 1]}),
            ("symbols of several letters", {"words": ["b c", "ab c", "c ab c", "b cb"],
                                            "counts": [int(rng.integers(3, 6)), 1, 1, 1]}),
            ("random words and counts", {"words": random_words,
                                         "counts": [int(c) for c in rng.integers(1, 10, size=len(random_words))]})]


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
    return [("no mask", {"query": q, "key": k, "value": v, "mask": None}),
            ("a padding mask on the keys", {"query": q, "key": k, "value": v, "mask": padding}),
            ("padding AND causal", {"query": q, "key": k, "value": v, "mask": padding & causal}),
            ("cross-attention: 5 queries, 3 keys",
             {"query": q, "key": k[:, :, :3], "value": v[:, :, :3], "mask": None}),
            ("a query with every key masked: zero weights, zero output",
             {"query": q, "key": k, "value": v, "mask": blocked})]


def _split_heads_reference(x, num_heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(0, 2, 1, 3)


def _merge_heads_reference(x):
    batch, heads, length, head_width = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * head_width)


def _split_cases(rng):
    return [("B=2, T=3, E=8 into 2 heads", {"x": rng.normal(size=(2, 3, 8)), "num_heads": 2}),
            ("B=1, T=5, E=12 into 4 heads", {"x": np.arange(60.0).reshape(1, 5, 12), "num_heads": 4})]


def _merge_cases(rng):
    return [("B=2, N=2, T=3, H=4", {"x": rng.normal(size=(2, 2, 3, 4))}),
            ("B=1, N=4, T=5, H=3", {"x": np.arange(60.0).reshape(1, 4, 5, 3)})]


# --- 05: the encoder block ------------------------------------------------------------------

def _layer_norm_reference(x, gamma, beta, epsilon=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(variance + epsilon) + beta


def _layer_norm_cases(rng):
    return [("B=2, T=3, E=4", {"x": rng.normal(3.0, 2.0, size=(2, 3, 4)), "gamma": np.ones(4), "beta": np.zeros(4)}),
            ("learned scale and shift", {"x": rng.normal(size=(1, 5, 6)), "gamma": rng.normal(size=6),
                                         "beta": rng.normal(size=6)})]


def _feed_forward_reference(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def _feed_forward_cases(rng):
    width, hidden = 4, 6
    weights = {"w1": rng.normal(size=(width, hidden)), "b1": rng.normal(size=hidden),
               "w2": rng.normal(size=(hidden, width)), "b2": rng.normal(size=width)}
    return [("B=2, T=3, E=4, F=6", {"x": rng.normal(size=(2, 3, width)), **weights}),
            ("one position", {"x": rng.normal(size=(1, 1, width)), **weights})]


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
    return [("every token real", {"values": values[:1], "mask": mask[:1]}),
            ("padding with large values", {"values": values[:2], "mask": mask[:2]}),
            ("a review with no real token", {"values": values, "mask": mask})]


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
    return [("one sequence that reaches max_length",
             {"next_token_probabilities": NextTokenTable(table), "start_ids": np.array([1]), "end_id": 9,
              "max_length": 5}),
            ("three sequences that end at different steps",
             {"next_token_probabilities": NextTokenTable(ending), "start_ids": np.array([1, 3, 4]), "end_id": 2,
              "max_length": 6})]


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
    return [("one chosen position", {"probabilities": np.array([[[0.0, 0.1, 0.6, 0.3], [0.0, 0.5, 0.25, 0.25]]]),
                                     "labels": np.array([[2, 0]])}),
            ("3 rows of 5 positions, 7 words", {"probabilities": distributions((3, 5, 7)), "labels": labels}),
            ("nothing chosen", {"probabilities": distributions((1, 3, 4)), "labels": np.zeros((1, 3), dtype=int)})]


def _segment_ids_reference(token_ids, sep_id):
    token_ids = np.asarray(token_ids)
    segments = np.zeros(token_ids.shape, dtype="int64")
    for row in range(token_ids.shape[0]):
        seen = 0
        for position, token in enumerate(token_ids[row]):
            if token == 0:
                continue
            segments[row, position] = 1 if seen >= 1 else 0
            if token == sep_id:
                seen += 1
    return segments


def _packed_pairs(rng, rows, length, cls_id, sep_id, padded=True):
    """`rows` random [CLS] A [SEP] B [SEP] rows of `length` ids (words 10-49).

    Padded with 0 unless `padded` is False.
    """
    token_ids = np.zeros((rows, length), dtype="int64")
    for row in range(rows):
        room = length - 3 if not padded else int(rng.integers(2, length - 2))
        first = int(rng.integers(1, room))
        words = rng.integers(10, 50, size=room)
        packed = [cls_id, *words[:first], sep_id, *words[first:], sep_id]
        token_ids[row, :len(packed)] = packed
    return token_ids


def _segment_ids_cases(rng):
    return [("one short pair, padded", {"token_ids": _packed_pairs(rng, 1, 10, 2, 3), "sep_id": 3}),
            ("3 pairs of different lengths", {"token_ids": _packed_pairs(rng, 3, 12, 2, 3), "sep_id": 3}),
            ("no padding, [SEP] id 1", {"token_ids": _packed_pairs(rng, 2, 8, 4, 1, padded=False), "sep_id": 1})]


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
    return [("2 short rows with padding", {"token_ids": rows(2, 12), "seed": int(rng.integers(2**31)), **arguments}),
            ("100 rows of 750-1,000 tokens: the rates",
             {"token_ids": rows(100, 1000), "seed": int(rng.integers(2**31)), **arguments}),
            ("only padding and special tokens",
             {"token_ids": np.array([[cls_id, sep_id, 0, 0], [cls_id, mask_id, sep_id, 0]]),
              "seed": int(rng.integers(2**31)), **arguments})]


# --- 09: sampling ---------------------------------------------------------------------------

def _temperature_reference(logits, temperature):
    logits = np.asarray(logits, dtype="float64")
    rows = []
    for row in logits:
        weights = np.exp((row - row.max()) / temperature)
        rows.append(weights / weights.sum())
    return np.array(rows)


def _temperature_cases(rng):
    return [("3 logits, T = 1", {"logits": np.array([[1.0, 2.0, 3.0]]), "temperature": 1.0}),
            ("2 rows of 6, T = 0.5 (sharper)", {"logits": rng.normal(size=(2, 6)) * 2, "temperature": 0.5}),
            ("4 rows of 10, T = 2 (flatter)", {"logits": rng.normal(size=(4, 10)) * 3, "temperature": 2.0}),
            ("large logits, T = 0.1", {"logits": np.array([[1000.0, 999.0, 990.0]]), "temperature": 0.1}),
            ("two rows of very different scale, T = 1",
             {"logits": np.array([[1000.0, 999.0, 990.0], [1.0, 2.0, 3.0]]), "temperature": 1.0})]


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

    return [("[0.5, 0.3, 0.15, 0.05], p = 0.7", {"probabilities": np.array([[0.5, 0.3, 0.15, 0.05]]), "p": 0.7}),
            ("3 rows of 8, p = 0.9", {"probabilities": rows(3, 8), "p": 0.9}),
            ("2 rows of 20, p = 0.35", {"probabilities": rows(2, 20), "p": 0.35}),
            ("p = 1 keeps every token", {"probabilities": rows(1, 5), "p": 1.0}),
            ("[0.125, 0.5, 0.125, 0.25], p = 0.75: the mass above id 0 is exactly p; ids 0 and 2 tie",
             {"probabilities": np.array([[0.125, 0.5, 0.125, 0.25]]), "p": 0.75})]


# --- 10: the Vision Transformer -------------------------------------------------------------

def _patchify_reference(images, patch_size):
    images = np.asarray(images)
    batch, height, width, channels = images.shape
    patches = []
    for top in range(0, height, patch_size):  # reading order: row of patches by row of patches
        for left in range(0, width, patch_size):
            patches.append(images[:, top:top + patch_size, left:left + patch_size, :].reshape(batch, -1))
    return np.stack(patches, axis=1)


def _patchify_cases(rng):
    return [("one 4×4 grey image, 2×2 patches", {"images": np.arange(16.0).reshape(1, 4, 4, 1), "patch_size": 2}),
            ("two 6×9 images with 3 channels, 3×3 patches", {"images": rng.random((2, 6, 9, 3)), "patch_size": 3}),
            ("1×1 patches: pixels as tokens", {"images": rng.random((1, 2, 3, 2)), "patch_size": 1}),
            ("one patch as large as the image", {"images": rng.random((3, 4, 4, 1)), "patch_size": 4})]


def _rollout_reference(attention_weights):
    weights = np.asarray(attention_weights, dtype="float64")
    layers, batch, _, tokens, _ = weights.shape
    result = np.zeros((batch, tokens, tokens))
    for example in range(batch):
        combined = np.eye(tokens)
        for layer in range(layers):
            mixed = weights[layer, example].mean(axis=0) + np.eye(tokens)
            mixed = mixed / mixed.sum(axis=1, keepdims=True)
            combined = mixed @ combined  # the later layer acts on what the earlier ones produced
        result[example] = combined
    return result


def _rollout_cases(rng):
    def distributions(shape):
        values = rng.random(shape) ** 3  # uneven rows, so the order of the layers matters
        return values / values.sum(axis=-1, keepdims=True)

    return [("one layer, one head, T = 2", {"attention_weights": np.array([[[[[0.5, 0.5], [0.2, 0.8]]]]])}),
            ("2 layers, 2 examples, 3 heads, T = 5", {"attention_weights": distributions((2, 2, 3, 5, 5))}),
            ("4 layers, 1 example, 2 heads, T = 3", {"attention_weights": distributions((4, 1, 2, 3, 3))})]


# exercise id -> (case generator: rng -> [(label, arguments)], reference: arguments -> output)
_EXERCISES = {
    "01.1": (_one_hot_cases, _one_hot_encode_reference),
    "01.2": (_one_hot_decode_cases, _one_hot_decode_reference),
    "02.1": (lambda rng: _score_cases(rng, True), _luong_general_reference),
    "02.2": (lambda rng: _score_cases(rng, False), _bahdanau_reference),
    "03.1": (_vectorize_cases, _vectorize_reference),
    "03.2": (_pad_cases, _pad_reference),
    "03.3": (_merge_step_cases, _merge_step_reference),
    "04.1": (_attention_cases, _attention_reference),
    "04.2": (_split_cases, _split_heads_reference),
    "04.3": (_merge_cases, _merge_heads_reference),
    "05.1": (_layer_norm_cases, _layer_norm_reference),
    "05.2": (_feed_forward_cases, _feed_forward_reference),
    "06.1": (_pooling_cases, _masked_max_reference),
    "06.2": (_pooling_cases, _masked_mean_reference),
    "07.1": (_causal_cases, _causal_reference),
    "07.2": (_greedy_cases, _greedy_reference),
    "08.1": (_masked_lm_loss_cases, _masked_lm_loss_reference),
    "08.2": (_segment_ids_cases, _segment_ids_reference),
    "08.3": (_bert_corruption_cases, _bert_corruption_reference),
    "09.1": (_temperature_cases, _temperature_reference),
    "09.2": (_nucleus_cases, _nucleus_reference),
    "10.1": (_patchify_cases, _patchify_reference),
    "10.2": (_rollout_cases, _rollout_reference),
}


# Exercises judged by properties: their reference describes what a right answer shows, and this is one right answer.
_ANSWERS = {"08.3": _bert_corruption_answer}


def answer(exercise_id: str, arguments: dict):
    """A right answer's output on ``arguments``: the reference output, or for an exercise judged by
    its properties (its outputs are random) one independently written right answer."""
    return _ANSWERS.get(exercise_id, lambda **kwargs: expected(exercise_id, kwargs))(**arguments)


def cases(exercise_id: str, rng) -> list:
    """The cases of ``exercise_id`` drawn with ``rng``: a list of ``(label, keyword arguments)``.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return _EXERCISES[exercise_id][0](rng)


def expected(exercise_id: str, arguments: dict):
    """The reference output of ``exercise_id`` on ``arguments``."""
    return _EXERCISES[exercise_id][1](**arguments)


def public_cases() -> str:
    """The public cases (seed 0) of every exercise with their expected outputs, as JSON text.

    Format: ``{exercise id: [[label, encoded arguments, encoded expected output], ...]}``, values
    encoded with :func:`~transformer_course.exercises.values.encode`.
    """
    import json

    table = {}
    for exercise_id in _EXERCISES:
        table[exercise_id] = [[label, encode(arguments), encode(expected(exercise_id, arguments))]
                              for label, arguments in cases(exercise_id, np.random.default_rng(0))]
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def write_public_cases(path=PUBLIC_CASES) -> None:
    """Write :func:`public_cases` to ``path`` (the file the package ships)."""
    from .._files import write_text_atomically

    write_text_atomically(path, public_cases())
    Path(path).chmod(0o644)
