import math

import numpy as np
import pytest

from transformer_course.decoding import NextTokenTable, batch_beam_search, beam_search, greedy_decode, length_penalty

PAD, START, END, A, B = 0, 1, 2, 3, 4


def table_model(table):
    """A toy model: next-token probabilities looked up by the ids decoded so far."""

    def next_token_probabilities(decoded):
        rows = []
        for sequence in decoded:
            key = tuple(int(i) for i in sequence if i != PAD)
            rows.append(table.get(key, [0, 0, 1.0, 0, 0]))  # unknown prefix: end
        return np.array(rows)

    return next_token_probabilities


# Greedy takes A (0.5) first and ends with probability 0.5 * 0.35 * ...; B first then END has 0.36.
TRAP = table_model(
    {
        (START,): [0, 0, 0.1, 0.5, 0.4],
        (START, A): [0, 0, 0.3, 0.35, 0.35],
        (START, B): [0, 0, 0.9, 0.05, 0.05],
        (START, A, A): [0, 0, 0.5, 0.25, 0.25],
        (START, A, B): [0, 0, 0.5, 0.25, 0.25],
    }
)


def test_greedy_follows_the_most_likely_id_and_pads_finished_rows():
    model = table_model(
        {
            (START,): [0, 0, 0, 1, 0],
            (START, A): [0, 0, 0, 0, 1],
            (START, B): [0, 0, 1, 0, 0],
            (START, A, B): [0, 0, 1, 0, 0],
        }
    )
    decoded = greedy_decode(model, start_ids=[START, START], end_id=END, max_length=10)
    np.testing.assert_array_equal(decoded, [[START, A, B, END], [START, A, B, END]])
    mixed = table_model({(START,): [0, 0, 1, 0, 0], (B,): [0, 0, 0, 1, 0], (B, A): [0, 0, 1, 0, 0]})
    np.testing.assert_array_equal(greedy_decode(mixed, [START, B], END, 5), [[START, END, PAD], [B, A, END]])


def test_greedy_stops_at_max_length():
    loop = table_model({})
    forever = lambda decoded: np.tile([0, 0, 0, 1.0, 0], (decoded.shape[0], 1))  # noqa: E731
    assert greedy_decode(forever, START, END, 4).tolist() == [[START, A, A, A, A]]
    assert greedy_decode(loop, START, END, 4).tolist() == [[START, END]]


def test_beam_search_escapes_the_greedy_trap():
    greedy = greedy_decode(TRAP, START, END, 5)[0]
    assert greedy[:2].tolist() == [START, A]
    ids, score = beam_search(TRAP, START, END, max_length=5, beam_width=2, alpha=0.0)
    assert ids.tolist() == [START, B, END]
    assert score == pytest.approx(math.log(0.4 * 0.9))


def test_beam_width_one_is_greedy():
    ids, _ = beam_search(TRAP, START, END, max_length=5, beam_width=1, alpha=0.0)
    np.testing.assert_array_equal(ids, greedy_decode(TRAP, START, END, 5)[0])


def test_length_penalty_normalises_the_score():
    assert length_penalty(1, 0.0) == 1.0
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
    ids, score = beam_search(TRAP, START, END, max_length=5, beam_width=2, alpha=1.0)
    generated = len(ids) - 1
    assert score == pytest.approx(math.log(0.4 * 0.9) / ((5 + generated) / 6))


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(max_length=0), "`max_length`"),
        (dict(beam_width=0), "`beam_width`"),
        (dict(alpha=-1.0), "`alpha`"),
    ],
)
def test_beam_search_checks_its_arguments(arguments, message):
    settings = dict(start_id=START, end_id=END, max_length=5, beam_width=2, alpha=0.6) | arguments
    with pytest.raises(ValueError, match=message):
        beam_search(TRAP, **settings)


def test_a_model_returning_the_wrong_shape_is_named():
    with pytest.raises(ValueError, match="must return shape"):
        greedy_decode(lambda decoded: np.ones(5), START, END, 3)


def prefix_model(vocabulary, end_bias):
    """Deterministic probabilities that depend on the whole prefix: a seeded draw per prefix."""

    def next_token_probabilities(decoded):
        rows = []
        for sequence in decoded:
            seed = abs(hash(tuple(int(i) for i in sequence))) % (2**32)
            weights = np.random.default_rng(seed).random(vocabulary) ** 3
            weights[PAD] = 0.0
            weights[END] = 0.02 * weights[END] + end_bias * len(sequence)  # ends grow likelier with length
            rows.append(weights / weights.sum())
        return np.array(rows)

    return next_token_probabilities


class CachedPrefixModel:
    """The same probabilities as ``prefix_model``, computed from per-row state that must be reordered.

    Each row keeps the tuple of ids it has seen, as a decoder keeps its key/value cache; the model
    reads only the last column of ``decoded``, so a missing or wrong ``reorder`` changes the output.
    """

    def __init__(self, vocabulary, end_bias):
        self.reference, self.state = prefix_model(vocabulary, end_bias), None

    def __call__(self, decoded):
        last = decoded[:, -1]
        if self.state is None:
            self.state = [(int(i),) for i in last]
        else:
            self.state = [s + (int(i),) for s, i in zip(self.state, last)]
        return self.reference(np.array(self.state))

    def reorder(self, parents):
        self.state = [self.state[p] for p in parents]


@pytest.mark.parametrize(
    "beam_width, alpha, end_bias", [(1, 0.0, 0.05), (2, 0.6, 0.05), (4, 0.6, 0.02), (3, 1.0, 0.0), (5, 0.6, 0.01)]
)
def test_batch_beam_search_keeps_exactly_what_beam_search_keeps(beam_width, alpha, end_bias):
    starts = [START, START, A, B, START]
    uncached = prefix_model(9, end_bias)
    ids, scores = batch_beam_search(uncached, starts, END, max_length=8, beam_width=beam_width, alpha=alpha)
    cached = CachedPrefixModel(9, end_bias)
    cached_ids, cached_scores = batch_beam_search(cached, starts, END, 8, beam_width, alpha, reorder=cached.reorder)
    assert ids.shape[0] == len(starts)
    for row, start in enumerate(starts):
        expected, expected_score = beam_search(uncached, start, END, 8, beam_width, alpha)
        generated = ids[row][: len(expected)]
        np.testing.assert_array_equal(generated, expected)
        assert not ids[row][len(expected) :].any()  # padding after the winner
        assert scores[row] == pytest.approx(expected_score)
    np.testing.assert_array_equal(cached_ids, ids)
    np.testing.assert_allclose(cached_scores, scores)


def test_batch_beam_search_escapes_the_greedy_trap_for_every_sentence():
    ids, scores = batch_beam_search(TRAP, [START] * 3, END, max_length=5, beam_width=2, alpha=0.0)
    assert ids.tolist() == [[START, B, END]] * 3
    np.testing.assert_allclose(scores, math.log(0.4 * 0.9))


def test_batch_beam_search_without_an_end_ranks_the_open_sequences():
    forever = lambda decoded: np.tile([0, 0, 0, 0.6, 0.4], (decoded.shape[0], 1))  # noqa: E731
    ids, _ = batch_beam_search(forever, [START, START], END, max_length=3, beam_width=2, alpha=0.0)
    assert ids.tolist() == [[START, A, A, A]] * 2
    with pytest.raises(ValueError, match="`beam_width`"):
        batch_beam_search(forever, [START], END, 3, beam_width=0)


def test_batch_beam_search_with_no_possible_extension_ranks_the_beams_it_had():
    dead_end = table_model({(START,): [0, 0, 0, 0.7, 0.3], (START, A): [0] * 5, (START, B): [0] * 5})
    ids, scores = batch_beam_search(dead_end, [START, START], END, max_length=4, beam_width=2, alpha=0.0)
    expected, expected_score = beam_search(dead_end, START, END, max_length=4, beam_width=2, alpha=0.0)
    assert expected.tolist() == [START, A]
    assert ids.tolist() == [[START, A]] * 2
    np.testing.assert_allclose(scores, expected_score)


# --- sampling -------------------------------------------------------------------------------

from transformer_course.decoding import apply_temperature, sample_decode, top_k_filter, top_p_filter  # noqa: E402

FIXED = np.array([[0.05, 0.4, 0.1, 0.25, 0.15, 0.05]])


def test_temperature_really_changes_the_distribution():
    entropy = lambda p: float(-(p[p > 0] * np.log(p[p > 0])).sum())  # noqa: E731
    np.testing.assert_allclose(apply_temperature(FIXED, 1.0), FIXED, atol=1e-12)
    cold, hot = apply_temperature(FIXED, 0.5), apply_temperature(FIXED, 2.0)
    assert entropy(cold[0]) < entropy(FIXED[0]) < entropy(hot[0])
    np.testing.assert_allclose(cold[0], FIXED[0] ** 2 / (FIXED[0] ** 2).sum(), atol=1e-12)
    assert apply_temperature(FIXED, 0.01)[0].argmax() == 1 and apply_temperature(FIXED, 0.01)[0].max() > 0.999
    with pytest.raises(ValueError, match="temperature"):
        apply_temperature(FIXED, 0.0)


def test_top_k_and_top_p_keep_the_expected_ids():
    np.testing.assert_allclose(top_k_filter(FIXED, 2)[0], [0, 0.4 / 0.65, 0, 0.25 / 0.65, 0, 0], atol=1e-12)
    # sorted: 0.4, 0.25, 0.15, 0.1, ...; before each: 0, 0.4, 0.65, 0.8 -> with p = 0.65 the third id is kept
    np.testing.assert_allclose(top_p_filter(FIXED, 0.65)[0], [0, 0.4 / 0.8, 0, 0.25 / 0.8, 0.15 / 0.8, 0], atol=1e-12)
    np.testing.assert_allclose(top_p_filter(FIXED, 0.01)[0], [0, 1, 0, 0, 0, 0])  # the most likely id always stays
    np.testing.assert_allclose(top_p_filter(FIXED, 1.0), FIXED, atol=1e-12)
    with pytest.raises(ValueError, match="`p`"):
        top_p_filter(FIXED, 1.5)


@pytest.mark.parametrize(
    "sampler, ours",
    [
        ("TopKSampler(k=3)", lambda p: top_k_filter(p, 3)),
        ("TopPSampler(p=0.6)", lambda p: top_p_filter(p, 0.6)),
        ("TopPSampler(p=0.9)", lambda p: top_p_filter(p, 0.9)),
    ],
)
def test_filtered_distributions_equal_keras_hub_samplers(sampler, ours):
    keras_hub = pytest.importorskip("keras_hub")  # noqa: F841 - read by the eval below
    import keras

    draws = 20000
    reference = eval(f"keras_hub.samplers.{sampler}")  # noqa: S307 - a fixed string from this test
    reference.seed_generator = keras.random.SeedGenerator(0)
    tokens = keras.ops.convert_to_numpy(reference.get_next_token(np.repeat(FIXED.astype("float32"), draws, axis=0)))
    frequencies = np.bincount(tokens, minlength=FIXED.shape[1]) / draws
    expected = ours(FIXED)[0]
    assert set(np.flatnonzero(frequencies)) == set(np.flatnonzero(expected))  # the same ids can be drawn
    np.testing.assert_allclose(frequencies, expected, atol=0.015)  # and as often (4 standard errors)


def test_seeded_sampling_is_reproducible_and_stops_rows_at_their_end():
    table = NextTokenTable(np.tile(FIXED, (6, 1)))
    first = sample_decode(table, np.array([1, 1, 1]), end_id=5, max_length=12, temperature=0.8, top_p=0.9, seed=3)
    assert np.array_equal(first, sample_decode(table, np.array([1, 1, 1]), 5, 12, temperature=0.8, top_p=0.9, seed=3))
    others = [sample_decode(table, np.array([1, 1, 1]), 5, 12, temperature=0.8, top_p=0.9, seed=s) for s in range(4, 8)]
    assert any(not np.array_equal(first, other) for other in others)
    for row in first:
        ends = np.flatnonzero(row[1:] == 5)
        if ends.size:
            assert not row[1 + ends[0] + 1 :].any()  # padding after the end id
    assert set(np.unique(first[:, 1:])) <= {0, 1, 2, 3, 4, 5}


def test_greedy_and_sampling_continue_prompts_and_may_run_without_an_end_id():
    from transformer_course.decoding import NextTokenTable, greedy_decode, sample_decode

    table = np.full((5, 5), 0.01)
    table[np.arange(5), (np.arange(5) % 4) + 1] = 1.0  # i -> i % 4 + 1: 1 -> 2 -> 3 -> 4 -> 1
    table[:, 0] = 0.0
    table /= table.sum(axis=1, keepdims=True)
    prompts = np.array([[3, 1], [2, 4]])
    decoded = greedy_decode(NextTokenTable(table), prompts, end_id=None, max_length=3)
    np.testing.assert_array_equal(decoded, [[3, 1, 2, 3, 4], [2, 4, 1, 2, 3]])
    sampled = sample_decode(NextTokenTable(table), prompts, end_id=None, max_length=6, temperature=0.01, seed=0)
    assert sampled.shape == (2, 8)
    np.testing.assert_array_equal(sampled[:, :2], prompts)
    with pytest.raises(
        ValueError, match=r"`start_ids` must be an int, \(batch,\) start ids or \(batch, length\) prompts"
    ):
        greedy_decode(NextTokenTable(table), np.zeros((1, 1, 2), int), end_id=None, max_length=2)
