"""The course's graded exercises as students see them: names, points, and the public cases.

Every exercise is a plain NumPy/Python function, so a check runs in milliseconds with no model,
no download and no GPU. A student's instant check runs the function on the exercise's public
cases, stored with their expected outputs (and each usual mistake's output and message) in
``public_cases.json`` beside this file. The references, the usual mistakes' code and the generators
of the secret grading cases are not here: they live only in the grader
(:mod:`transformer_course_grader.references`). What is here judges: the comparison, the properties
of 08.3's random answers, and the few hints that read a property of the received value.
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from . import hints
from .compare import compare_outputs
from .hints import equal_at
from .values import decode, plain_value

__all__ = ["Exercise", "EXERCISES", "STUDY_MINUTES", "public_cases", "catalogue_table"]

PUBLIC_CASES = Path(__file__).with_name("public_cases.json")


@dataclass(frozen=True)
class Exercise:
    """One graded exercise.

    Attributes:
        id: str, ``"NN.k"``: notebook NN, exercise k.
        title: str, shown in verdicts and reports.
        function_name: str, the name of the function the student writes.
        points: int.
        extra_check: optional callable ``(arguments, received) -> problem or None``, run before the
            outputs are compared (a property the comparison alone would not name, like a mask leak).
        atol: float, the absolute tolerance for float outputs.
        output_names: how feedback names the output (one name), or the items of a returned tuple.
        hint: optional callable ``(arguments, received, expected) -> str or None``: when the
            output is wrong, recognises a usual mistake (a missing √d_k, a transposed weight) and
            says so after the difference.
        properties: optional callable ``(arguments, received, expected) -> problem or None`` for
            an exercise whose right answers are random (a draw from a seeded generator): it judges
            ``received`` by the properties every right answer has, and ``expected`` describes
            them (target rates, what must never happen) instead of being one output to equal.
        compared: optional callable ``(arguments) -> bool array`` over the output's leading axes:
            only those entries are compared (a language model's logits at real tokens, not at
            padding); the shapes must still match.
        whole_numbers: indices of the returned tuple's items that hold whole numbers and may come in any
            numeric dtype, as the statement allows (12.1's integers: int8 or float): an integer array
            there is compared as the floats it holds.
        partial_credit: bool, whether the grader gives the share of the secret cases passed when
            some fail (it does only where an exercise has three secret cases or more); False keeps
            the exercise all or nothing, for one whose cases are one idea tried several times.
    """

    id: str
    title: str
    function_name: str
    points: int
    extra_check: Callable | None = None
    atol: float = 1e-5
    output_names: tuple[str, ...] = ("the result",)
    hint: Callable | None = None
    properties: Callable | None = None
    compared: Callable | None = None
    partial_credit: bool = True
    whole_numbers: tuple[int, ...] = ()

    @property
    def notebook(self) -> str:
        return self.id.split(".")[0]

    def judge(self, arguments: dict, received, expected, mistakes=()) -> str | None:
        """None if ``received`` equals ``expected`` (the reference output on ``arguments``), else what is wrong.

        ``received`` goes through :func:`~transformer_course.exercises.values.plain_value` first,
        as the grader's replies do, so a tensor is judged like the array it holds. ``mistakes`` are the
        case's usual mistakes as data, ``[(message, output, compared where or None, tolerance), ...]`` (a
        public case's from ``public_cases.json``, :func:`public_mistakes`; the grader's own on a secret
        case; or a callable giving them, called only for a wrong result): a wrong result equal to one of them gets
        its message as the hint (several, where they coincide on the case). A hint of the exercise's own (a
        property of the received value) comes first.
        """
        try:
            received = plain_value(received)
        except ValueError as error:
            return f"the result cannot be read: {error}."
        if self.whole_numbers and isinstance(received, (tuple, list)):
            received = tuple(
                np.asarray(item, dtype="float64")
                if index in self.whole_numbers and np.asarray(item).dtype.kind in "iu"
                else item
                for index, item in enumerate(received)
            )
        if self.extra_check is not None:
            problem = self.extra_check(arguments, received)
            if problem:
                return problem
        if self.properties is not None:
            with np.errstate(all="ignore"):
                return self.properties(arguments, received, expected)
        if self.compared is not None:
            problem = _compare_selected(self.compared(arguments), expected, received, self.atol, self.output_names[0])
        elif isinstance(expected, tuple):
            problem = compare_outputs(expected, received, self.atol, names=self.output_names)
        else:
            problem = compare_outputs(expected, received, self.atol, path=self.output_names[0])
        if not problem:
            return None
        hint = None
        if self.hint is not None:
            try:
                with np.errstate(all="ignore"):
                    hint = self.hint(arguments, received, expected)
            except Exception:  # noqa: BLE001 - a hint is a bonus; a student's odd output must not break it
                hint = None
        if not hint and mistakes:
            with np.errstate(all="ignore"):
                usual = mistakes() if callable(mistakes) else mistakes
                named = [message for message, output, where, atol in usual if equal_at(received, output, atol, where)]
            hint = either(list(dict.fromkeys(named)))  # mistakes that coincide on this case are all named, once each
        return f"{problem} Hint: {hint}" if hint else problem
        return problem


def _compare_selected(selected, expected, received, atol, name) -> str | None:
    """Compare only the entries ``selected`` picks (a bool array over the leading axes); shapes first."""
    expected = np.asarray(expected)
    try:
        received_array = np.asarray(received)
    except Exception:  # noqa: BLE001 - anything that fails to convert is simply wrong
        return compare_outputs(expected, received, atol, path=name)
    if received_array.dtype == object or received_array.shape != expected.shape:
        return compare_outputs(expected, received, atol, path=name)
    for where in np.argwhere(selected):
        where = tuple(int(i) for i in where)
        problem = compare_outputs(expected[where], received_array[where], atol, path=f"{name} at position {where}")
        if problem:
            return problem
    return None


@cache
def _public_table() -> dict:
    return json.loads(PUBLIC_CASES.read_text(encoding="utf-8"))


def public_cases(exercise_id: str) -> list:
    """The public cases of ``exercise_id``: ``[(label, keyword arguments, expected output), ...]``.

    Decoded afresh on every call, so a student's function that changes its arguments in place
    changes nothing for the next check.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return [
        (label, decode(arguments), decode(expected)) for label, arguments, expected, *_ in _public_table()[exercise_id]
    ]


def public_mistakes(exercise_id: str) -> list:
    """Each public case's usual mistakes as data (in the order of :func:`public_cases`): ``[[(message, output,
    compared where or None, tolerance), ...], ...]``; empty lists for an exercise whose hints are judges of their own.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return [[tuple(m) for m in decode(row[3])] if len(row) > 3 else [] for row in _public_table()[exercise_id]]


# --- properties checked beside the comparison ---------------------------------------------


def _attention_leak(arguments, received):
    mask = arguments["mask"]
    if mask is None or not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    try:  # shapes first: weights the mask would enlarge are never broadcast (the comparison names the shape)
        shape = np.shape(received[1])
        if np.broadcast_shapes(shape, mask.shape) != shape:
            return None
        weights = np.asarray(received[1], dtype="float64")
    except (ValueError, TypeError):
        return None
    leak = np.abs(weights[~np.broadcast_to(mask, weights.shape)])
    if leak.size and leak.max() > 1e-6:
        return f"mask leak: weight {leak.max():.3g} on a position the mask forbids (it should be 0)."
    return None


# --- hints that judge a received value by a property of its own (the usual mistakes' outputs come as data) --


def _attention_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    if np.isnan(np.asarray(received[1], dtype="float64")).any():
        return (
            "NaN in the weights: a row whose every key is masked gives softmax over nothing, 0/0. "
            "Give such rows zero weights (and so a zero output)."
        )
    return None


def _greedy_hint(arguments, received, expected):
    decoded = np.asarray(received)
    if decoded.ndim != 2:
        return None
    end_id = arguments["end_id"]
    for row in decoded:
        ended = np.flatnonzero(row[1:] == end_id)
        if ended.size and np.any(row[1 + ended[0] + 1 :] != 0):
            return "a row goes on after it produced `end_id`: from then on it must get padding (0)."
    if decoded.shape[1] > np.shape(expected)[1]:
        return "decoding should stop as soon as every row has produced `end_id` (or after `max_length` steps)."
    return None


def _first_index(where) -> str:
    return str(tuple(int(i) for i in np.argwhere(where)[0]))


# A right answer's rates are random draws, so a rate is refused only where a right answer's draws land that
# far from its target with a probability below one in a billion (each rate, on each side). The bound is
# Chernoff's, P(a rate this far) <= exp(-n KL(rate || target)), true at every n; a normal approximation is not:
# a band of 5 standard deviations refused 3 of 3 chosen tokens randomised, which a right answer draws once in
# a thousand (the notebook's own solution failed 5 of 20,000 gradings with fresh seeds).
_RATE_ODDS = 1e-9


def _plausible(rate: float, total: int, target: float, odds: float = _RATE_ODDS) -> bool:
    """Whether total * KL(Bernoulli(rate) || Bernoulli(target)) <= log(1 / odds): Chernoff's bound on a right
    answer's chance of a rate this far from `target` in `total` draws is then at least `odds`."""
    divergence = sum(p * math.log(p / q) for p, q in ((rate, target), (1 - rate, 1 - target)) if p > 0)
    return total * divergence <= math.log(1 / odds)


def _plausible_rates(total: int, target: float, odds: float = _RATE_ODDS) -> tuple[float, float]:
    """The rates a right answer's `total` Bernoulli(`target`) draws reach but for `odds` on either side.

    The interval holds every rate r with total * KL(r || target) <= log(1 / odds): by Chernoff's bound a
    right answer falls outside it with probability below `odds` on each side, whatever `total` is.

    Args:
        total: int >= 1, the number of draws (tokens that may be chosen, or chosen tokens).
        target: float in (0, 1), each draw's probability.
        odds: float in (0, 1), the chance of refusing a right answer that each side allows.

    Returns:
        (lowest, highest): floats in [0, 1], the rates accepted (to 1e-12).

    Example:
        >>> [round(rate, 3) for rate in _plausible_rates(3, 0.1)]  # 3 of 3 randomised passes
        [0.0, 1.0]
    """

    def edge(inside: float, outside: float) -> float:
        if _plausible(outside, total, target, odds):
            return outside
        while abs(outside - inside) > 1e-12:  # bisection: the divergence grows away from the target
            middle = (inside + outside) / 2
            inside, outside = (middle, outside) if _plausible(middle, total, target, odds) else (inside, middle)
        return inside

    return edge(target, 0.0), edge(target, 1.0)


def _bert_corruption_properties(arguments, received, expected):
    """BERT's masking judged by what every right answer satisfies: nothing forbidden chosen, labels at
    the chosen positions only, the rest unchanged, and the 15% / 80-10-10 rates where a right answer's
    draws land but for one in a billion (:func:`_plausible_rates`)."""
    token_ids = np.asarray(arguments["token_ids"])
    if not (isinstance(received, (tuple, list)) and len(received) == 2):
        return "return a tuple of two arrays: (the corrupted token ids, the labels)."
    corrupted, labels = (np.asarray(value) for value in received)
    for name, value in (("the corrupted token ids", corrupted), ("the labels", labels)):
        if value.shape != token_ids.shape:
            return f"{name} should have shape {token_ids.shape} (that of token_ids); received {value.shape}."
        if not np.issubdtype(value.dtype, np.integer):
            return f"{name} should hold integer ids; received dtype {value.dtype}."
    never = np.isin(token_ids, [0, *arguments["special_ids"]])
    chosen = labels != 0
    checks = (
        (chosen & never, "holds padding or a special token and was chosen: those are never chosen"),
        (chosen & (labels != token_ids), "is chosen, but its label is not the original token"),
        (~chosen & (corrupted != token_ids), "was not chosen (label 0), but its token changed"),
        ((corrupted < 0) | (corrupted >= arguments["vocabulary_size"]), "holds an id outside the vocabulary"),
    )
    for where, problem in checks:
        if where.any():
            return f"position {_first_index(where)} {problem}."
    masked = corrupted == arguments["mask_token_id"]
    randomised = ~masked & (corrupted != token_ids)
    rates = (
        ("chosen", chosen.sum(), (~never).sum(), expected["selection"]),
        ("replaced by [MASK]", masked[chosen].sum(), chosen.sum(), expected["mask"]),
        ("replaced by a random token", randomised[chosen].sum(), chosen.sum(), expected["random"]),
    )
    for what, count, total, target in rates:
        if total and not _plausible(count / total, total, target):
            among = "tokens that may be chosen" if what == "chosen" else "chosen tokens"
            lowest, highest = _plausible_rates(int(total), target)
            return (
                f"{count / total:.2%} of the {among} were {what} ({count:,} of {total:,}); expected {target:.0%}: "
                f"a right answer's {total:,} draws give {lowest:.2%} to {highest:.2%}, but for one in a billion."
            )
    return None


def _merge_step_hint(arguments, received, expected):
    words, counts = arguments["words"], arguments["counts"]
    unweighted, weighted = collections.Counter(), collections.Counter()
    for word, count in zip(words, counts):
        symbols = word.split(" ")
        for pair in zip(symbols, symbols[1:]):
            unweighted[pair] += 1
            weighted[pair] += count
    if isinstance(received, (tuple, list)) and received and isinstance(received[0], str) and received[0] != expected[0]:
        pair = tuple(received[0].split(" "))
        if weighted.get(pair) == max(weighted.values()):
            return (
                f"{received[0]!r} ties with {expected[0]!r} for the most frequent pair: among equally frequent "
                "pairs take the one that comes first as a tuple of two str, not the first one counted."
            )
        if unweighted.get(pair) == max(unweighted.values()):
            return "each pair counts as often as its word occurs: weight it by the word's count."
    if isinstance(received, (tuple, list)) and len(received) == 2 and received[0] == expected[0]:
        replaced = [word.replace(expected[0], expected[0].replace(" ", "")) for word in words]
        if [str(word) for word in received[1]] == replaced:
            return (
                "the pair is right, but merge whole symbols only: replacing text in the string also joins the "
                "ends of longer symbols ('ab c' holds 'b c' as text, not as two symbols)."
            )
        return "the pair is right; merge it left to right, one occurrence at a time, in every word."
    return None


def _temperature_hint(arguments, received, expected):
    logits = np.asarray(arguments["logits"], dtype="float64")
    if len(logits) > 1 and not np.all(np.isfinite(np.asarray(received, dtype="float64"))):
        return (
            "a row came out as nan or inf: subtract each row's own maximum (axis=-1, keepdims=True), not one "
            "maximum of the whole array; a row far below it underflows to 0 / 0."
        )
    return None


HINT_ALTERNATIVE = " Or: "  # between the usual mistakes a case cannot tell apart (they give the same output)


def either(messages: list) -> str | None:
    """One hint naming every usual mistake that gives the received output (on this case they coincide), or None."""
    return HINT_ALTERNATIVE.join(messages) or None


def _skipgram_pairs_hint(arguments, received, expected):
    try:
        received = sorted(tuple(pair) for pair in received)
    except TypeError:
        return None
    if received == sorted(tuple(pair) for pair in expected):
        return (
            "the right pairs in another order: go through the centres left to right, and each one's context "
            "words left to right."
        )
    return None


EXERCISES: dict[str, Exercise] = {
    exercise.id: exercise
    for exercise in [
        Exercise("01.1", "one-hot encoding", "one_hot_encode", 2, output_names=("the one-hot array",)),
        Exercise(
            "01.2",
            "one LSTM step from Keras' weights",
            "lstm_step",
            3,
            output_names=("the new hidden state h", "the new cell state c"),
        ),
        Exercise(
            "02.1",
            "Luong general score",
            "luong_general_score",
            2,
            output_names=("the scores",),
        ),
        Exercise("02.2", "Bahdanau (additive) score", "bahdanau_score", 3, output_names=("the scores",)),
        Exercise("03.1", "vectorising with a vocabulary", "vectorize", 2, output_names=("the ids",)),
        Exercise(
            "03.2",
            "one merge step of byte-pair encoding",
            "merge_step",
            2,
            output_names=("the most frequent pair", "the merged words"),
            hint=_merge_step_hint,
        ),
        Exercise(
            "03.3",
            "encoding a word by merge rank",
            "encode_word",
            2,
            output_names=("the symbols",),
            hint=hints.encode_word_hint,
        ),
        Exercise(
            "03.4",
            "the skip-gram pairs of a sentence",
            "skipgram_pairs_of",
            2,
            output_names=("the pairs",),
            hint=_skipgram_pairs_hint,
        ),
        Exercise(
            "04.1",
            "scaled dot-product attention with a mask",
            "scaled_dot_product_attention",
            3,
            extra_check=_attention_leak,
            output_names=("the output", "the attention weights"),
            hint=_attention_hint,
        ),
        Exercise("04.2", "splitting into heads", "split_heads", 1, output_names=("the heads",)),
        Exercise("04.3", "merging heads", "merge_heads", 1, output_names=("the merged output",)),
        Exercise(
            "04.4",
            "the sinusoidal positional encoding",
            "positional_encoding_table",
            2,
            output_names=("the table",),
        ),
        Exercise(
            "04.5",
            "multi-head attention from its weights",
            "multi_head_attention_forward",
            3,
            atol=1e-5,
            output_names=("the output",),
        ),
        Exercise(
            "04.6",
            "the self-attention mask of a padded batch",
            "self_attention_mask",
            2,
            output_names=("the mask",),
        ),
        Exercise("05.1", "layer normalisation", "layer_norm", 2, atol=1e-4, output_names=("the normalised output",)),
        Exercise("05.2", "position-wise feed-forward network", "feed_forward", 2, output_names=("the output",)),
        Exercise(
            "05.3",
            "a Transformer encoder block from its weights, post- and pre-norm",
            "encoder_block",
            3,
            atol=1e-5,
            output_names=("the block's output",),
        ),
        Exercise(
            "06.1",
            "masked global max pooling",
            "masked_max_pool",
            2,
            output_names=("the pooled vectors",),
        ),
        Exercise(
            "06.2",
            "masked global average pooling",
            "masked_mean_pool",
            2,
            output_names=("the pooled vectors",),
        ),
        Exercise(
            "07.1", "the causal mask", "causal_mask", 1, output_names=("the mask",), partial_credit=False
        ),  # each case is the same mask at another length: one idea
        Exercise("07.2", "greedy decoding", "greedy_decode", 3, output_names=("the decoded ids",), hint=_greedy_hint),
        Exercise(
            "07.3",
            "teacher forcing and the padding-masked loss",
            "teacher_forcing_loss",
            2,
            output_names=("the decoder inputs", "the labels", "the loss"),
        ),
        Exercise(
            "07.4",
            "one step of beam search",
            "beam_step",
            3,
            output_names=(
                "the parents",
                "the tokens",
                "the live scores",
                "the finished parents",
                "the finished scores",
            ),
            hint=hints.beam_step_hint,
        ),
        Exercise(
            "07.5",
            "the warm-up and cosine learning-rate schedule",
            "warmup_cosine",
            2,
            output_names=("the learning rates",),
            atol=1e-9,
        ),
        Exercise(
            "07.6",
            "one AdamW step",
            "adamw_step",
            2,
            atol=1e-6,  # float32 arithmetic passes, as Keras' own
            output_names=("the new parameters", "the new first moment", "the new second moment"),
        ),
        Exercise("08.1", "the masked-LM loss", "masked_lm_loss", 2, output_names=("the loss",)),
        Exercise(
            "08.3",
            "BERT's masking: choose 15%, then 80/10/10",
            "bert_corruption",
            3,
            output_names=("the corrupted token ids", "the labels"),
            properties=_bert_corruption_properties,
        ),
        Exercise(
            "09.1",
            "softmax with a temperature",
            "softmax_with_temperature",
            2,
            output_names=("the probabilities",),
            hint=_temperature_hint,
        ),
        Exercise(
            "09.2",
            "the top-p (nucleus) filter",
            "nucleus_filter",
            3,
            output_names=("the filtered probabilities",),
        ),
        Exercise(
            "09.3",
            "one attention step with a key/value cache",
            "cached_attention_step",
            3,
            output_names=("the output", "the new key cache", "the new value cache"),
        ),
        Exercise(
            "09.4",
            "perplexity and bits per character",
            "perplexity_and_bits",
            2,
            output_names=("the perplexity", "the bits per character"),
        ),
        Exercise(
            "09.5",
            "capstone: the whole GPT forward pass from its weights",
            "gpt_forward",
            5,
            atol=1e-4,
            output_names=("the logits",),
            compared=lambda arguments: np.asarray(arguments["token_ids"]) != 0,
        ),
        Exercise(
            "09.6",
            "one step of the arithmetic coder: narrowing the interval",
            "narrow_interval",
            2,
            output_names=("the new low", "the new high"),
            hint=hints.narrow_interval_hint,
        ),
        Exercise("10.1", "cutting images into patches", "patchify", 2, output_names=("the patch array",)),
        Exercise("10.2", "attention rollout", "roll_out_attention", 3, output_names=("the rollout",)),
        Exercise(
            "11.1",
            "rotary position embedding",
            "rotate_positions",
            3,
            output_names=("the rotated array",),
        ),
        Exercise("11.2", "RMSNorm", "rms_norm", 2, output_names=("the normalised array",)),
        Exercise(
            "11.3",
            "grouped-query attention's shared key/value heads",
            "grouped_query_attention",
            3,
            output_names=("the attention output",),
        ),
        Exercise(
            "11.4",
            "tiled attention with an online softmax (FlashAttention's idea)",
            "tiled_attention",
            3,
            output_names=("the attention output", "each query's log-sum-exp"),
        ),
        Exercise(
            "12.1",
            "absmax int8 quantization",
            "absmax_int8",
            2,
            output_names=("the integers", "the scales", "the dequantized weights"),
            whole_numbers=(0,),  # "float or int (R, C)", as the statement says
        ),
        Exercise(
            "12.2",
            "merging LoRA into the weights",
            "merge_lora_kernel",
            2,
            output_names=("the merged kernel",),
        ),
        Exercise(
            "12.3",
            "the data-parallel gradient",
            "data_parallel_gradient",
            2,
            output_names=("the shards' gradients", "their mean"),
        ),
        Exercise(
            "12.4",
            "group-wise int4 quantization",
            "groupwise_int4",
            3,
            output_names=("the integers", "the scales", "the dequantized weights"),
            whole_numbers=(0,),
        ),
        Exercise(
            "13.1",
            "the prompt-masked cross-entropy",
            "prompt_masked_cross_entropy",
            2,
            output_names=("the loss",),
        ),
        Exercise(
            "13.2",
            "an answer's log-probability from logits",
            "sequence_log_probability",
            2,
            atol=1e-4,
            output_names=("the log-probabilities",),
        ),
        Exercise(
            "13.3",
            "the DPO loss",
            "dpo_pair_losses",
            2,
            output_names=("the losses",),
        ),
        Exercise(
            "13.4",
            "GRPO's advantages and clipped objective for one group",
            "grpo_group_objective",
            3,
            output_names=("the advantages", "the objective"),
        ),
        Exercise(
            "13.5",
            "three estimates of the KL divergence",
            "kl_estimators",
            2,
            output_names=("the divergence", "the three estimates"),
        ),
    ]
}


# How long a student might spend on each notebook with its exercises, in minutes: our estimate, not a measurement.
STUDY_MINUTES = {
    "01": 40,
    "02": 40,
    "03": 75,
    "04": 90,
    "05": 60,
    "06": 30,
    "07": 150,
    "08": 45,
    "09": 210,
    "10": 45,
    "11": 75,
    "12": 65,
    "13": 75,
}


def catalogue_table() -> str:
    """The students' catalogue: a Markdown table, one row per notebook, its exercises with their points.

    Generated from :data:`EXERCISES` and :data:`STUDY_MINUTES` into ``docs/students.md``
    (``transformer-course catalogue --update docs/students.md``; a test fails while it is stale).

    Returns:
        str, the table's lines, with a first line that counts the exercises and their points.

    Example:
        >>> catalogue_table().splitlines()[2]
        '| notebook | exercises (points) | about |'
    """
    notebooks = sorted({exercise.notebook for exercise in EXERCISES.values()})
    points = sum(exercise.points for exercise in EXERCISES.values())
    lines = [
        f"{len(EXERCISES)} exercises, {points} points.",
        "",
        "| notebook | exercises (points) | about |",
        "|---|---|---|",
    ]
    for notebook in notebooks:
        listed = "; ".join(
            f"{exercise.id} {exercise.title} ({exercise.points})"
            for exercise in EXERCISES.values()
            if exercise.notebook == notebook
        )
        lines.append(f"| {notebook} | {listed} | {STUDY_MINUTES[notebook]} min |")
    return "\n".join(lines)
