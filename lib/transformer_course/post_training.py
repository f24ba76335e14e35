"""After pre-training: instruction tuning, preferences and verifiable rewards, on a task a program checks.

A base language model continues text; post-training makes it answer. Three steps, each a loss:

- **supervised fine-tuning** (instruction tuning) on question/answer pairs, with the loss on the
  answer's tokens only (:func:`answer_mask`): the model learns to answer, not to write questions;
- **direct preference optimisation** (:func:`dpo_loss`; Rafailov et al., 2023, eq. 7) from pairs
  of a preferred and a rejected answer, against a frozen reference model;
- **group relative policy optimisation** (:func:`group_advantages`, :func:`grpo_loss`; Shao et
  al., 2024, *DeepSeekMath*, §4.1): several sampled answers per question, each rewarded by a
  checker, advantages normalised within the group, a clipped ratio objective and a KL penalty,
  whose three sample estimators :func:`kl_estimates` computes (Schulman, 2020).

The Keras pieces that train with these losses: :class:`AnswerLogProbabilities` and
:class:`PairLogProbabilities` (a language model's log π of sampled answers, one row or a pair at a
time), :class:`DPOLoss` (with RPO's optional NLL term) and :class:`GRPOLoss`; and
:func:`supervised_fine_tune`, whose seed sets the order of the examples.

The task is integer addition written as text (:class:`AdditionTask`): its every answer is checked
exactly (:meth:`AdditionTask.is_correct`), the number of digits sets the difficulty, carries mark
the hard problems, and a fixed share of the pairs is held out of every training set.

The losses take per-token log-probabilities (``log p`` of each target under a model, float
``(B, T)``) and a mask of the tokens that count, and are written with ``keras.ops``: they run
inside a training step on any backend.
"""

from __future__ import annotations

import re
import zlib
from typing import NamedTuple

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_non_negative, check_positive, check_rate
from .metrics import MaskedCrossEntropy
from .training import RowBatches, WarmupCosineDecay

__all__ = [
    "AdditionProblem",
    "AdditionTask",
    "instruction_rows",
    "sample_answers",
    "greedy_answers",
    "SampledAnswers",
    "preference_pairs",
    "answer_mask",
    "target_log_probabilities",
    "sequence_log_probabilities",
    "dpo_loss",
    "DPOTerms",
    "group_advantages",
    "grpo_loss",
    "GRPOTerms",
    "pass_at_k",
    "majority_vote",
    "kl_estimates",
    "KLEstimates",
    "AnswerLogProbabilities",
    "PairLogProbabilities",
    "DPOLoss",
    "GRPOLoss",
    "supervised_fine_tune",
]

_TEMPLATES = (  # the facts in free-form prose for the base model's corpus: never the question/answer format
    "{a} plus {b} makes {total}.",
    "Adding {a} and {b} gives {total}.",
    "The sum of {a} and {b} is {total}.",
    "If you put {a} and {b} together you get {total}.",
    "{total} is what {a} and {b} add up to.",
    "Take {a}, add {b}, and the result is {total}.",
)


class AdditionProblem(NamedTuple):
    """One problem: ``a + b``.

    Attributes:
        a, b: ints >= 0.
    """

    a: int
    b: int

    @property
    def total(self) -> int:
        """a + b."""
        return self.a + self.b

    @property
    def carries(self) -> int:
        """How many columns of the written sum carry a one to the next (the hard part of addition)."""
        a, b, carry, count = self.a, self.b, 0, 0
        while a or b:
            carry = int(a % 10 + b % 10 + carry >= 10)
            count += carry
            a, b = a // 10, b // 10
        return count


class AdditionTask:
    """Integer addition as text: problems, a held-out split, the instruction format, prose for pre-training, a checker.

    A pair is **held out** by a hash of the unordered pair ``{a, b}``: ``a + b`` and ``b + a`` fall on
    the same side, so no training text (prose, question or sampled answer) ever holds a held-out
    pair in either order. The split is a property of the pair, not of a draw: every sampler and
    every seed agrees on it.

    Args:
        max_digits: int >= 1, the largest number of digits of an operand (the difficulty knob).
        held_out_share: float in (0, 1), the share of pairs held out.
        salt: str, mixed into the hash (another salt, another split).

    Raises:
        ValueError: for a ``max_digits`` below 1 or a share outside (0, 1).

    Example:
        >>> task = AdditionTask(max_digits=2)
        >>> problem = AdditionProblem(47, 38)
        >>> task.prompt(problem), task.answer(problem), problem.carries
        ('Question: What is 47 plus 38?\\nAnswer:', ' 85', 1)
        >>> task.is_correct(problem, " 85\\n"), task.is_correct(problem, " 84"), task.is_correct(problem, " 850")
        (True, False, False)
        >>> task.held_out(AdditionProblem(47, 38)) == task.held_out(AdditionProblem(38, 47))
        True
    """

    def __init__(self, max_digits: int = 3, held_out_share: float = 0.2, salt: str = "addition"):
        self.max_digits = check_integer("max_digits", max_digits)
        if (
            isinstance(held_out_share, bool)
            or not isinstance(held_out_share, (int, float))
            or not 0 < held_out_share < 1
        ):
            raise ValueError(f"`held_out_share` must be a number in (0, 1); received {held_out_share!r}.")
        self.held_out_share, self.salt = float(held_out_share), salt

    def held_out(self, problem: AdditionProblem) -> bool:
        """True for a pair of the held-out split (the same for ``a + b`` and ``b + a``)."""
        low, high = sorted((problem.a, problem.b))
        return zlib.crc32(f"{self.salt}:{low}+{high}".encode()) % 1_000_000 < self.held_out_share * 1_000_000

    def sample(self, count: int, rng: np.random.Generator, held_out: bool = False, digits: int | None = None):
        """``count`` problems of one split, each operand's number of digits drawn uniformly (or ``digits``).

        Args:
            count: int >= 1.
            rng: a NumPy Generator.
            held_out: bool, draw from the held-out split instead of the training one.
            digits: int in 1 .. max_digits, every operand this many digits (None: each drawn).

        Returns:
            list of :class:`AdditionProblem`, draws with repetition.
        """
        count = check_integer("count", count)
        if digits is not None and not 1 <= check_integer("digits", digits) <= self.max_digits:
            raise ValueError(f"`digits` must be in 1 .. {self.max_digits}; received {digits!r}.")
        problems = []
        while len(problems) < count:
            sizes = (digits, digits) if digits else rng.integers(1, self.max_digits + 1, size=2)
            a, b = (int(rng.integers(0 if size == 1 else 10 ** (size - 1), 10**size)) for size in sizes)
            problem = AdditionProblem(a, b)
            if self.held_out(problem) == held_out:
                problems.append(problem)
        return problems

    @staticmethod
    def prompt(problem: AdditionProblem) -> str:
        """The instruction format's question, up to where the answer starts."""
        return f"Question: What is {problem.a} plus {problem.b}?\nAnswer:"

    @staticmethod
    def answer(problem: AdditionProblem) -> str:
        """The instruction format's answer: a space, the sum."""
        return f" {problem.total}"

    @staticmethod
    def prose(problem: AdditionProblem, rng: np.random.Generator) -> str:
        """The fact in one of several free-form sentences, never in the question/answer format."""
        template = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))]
        return template.format(a=problem.a, b=problem.b, total=problem.total)

    @staticmethod
    def parsed(completion: str) -> int | None:
        """The number a completion answers: its first line, stripped (and one final full stop), if that is a whole
        number written in digits; else None. What :meth:`is_correct` checks and :func:`majority_vote` counts.

        Example:
            >>> AdditionTask.parsed(" 85.\\nQuestion:"), AdditionTask.parsed(" 8 5"), AdditionTask.parsed("")
            (85, None, None)
        """
        line = completion.split("\n", 1)[0].strip()
        line = line[:-1] if line.endswith(".") else line
        return int(line) if re.fullmatch(r"\d+", line) else None

    @classmethod
    def is_correct(cls, problem: AdditionProblem, completion: str) -> bool:
        """The checker: the completion's first line, stripped (and one final full stop), is the sum exactly.

        Strict on purpose: a reward a model can earn without the answer (a number with the
        sum inside it, several guesses) is a reward it learns to exploit.
        """
        return cls.parsed(completion) == problem.total


def instruction_rows(encode, prompts, answers, length: int, end_id: int):
    """Prompt/answer pairs as next-token training rows, with each row's prompt length for :func:`answer_mask`.

    Each example is ``[end_id] + encode(prompt) + encode(answer) + [end_id]``: the end-of-text id
    first, as a start (the model saw it between texts in pre-training), and last, so the model
    learns to stop after the answer. Inputs are the tokens but the last, targets the tokens but
    the first, both padded with 0 to ``length``. The prompt and the answer are encoded apart, so
    the answer's tokens do not depend on the prompt (with byte-level BPE the two agree with the
    joint encoding when the answer starts with a space, as :meth:`AdditionTask.answer` does).

    Args:
        encode: callable str -> list of int ids > 0.
        prompts, answers: sequences of str, the same length.
        length: int, the rows' length T.
        end_id: int > 0.

    Returns:
        ``(inputs, targets, prompt_lengths)``: int32 ``(N, T)``, int32 ``(N, T)``, int32 ``(N,)``
        (the start id plus the prompt's tokens).

    Raises:
        ValueError: for prompts and answers of different counts, or an example longer than
            ``length + 1`` tokens (named by its index).

    Example:
        >>> encode = lambda text: [ord(c) - 96 for c in text]
        >>> inputs, targets, lengths = instruction_rows(encode, ["ab"], ["c"], 5, 27)
        >>> inputs.tolist(), targets.tolist(), lengths.tolist()
        ([[27, 1, 2, 3, 0]], [[1, 2, 3, 27, 0]], [3])
    """
    if len(prompts) != len(answers):
        raise ValueError(f"`prompts` and `answers` must pair up; received {len(prompts)} and {len(answers)}.")
    length, end_id = check_integer("length", length), check_integer("end_id", end_id)
    inputs, targets = np.zeros((len(prompts), length), "int32"), np.zeros((len(prompts), length), "int32")
    prompt_lengths = np.zeros(len(prompts), "int32")
    for row, (prompt, answer) in enumerate(zip(prompts, answers)):
        prompt_ids = [end_id, *encode(prompt)]
        tokens = [*prompt_ids, *encode(answer), end_id]
        if len(tokens) > length + 1:
            raise ValueError(f"example {row} holds {len(tokens)} tokens, more than `length` + 1 = {length + 1}.")
        inputs[row, : len(tokens) - 1], targets[row, : len(tokens) - 1] = tokens[:-1], tokens[1:]
        prompt_lengths[row] = len(prompt_ids)
    return inputs, targets, prompt_lengths


def _generator(model, longest: int):
    """``model`` itself when it is a :class:`~transformer_course.generation.CachedLanguageModel` (its traced steps
    are reused from call to call), else a new one for it; either way able to reach ``longest`` tokens."""
    from .generation import CachedLanguageModel

    if isinstance(model, CachedLanguageModel):
        if longest > model.max_length:
            raise ValueError(
                f"a prompt and `max_answer_tokens` take {longest} tokens, more than the generator's max_length "
                f"{model.max_length}."
            )
        return model
    if longest > model.sequence_length:
        raise ValueError(
            f"a prompt and `max_answer_tokens` take {longest} tokens, more than the model's sequence_length "
            f"{model.sequence_length}."
        )
    return CachedLanguageModel(model, longest)


def _prompt_batches(model, encode, prompts, end_id: int, max_answer_tokens: int):
    """The prompts' ids (each after ``end_id``), the generator able to reach the longest answer, and the
    prompts' indices grouped by their length in tokens, shortest first (cached generation decodes a batch of
    equal lengths)."""
    encoded = [[end_id, *encode(prompt)] for prompt in prompts]
    cached = _generator(model, max(len(ids) for ids in encoded) + max_answer_tokens)
    by_length: dict[int, list[int]] = {}
    for index, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(index)
    return encoded, cached, sorted(by_length.items())


def _answer_text(row, start: int, end_id: int, decode) -> str:
    """A decoded row's answer: its tokens from ``start`` on, padding dropped, up to (not including) ``end_id``."""
    generated = [int(i) for i in row[start:] if i != 0]
    return decode(generated[: generated.index(end_id) if end_id in generated else len(generated)])


class SampledAnswers(NamedTuple):
    """:func:`sample_answers`'s result, for Q prompts and G answers each.

    Attributes:
        texts: list of Q lists of G str, each answer decoded up to (not including) its end id.
        inputs, targets: int32 ``(Q·G, T)``, each sampled sequence as a training row (prompt then
            answer), prompt ``q``'s answers in rows ``q·G .. q·G + G - 1``.
        prompt_lengths: int32 ``(Q·G,)``, for :func:`answer_mask`.
    """

    texts: list
    inputs: np.ndarray
    targets: np.ndarray
    prompt_lengths: np.ndarray


def sample_answers(
    model,
    encode,
    decode,
    prompts,
    answers_each: int,
    end_id: int,
    max_answer_tokens: int,
    temperature: float = 1.0,
    seed: int | None = None,
) -> SampledAnswers:
    """Sample G answers to each prompt with the package's cached generation: GRPO's groups, DPO's candidates.

    Prompts are batched by their length in tokens (cached generation needs equal lengths in a
    batch), each repeated G times, and sampled with
    :func:`~transformer_course.decoding.sample_decode` through
    :class:`~transformer_course.generation.CachedLanguageModel`. Each sequence starts with
    ``end_id``, as :func:`instruction_rows`' rows do.

    Args:
        model: a :class:`~transformer_course.language_model.LanguageModel`, or a
            :class:`~transformer_course.generation.CachedLanguageModel` of one, made once and passed at
            every call (a policy sampled at every update): its traced steps are then reused, and read
            the weights as they are at each call.
        encode, decode: the tokenizer's str -> ids and ids -> str.
        prompts: sequence of Q str.
        answers_each: int G >= 1.
        end_id: int, the end-of-text id (it ends an answer).
        max_answer_tokens: int, the most tokens an answer may take.
        temperature: float > 0.
        seed: int, the same seed gives the same answers.

    Returns:
        :class:`SampledAnswers`; rows are ``1 + prompt + max_answer_tokens`` long at most, padded.

    Raises:
        ValueError: for a prompt that leaves no room in the model's ``sequence_length`` (or the
            generator's ``max_length``).
    """
    from .decoding import sample_decode

    answers_each = check_integer("answers_each", answers_each)
    encoded, cached, groups = _prompt_batches(model, encode, prompts, end_id, max_answer_tokens)
    texts = [[""] * answers_each for _ in prompts]
    sequences: list = [None] * len(prompts)
    for batch_number, (length, indices) in enumerate(groups):
        batch = np.repeat(np.array([encoded[index] for index in indices], "int32"), answers_each, axis=0)
        drawn = sample_decode(cached.next_token_function(batch), batch, end_id=end_id, max_length=max_answer_tokens,
                              temperature=temperature, seed=None if seed is None else seed + batch_number)  # fmt: skip
        for position, index in enumerate(indices):
            sequences[index] = drawn[position * answers_each : (position + 1) * answers_each]
            texts[index] = [_answer_text(row, length, end_id, decode) for row in sequences[index]]
    longest = max(len(ids) for ids in encoded) + max_answer_tokens
    inputs = np.zeros((len(prompts) * answers_each, longest), "int32")
    targets = np.zeros_like(inputs)
    for index, rows in enumerate(sequences):
        for answer, row in enumerate(rows):
            tokens = [int(i) for i in row if i != 0]
            inputs[index * answers_each + answer, : len(tokens) - 1] = tokens[:-1]
            targets[index * answers_each + answer, : len(tokens) - 1] = tokens[1:]
    prompt_lengths = np.repeat(np.array([len(ids) for ids in encoded], "int32"), answers_each)
    return SampledAnswers(texts, inputs, targets, prompt_lengths)


def greedy_answers(model, encode, decode, prompts, end_id: int, max_answer_tokens: int) -> list[str]:
    """Each prompt's answer by greedy decoding: what the model says when it must say one thing.

    Prompts are batched by their length in tokens and decoded with
    :func:`~transformer_course.decoding.greedy_decode` through
    :class:`~transformer_course.generation.CachedLanguageModel`; each starts with ``end_id``, as
    :func:`instruction_rows`' rows do. Every accuracy the course reports on the task is
    :meth:`AdditionTask.is_correct` of these answers.

    Args:
        model: a :class:`~transformer_course.language_model.LanguageModel`, or a
            :class:`~transformer_course.generation.CachedLanguageModel` of one, made once and passed at
            every call (a policy sampled at every update): its traced steps are then reused, and read
            the weights as they are at each call.
        encode, decode: the tokenizer's str -> ids and ids -> str.
        prompts: sequence of str.
        end_id: int, the end-of-text id (it ends an answer).
        max_answer_tokens: int >= 1, the most tokens an answer may take.

    Returns:
        list of str, one answer per prompt, decoded up to (not including) its end id.

    Raises:
        ValueError: for a prompt that leaves no room in the model's ``sequence_length`` (or the
            generator's ``max_length``).

    Example:
        >>> from transformer_course.language_model import build_language_model
        >>> model = build_language_model(260, 16, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1)
        >>> encode, decode = (lambda text: [ord(c) + 1 for c in text]), (lambda ids: "".join(chr(i - 1) for i in ids))
        >>> answers = greedy_answers(model, encode, decode, ["1 + 1 =", "2 + 2 ="], end_id=259, max_answer_tokens=3)
        >>> len(answers), all(isinstance(answer, str) and len(answer) <= 3 for answer in answers)
        (2, True)
    """
    from .decoding import greedy_decode

    max_answer_tokens = check_integer("max_answer_tokens", max_answer_tokens)
    encoded, cached, groups = _prompt_batches(model, encode, prompts, end_id, max_answer_tokens)
    answers = [""] * len(prompts)
    for length, indices in groups:
        batch = np.array([encoded[index] for index in indices], "int32")
        decoded = greedy_decode(cached.next_token_function(batch), batch, end_id, max_answer_tokens)
        for index, row in zip(indices, decoded):
            answers[index] = _answer_text(row, length, end_id, decode)
    return answers


def preference_pairs(task: AdditionTask, problems, texts) -> list[tuple[int, int, int]]:
    """DPO's pairs from sampled answers labelled by the checker: a right answer preferred to a wrong one.

    For each problem with at least one right and one wrong answer, one pair: its first right
    answer against its first wrong one (a problem whose answers all agree gives none).

    Args:
        task: the :class:`AdditionTask` whose checker labels the answers.
        problems: sequence of Q :class:`AdditionProblem`.
        texts: Q lists of answers (:attr:`SampledAnswers.texts`).

    Returns:
        list of ``(problem index, chosen answer index, rejected answer index)``.

    Example:
        >>> task = AdditionTask(max_digits=1)
        >>> preference_pairs(task, [AdditionProblem(2, 3), AdditionProblem(1, 1)], [[" 6", " 5"], [" 2", " 2"]])
        [(0, 1, 0)]
    """
    pairs = []
    for index, (problem, answers) in enumerate(zip(problems, texts, strict=True)):
        right = [task.is_correct(problem, answer) for answer in answers]
        if any(right) and not all(right):
            pairs.append((index, right.index(True), right.index(False)))
    return pairs


def answer_mask(targets, prompt_lengths):
    """Which next-token targets belong to the answer: True from the answer's first token on, padding out.

    A row is the prompt's tokens then the answer's, as model inputs; its targets are the same
    tokens moved one place left (target t is token t + 1). The answer's first token is token
    ``prompt_length``, so it is target ``prompt_length - 1``: the mask is True at targets
    ``t >= prompt_length - 1`` that are not padding (0). Supervised fine-tuning with this mask
    trains on the answers alone (Ouyang et al., 2022; Raschka, 2024, ch. 7, masks the prompt the
    same way); with ``prompt_lengths`` of 0 every real target counts.

    Args:
        targets: int ``(B, T)``, 0 = padding.
        prompt_lengths: int ``(B,)``, each row's prompt length in tokens (>= 0).

    Returns:
        bool ``(B, T)``.

    Example:
        >>> ops.convert_to_numpy(answer_mask(np.array([[6, 7, 8, 9, 0]]), np.array([3])))  # answer: targets 2, 3
        array([[False, False,  True,  True, False]])
    """
    targets = ops.convert_to_tensor(targets)
    positions = ops.arange(ops.shape(targets)[1])[None, :]
    starts = ops.cast(ops.convert_to_tensor(prompt_lengths), positions.dtype)[:, None] - 1
    return ops.logical_and(positions >= starts, ops.not_equal(targets, 0))


def target_log_probabilities(probabilities, targets):
    """log p(target) at every position, from a language model's output probabilities; differentiable.

    Args:
        probabilities: float ``(B, T, V)``, the model's next-token distributions.
        targets: int ``(B, T)``.

    Returns:
        float ``(B, T)``, natural logs (probabilities below the float32 tiny are floored there, so
        a log is never -inf).

    Example:
        >>> probabilities = np.array([[[0.1, 0.9], [0.75, 0.25]]], "float32")
        >>> np.round(ops.convert_to_numpy(target_log_probabilities(probabilities, np.array([[1, 0]]))), 4)
        array([[-0.1054, -0.2877]], dtype=float32)
    """
    probabilities = ops.convert_to_tensor(probabilities)
    chosen = ops.take_along_axis(probabilities, ops.expand_dims(ops.cast(targets, "int32"), -1), axis=-1)[..., 0]
    return ops.log(ops.maximum(chosen, np.finfo("float32").tiny))


def sequence_log_probabilities(token_log_probabilities, mask):
    """The log-probability of each row's chosen tokens: the sum of their per-token log-probabilities.

    log π(answer | prompt) = Σ_t log π(y_t | prompt, y_<t) over the answer's tokens: the quantity
    DPO compares between a policy and its reference.

    Args:
        token_log_probabilities: float ``(B, T)``, natural-log probability of each target.
        mask: bool or float ``(B, T)``, the tokens that count (:func:`answer_mask`).

    Returns:
        float ``(B,)``, in nats.

    Example:
        >>> scores = sequence_log_probabilities(np.log([[0.5, 0.5, 0.25]]), np.array([[False, True, True]]))
        >>> ops.convert_to_numpy(scores)  # log 0.5 + log 0.25
        array([-2.07944154])
    """
    values = ops.convert_to_tensor(token_log_probabilities)
    return ops.sum(values * ops.cast(mask, values.dtype), axis=-1)


class DPOTerms(NamedTuple):
    """:func:`dpo_loss`'s result, each float ``(B,)``.

    Attributes:
        loss: −log σ(margin), the per-pair loss.
        chosen_rewards: β (log π(y_w) − log π_ref(y_w)), the implicit reward of the preferred answer.
        rejected_rewards: the same for the rejected answer.
    """

    loss: object
    chosen_rewards: object
    rejected_rewards: object


def dpo_loss(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta: float = 0.1) -> DPOTerms:
    """Direct preference optimisation: −log σ(β[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]).

    The policy is pushed to raise its log-probability of the preferred answer y_w, and lower that of
    the rejected y_l, *relative to the frozen reference*: each difference β (log π − log π_ref) is
    an implicit reward, and the loss is the logistic loss of the two rewards' margin. β sets how
    far from the reference the policy may move: a small β lets it drift further.

    Args:
        policy_chosen, policy_rejected: float ``(B,)``, sequence log-probabilities under the policy
            (:func:`sequence_log_probabilities`), in nats.
        reference_chosen, reference_rejected: the same under the frozen reference model.
        beta: float > 0.

    Returns:
        :class:`DPOTerms` (loss, chosen_rewards, rejected_rewards); the batch's loss is the mean of
        ``loss``, its reward accuracy the share of rows with chosen > rejected.

    Raises:
        ValueError: for a ``beta`` that is not a positive number.

    Source: Rafailov et al., 2023, *Direct Preference Optimization: Your Language Model is Secretly
    a Reward Model*, eq. 7 (the loss) and §5 (the implicit reward).

    Example:
        >>> terms = dpo_loss(np.array([-1.0]), np.array([-3.0]), np.array([-2.0]), np.array([-2.0]), beta=0.5)
        >>> [round(float(value[0]), 5) for value in terms]  # margin 0.5 (1 + 1) = 1: log(1 + e^-1)
        [0.31326, 0.5, -0.5]
    """
    beta = check_positive("beta", beta)
    policy_chosen = ops.convert_to_tensor(policy_chosen)
    policy_rejected, reference_chosen, reference_rejected = (
        ops.cast(ops.convert_to_tensor(value), policy_chosen.dtype)
        for value in (policy_rejected, reference_chosen, reference_rejected)
    )
    chosen = beta * (policy_chosen - reference_chosen)
    rejected = beta * (policy_rejected - reference_rejected)
    return DPOTerms(ops.softplus(rejected - chosen), chosen, rejected)  # -log σ(x) = softplus(-x)


def group_advantages(rewards, epsilon: float = 1e-4):
    """GRPO's advantages: each reward less its group's mean, over its group's standard deviation.

    Every question gets G sampled answers; the group is its own baseline, so no value model is
    needed. A group whose answers are all right (or all wrong) has a standard deviation of 0 and
    advantages 0: it teaches nothing. The standard deviation is the population one (over G);
    some implementations divide by G − 1 instead.

    Args:
        rewards: float ``(Q, G)``: Q questions, G answers each.
        epsilon: float >= 0, added to the standard deviation.

    Returns:
        float ``(Q, G)``.

    Raises:
        ValueError: for rewards that are not 2-D.

    Source: Shao et al., 2024, *DeepSeekMath*, §4.1.2 (outcome supervision).

    Example:
        >>> group_advantages(np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]), epsilon=0.0)
        array([[ 1., -1., -1.,  1.],
               [ 0.,  0.,  0.,  0.]])
    """
    rewards = np.asarray(rewards, dtype="float64")
    if rewards.ndim != 2:
        raise ValueError(f"`rewards` must have shape (questions, answers); received shape {rewards.shape}.")
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    spread = rewards.std(axis=1, keepdims=True)
    return np.divide(centred, spread + epsilon, out=np.zeros_like(centred), where=spread + epsilon > 0)


class GRPOTerms(NamedTuple):
    """:func:`grpo_loss`'s result (scalars).

    Attributes:
        loss: the negated objective, to minimise.
        kl: the mean per-token KL estimate to the reference.
        clipped_share: the share of answer tokens whose ratio left [1 − ε, 1 + ε].
    """

    loss: object
    kl: object
    clipped_share: object


def grpo_loss(
    log_probabilities,
    old_log_probabilities,
    reference_log_probabilities,
    advantages,
    mask,
    clip_epsilon: float = 0.2,
    kl_coefficient: float = 0.04,
) -> GRPOTerms:
    """GRPO's clipped objective with a KL penalty, for a batch of sampled answers; returned as a loss.

    Per answer token t of answer i, with the ratio r = π(o_t) / π_old(o_t):

        min(r Â_i, clip(r, 1 − ε, 1 + ε) Â_i) − β KL_t,
        KL_t = π_ref / π − log(π_ref / π) − 1  (an unbiased estimate, always >= 0),

    averaged over each answer's tokens, then over the answers (eq. 3). π_old sampled the answers
    (the policy before this round's updates; at the first update r = 1). Clipping removes the
    incentive to move a token's probability further than ε from π_old in the direction its
    advantage pushes.

    Args:
        log_probabilities: float ``(B, T)``, log π of each sampled token under the policy being trained.
        old_log_probabilities: float ``(B, T)``, under the policy that sampled them (no gradient).
        reference_log_probabilities: float ``(B, T)``, under the frozen reference model.
        advantages: float ``(B,)``, each answer's advantage (:func:`group_advantages`, flattened).
        mask: bool ``(B, T)``, the answer's tokens (every row must hold at least one).
        clip_epsilon: float in [0, 1), ε.
        kl_coefficient: float >= 0, β (0: no KL penalty).

    Returns:
        :class:`GRPOTerms`: (loss, kl, clipped_share), scalars.

    Raises:
        ValueError: for a ``clip_epsilon`` outside [0, 1) or a negative ``kl_coefficient``.

    Source: Shao et al., 2024, *DeepSeekMath*, §4.1, eq. 3 and 4; the clipped ratio is PPO's
    (Schulman et al., 2017, eq. 7).

    Example:
        >>> same = np.log([[0.5, 0.5]])
        >>> terms = grpo_loss(same, same, same, np.array([2.0]), np.array([[True, True]]))
        >>> [round(float(value), 6) for value in terms]  # r = 1, KL = 0: the loss is -Â
        [-2.0, 0.0, 0.0]
    """
    clip_epsilon = check_rate("clip_epsilon", clip_epsilon)
    kl_coefficient = check_non_negative("kl_coefficient", kl_coefficient)
    log_probabilities = ops.convert_to_tensor(log_probabilities)
    dtype = log_probabilities.dtype
    old, reference, advantage = (
        ops.cast(ops.convert_to_tensor(value), dtype)
        for value in (old_log_probabilities, reference_log_probabilities, advantages)
    )
    old, reference, advantage = ops.stop_gradient(old), ops.stop_gradient(reference), advantage[:, None]
    weights = ops.cast(mask, dtype)
    ratio = ops.exp(log_probabilities - old)
    surrogate = ops.minimum(ratio * advantage, ops.clip(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage)
    log_reference_ratio = reference - log_probabilities
    kl = ops.exp(log_reference_ratio) - log_reference_ratio - 1
    per_token = surrogate - kl_coefficient * kl
    lengths = ops.sum(weights, axis=-1)
    objective = ops.mean(ops.sum(per_token * weights, axis=-1) / lengths)
    answer_tokens = ops.sum(weights)
    clipped = ops.cast(ops.greater(ops.abs(ratio - 1), clip_epsilon), dtype) * weights
    return GRPOTerms(-objective, ops.sum(kl * weights) / answer_tokens, ops.sum(clipped) / answer_tokens)


def pass_at_k(samples, correct, k: int):
    """The unbiased estimate of pass@k: the chance that at least one of k answers, drawn without replacement
    from a problem's ``samples`` sampled answers of which ``correct`` are right, is right.

    pass@k = 1 − C(n − c, k) / C(n, k), computed as 1 − ∏_{i = n − c + 1}^{n} (1 − k / i), which never
    forms the large binomial coefficients. Sampling n ≥ k answers and using this estimate has less
    variance than drawing exactly k (pass@1 is c / n, the sampled accuracy). Averaged over problems it
    is what a verifier could convert: the headroom of best-of-k with a perfect checker.

    Args:
        samples: int or int array, n, the answers sampled per problem (>= k).
        correct: int or int array of the same shape, c, how many of them the checker accepts (0 .. n).
        k: int >= 1.

    Returns:
        float64 array of the shape of ``correct`` (a 0-d array for ints), each problem's estimate in [0, 1].

    Raises:
        ValueError: for k < 1, a count of samples below k, or a count of right answers outside 0 .. n.

    Source: Chen et al., 2021, *Evaluating Large Language Models Trained on Code*, §2.1, eq. 1 and Fig. 3.

    Example:
        >>> float(pass_at_k(5, 2, 2))  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
        0.7
        >>> pass_at_k([10, 10, 10], [0, 3, 10], 1)  # pass@1 is c / n
        array([0. , 0.3, 1. ])
    """
    k = check_integer("k", k)
    samples, correct = np.broadcast_arrays(np.asarray(samples), np.asarray(correct))
    if samples.dtype.kind not in "iu" or correct.dtype.kind not in "iu":
        raise ValueError("`samples` and `correct` must be whole numbers (counts).")
    if np.any(samples < k):
        raise ValueError(f"every problem needs at least k = {k} samples; received {samples.min()}.")
    if np.any((correct < 0) | (correct > samples)):
        raise ValueError("`correct` must be between 0 and `samples` for every problem.")
    result = np.empty(samples.shape, dtype="float64")
    for index in np.ndindex(samples.shape):
        n, c = int(samples[index]), int(correct[index])
        result[index] = 1.0 if n - c < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    return result


def majority_vote(answers):
    """The answer most of ``answers`` give (maj@k's pick), None where none is given; ties go to the one seen first.

    Args:
        answers: a sequence of hashable answers, None for a completion that gives none (an unparsable one,
            :meth:`AdditionTask.parsed`): Nones never win.

    Returns:
        The winning answer, or None when every answer is None (or there are none).

    Source: self-consistency, Wang et al., 2023, *Self-Consistency Improves Chain of Thought Reasoning*, §2.

    Example:
        >>> majority_vote([85, None, 84, 85, None, None]), majority_vote([7, 8]), majority_vote([None])
        (85, 7, None)
    """
    counts: dict = {}
    for answer in answers:
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
    return max(counts, key=counts.get) if counts else None  # max keeps the first of equal counts


class KLEstimates(NamedTuple):
    """:func:`kl_estimates`' result, each float ``(...)`` of the inputs' shape (one estimate a sample).

    Attributes:
        k1: −log r, unbiased, often negative, high variance.
        k2: ½ (log r)², biased (low when q and p are close), never negative, low variance.
        k3: (r − 1) − log r, unbiased and never negative.
    """

    k1: object
    k2: object
    k3: object


def kl_estimates(sampling_log_probabilities, other_log_probabilities) -> KLEstimates:
    """The three sample estimators of KL(q ‖ p), from samples x ~ q: k1, k2 and k3 of each sample.

    With r = p(x) / q(x) for a sample x drawn from q:  k1 = −log r,  k2 = ½ (log r)²,
    k3 = (r − 1) − log r. The means of k1 and k3 over samples are unbiased estimates of
    KL(q ‖ p) = E_q[log q/p] (E_q[r] = 1, so k3 adds r − 1, whose mean is 0, to k1: a control
    variate that makes every sample's estimate ≥ 0 because log r ≤ r − 1). k2's mean is biased, but
    close to KL for nearby q and p, and has low variance. GRPO's KL penalty is k3 per token with q
    the policy and p the reference (:func:`grpo_loss`); its log of "KL to the reference" should say
    which estimator it uses.

    Args:
        sampling_log_probabilities: float array, log q(x) of each sample under the distribution that drew it.
        other_log_probabilities: float array of the same shape, log p(x) of the same samples.

    Returns:
        :class:`KLEstimates` of float64 arrays, the inputs' shape: each sample's three estimates.

    Raises:
        ValueError: for arrays of different shapes.

    Source: J. Schulman, 2020, *Approximating KL Divergence* (blog note): k1, k2 and k3.

    Example:
        >>> estimates = kl_estimates(np.log([0.5, 0.25]), np.log([0.25, 0.5]))  # r = 1/2 and 2
        >>> [np.round(value, 4).tolist() for value in estimates]
        [[0.6931, -0.6931], [0.2402, 0.2402], [0.1931, 0.3069]]
    """
    sampling = np.asarray(sampling_log_probabilities, dtype="float64")
    other = np.asarray(other_log_probabilities, dtype="float64")
    if sampling.shape != other.shape:
        raise ValueError(
            "`sampling_log_probabilities` and `other_log_probabilities` must have one shape; received "
            f"{sampling.shape} and {other.shape}."
        )
    log_ratio = other - sampling
    return KLEstimates(-log_ratio, 0.5 * log_ratio**2, np.expm1(log_ratio) - log_ratio)


@keras.saving.register_keras_serializable(package="transformer_course")
class AnswerLogProbabilities(keras.layers.Layer):
    """A language model's log-probability of each target token: log π(target_t | tokens ≤ t), differentiable.

    The layer GRPO trains through: wrapped around the policy, its output is what
    :class:`GRPOLoss` reads, and its gradient reaches the policy's weights.

    Args:
        policy: a language model (``(B, T)`` int ids → ``(B, T, V)`` next-token probabilities), e.g.
            :func:`~transformer_course.language_model.build_language_model`'s.

    Call arguments:
        rows: int ``(B, T)``, the model's inputs (0 = padding).
        targets: int ``(B, T)``, the next tokens.

    Returns:
        float ``(B, T)``: natural logs (:func:`target_log_probabilities`); padding's values are
        whatever the model gives there: mask them (:func:`answer_mask`).

    Raises:
        ValueError: for a ``policy`` that is not a Keras layer or model.

    Example:
        >>> from transformer_course.language_model import build_language_model
        >>> policy = build_language_model(12, 6, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1)
        >>> rows = np.array([[11, 3, 4, 5, 0, 0]])
        >>> tuple(AnswerLogProbabilities(policy)(rows, np.roll(rows, -1, axis=1)).shape)
        (1, 6)
    """

    def __init__(self, policy, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(policy, keras.layers.Layer):
            raise ValueError(f"`policy` must be a Keras layer or model (a language model); received {policy!r}.")
        self.policy = policy

    def build(self, rows_shape, targets_shape=None):
        if not self.policy.built:
            self.policy.build(rows_shape)
        self.built = True

    def call(self, rows, targets):
        return target_log_probabilities(self.policy(rows), targets)

    def compute_output_shape(self, rows_shape, targets_shape=None):
        return tuple(rows_shape)

    def get_config(self):
        return {**super().get_config(), "policy": keras.saving.serialize_keras_object(self.policy)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["policy"] = keras.saving.deserialize_keras_object(config["policy"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="transformer_course")
class PairLogProbabilities(AnswerLogProbabilities):
    """The two sequence log-probabilities of a preference pair, log π(y_w | x) and log π(y_l | x): DPO's inputs.

    Args:
        policy: a language model, as for :class:`AnswerLogProbabilities`.

    Call arguments:
        rows: int ``(B, 2, T)``: each pair's two rows, the preferred answer's first.
        targets: int ``(B, 2, T)``, their next tokens.
        mask: bool or float ``(B, 2, T)``, the answers' targets (:func:`answer_mask`).

    Returns:
        float ``(B, 2)``, each answer's sum of log π over its masked targets, in nats
        (:func:`sequence_log_probabilities`).

    Source: Rafailov et al., 2023, eq. 7 (the log-probabilities the DPO loss compares).

    Example:
        >>> from transformer_course.language_model import build_language_model
        >>> policy = build_language_model(12, 4, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1)
        >>> rows = np.array([[[11, 3, 4, 0], [11, 3, 5, 0]]])
        >>> tuple(PairLogProbabilities(policy)(rows, np.roll(rows, -1, axis=2), rows > 0).shape)
        (1, 2)
    """

    def build(self, rows_shape, targets_shape=None, mask_shape=None):
        if not self.policy.built:
            self.policy.build((None, rows_shape[-1]))
        self.built = True

    def call(self, rows, targets, mask):
        length = ops.shape(rows)[-1]
        flat = super().call(ops.reshape(rows, (-1, length)), ops.reshape(targets, (-1, length)))
        return ops.reshape(sequence_log_probabilities(flat, ops.reshape(mask, (-1, length))), (-1, 2))

    def compute_output_shape(self, rows_shape, targets_shape=None, mask_shape=None):
        return (rows_shape[0], 2)


@keras.saving.register_keras_serializable(package="transformer_course")
class DPOLoss(keras.losses.Loss):
    """The DPO loss of each pair (:func:`dpo_loss`), with RPO's optional NLL term on the preferred answer.

    loss = −log σ(β[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))])
           + α · (−log π(y_w)) / |y_w|,

    α = ``nll_coefficient`` (0: plain DPO). The NLL term, the preferred answer's cross-entropy a
    token, keeps its likelihood from falling while the margin grows, which plain DPO allows when the
    two answers share most of their tokens (Pal et al., 2024).

    Call arguments:
        y_true: float ``(B, 3)``: the reference's log π(y_w) and log π(y_l), and the preferred
            answer's token count |y_w| (≥ 1; read only where α > 0).
        y_pred: float ``(B, 2)``: the policy's log π(y_w) and log π(y_l) (:class:`PairLogProbabilities`).

    Returns:
        float ``(B,)``, each pair's loss in nats (Keras averages them over the batch).

    Raises:
        ValueError: for a ``beta`` that is not a positive number, or a negative ``nll_coefficient``.

    Source: Rafailov et al., 2023, eq. 7; the NLL term: Pang et al., 2024, *Iterative Reasoning
    Preference Optimization* (RPO), eq. 1.

    Example:
        >>> loss = DPOLoss(beta=0.5)
        >>> round(float(loss(np.array([[-2.0, -2.0, 1.0]]), np.array([[-1.0, -3.0]]))), 5)  # log(1 + e^-1)
        0.31326
    """

    def __init__(self, beta: float = 0.1, nll_coefficient: float = 0.0, name: str = "dpo", **kwargs):
        super().__init__(name=name, **kwargs)
        self.beta = check_positive("beta", beta)
        self.nll_coefficient = check_non_negative("nll_coefficient", nll_coefficient)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, y_pred.dtype)
        loss = dpo_loss(y_pred[:, 0], y_pred[:, 1], y_true[:, 0], y_true[:, 1], beta=self.beta).loss
        if self.nll_coefficient:
            loss = loss - self.nll_coefficient * y_pred[:, 0] / ops.maximum(y_true[:, 2], 1.0)
        return loss

    def get_config(self):
        return {**super().get_config(), "beta": self.beta, "nll_coefficient": self.nll_coefficient}


@keras.saving.register_keras_serializable(package="transformer_course")
class GRPOLoss(keras.losses.Loss):
    """GRPO's clipped objective with its KL penalty, as a Keras loss (:func:`grpo_loss`).

    Call arguments:
        y_true: float ``(B, T, 4)`` stacking, for every position of every sampled answer: log π_old
            (the policy that sampled it), log π_ref (the frozen reference), the answer's advantage
            (the same at every position of a row) and the answer mask (1 for the answer's tokens).
        y_pred: float ``(B, T)``, log π under the policy being trained (:class:`AnswerLogProbabilities`).

    Returns:
        float scalar: the negated objective, to minimise.

    Raises:
        ValueError: for a ``clip_epsilon`` outside [0, 1) or a negative ``kl_coefficient``.

    Source: Shao et al., 2024, *DeepSeekMath*, §4.1, eq. 3 and 4.

    Example:
        >>> same = np.log([[0.5, 0.5]])
        >>> y_true = np.stack([same, same, np.full((1, 2), 2.0), np.ones((1, 2))], axis=-1)
        >>> round(float(GRPOLoss()(y_true, same)), 4)  # r = 1, KL = 0: the loss is -Â
        -2.0
    """

    def __init__(self, clip_epsilon: float = 0.2, kl_coefficient: float = 0.04, name: str = "grpo", **kwargs):
        super().__init__(name=name, **kwargs)
        self.clip_epsilon = check_rate("clip_epsilon", clip_epsilon)
        self.kl_coefficient = check_non_negative("kl_coefficient", kl_coefficient)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, y_pred.dtype)
        return grpo_loss(
            y_pred,
            y_true[..., 0],
            y_true[..., 1],
            y_true[..., 2][:, 0],
            y_true[..., 3] > 0,
            clip_epsilon=self.clip_epsilon,
            kl_coefficient=self.kl_coefficient,
        ).loss

    def get_config(self):
        return {**super().get_config(), "clip_epsilon": self.clip_epsilon, "kl_coefficient": self.kl_coefficient}


def supervised_fine_tune(
    model,
    inputs,
    targets,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    warmup_share: float = 0.1,
    weight_decay: float = 0.01,
    jit_compile="auto",
):
    """Fine-tune ``model`` in place on next-token rows; the seed sets the order of the examples.

    The examples are shuffled by :class:`~transformer_course.training.RowBatches` seeded with
    ``seed``, one pass an epoch, so two seeds give two orders (and one seed the same order, whatever
    ran before: Keras' own shuffling draws from a global state that earlier work moves). AdamW with
    a linear warm-up over ``warmup_share`` of the updates, then a cosine decay
    (:class:`~transformer_course.training.WarmupCosineDecay`); the loss is
    :class:`~transformer_course.metrics.MaskedCrossEntropy`, which skips targets of 0 — set the
    prompt's targets to 0 to train on the answers alone (:func:`answer_mask`).

    Args:
        model: a language model, compiled here (its earlier compilation is replaced).
        inputs, targets: int ``(N, T)`` rows (:func:`instruction_rows`).
        epochs: int >= 1, passes over the rows.
        batch_size: int >= 1.
        learning_rate: float > 0, the peak.
        seed: int >= 0, the order of the examples.
        warmup_share: float in [0, 1), the share of the updates spent warming up.
        weight_decay: float >= 0, AdamW's.
        jit_compile: passed to ``compile``.

    Returns:
        The Keras ``History`` of the fit (one loss an epoch).

    Raises:
        ValueError: for rows of different shapes or a setting out of range (named).

    Example:
        >>> from transformer_course.language_model import build_language_model
        >>> model = build_language_model(12, 4, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1)
        >>> rows = np.array([[11, 3, 4, 5], [11, 3, 5, 6]])
        >>> history = supervised_fine_tune(model, rows, np.roll(rows, -1, axis=1), epochs=2, batch_size=2,
        ...                                learning_rate=1e-3, seed=0)
        >>> len(history.history["loss"])
        2
    """
    epochs, batch_size = check_integer("epochs", epochs), check_integer("batch_size", batch_size)
    learning_rate = check_positive("learning_rate", learning_rate)
    if not 0.0 <= warmup_share < 1.0:
        raise ValueError(f"`warmup_share` must be in [0, 1); received {warmup_share!r}.")
    batches = RowBatches(inputs, targets, batch_size, seed=seed)
    updates = len(batches) * epochs
    schedule = WarmupCosineDecay(learning_rate, int(updates * warmup_share), updates)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=weight_decay), loss=MaskedCrossEntropy(),
                  jit_compile=jit_compile)  # fmt: skip
    return model.fit(batches, epochs=epochs, verbose=0)
