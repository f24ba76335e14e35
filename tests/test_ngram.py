"""Count-based baselines for notebook 09: proper distributions, hand-computed values, padding."""

import math

import numpy as np
import pytest

from transformer_course.ngram import BigramModel, UnigramModel, scored_pairs


def corpus(seed=0, rows=200, length=30, vocab=50):
    generator = np.random.default_rng(seed)
    ids = generator.zipf(1.3, size=(rows, length)) % (vocab - 1) + 1  # skewed, ids 1..vocab-1
    ids[::7, -5:] = 0  # some padding at the ends
    return ids


def test_scored_pairs_skip_padding_on_either_side():
    previous, following = scored_pairs([[5, 6, 0, 7, 8], [0, 0, 3, 4, 0]], 10)
    assert list(zip(previous, following)) == [(5, 6), (7, 8), (3, 4)]
    with pytest.raises(ValueError, match="must lie in 0..9; received ids from 1 to 12"):
        scored_pairs([[1, 12]], 10)


@pytest.mark.parametrize("model", [UnigramModel(50), BigramModel(50), BigramModel(50, discount=0.3)])
def test_every_context_gives_a_distribution_over_the_real_ids(model):
    model.fit(corpus())
    for previous in (1, 2, 17, 49):  # frequent, rare and never-seen contexts
        probabilities = np.exp(model.log_probability(np.full(50, previous), np.arange(50)))
        assert probabilities[0] == 0.0 and (probabilities[1:] > 0).all()
        np.testing.assert_allclose(probabilities.sum(), 1.0, atol=1e-9)


def test_bigram_by_hand():
    # Training pairs: (1,2) (2,3) (1,2) (2,1) (1,3); discount fixed at 0.5, V = 4.
    model = BigramModel(4, discount=0.5).fit([[1, 2, 3, 0], [1, 2, 1, 3]])
    # c(1 ·) = 3 with followers {2, 3}; predecessors: of 1 {2}, of 2 {1}, of 3 {2, 1} -> (1+1, 1+1, 2+1) / 7
    continuation_3 = 3 / 7
    expected = (1 - 0.5) / 3 + 0.5 * 2 / 3 * continuation_3  # P(3 | 1)
    assert math.isclose(math.exp(model.log_probability([1], [3])[0]), expected, rel_tol=1e-12)
    assert math.isclose(math.exp(model.log_probability([3], [3])[0]), continuation_3, rel_tol=1e-12)  # unseen context


def test_bigram_beats_unigram_on_text_with_structure_and_perplexity_is_the_exponent_of_the_mean_loss():
    generator = np.random.default_rng(1)
    successor = generator.permutation(np.arange(1, 40))  # each word is usually followed by one word
    rows = [[int(generator.integers(1, 40))] for _ in range(300)]
    for row in rows:
        for _ in range(24):
            row.append(int(successor[row[-1] - 1]) if generator.random() < 0.8 else int(generator.integers(1, 40)))
    ids = np.array(rows)
    train, test = ids[:250], ids[250:]
    unigram, bigram = UnigramModel(40).fit(train), BigramModel(40).fit(train)
    assert bigram.perplexity(test) < 0.5 * unigram.perplexity(test)
    previous, following = scored_pairs(test, 40)
    assert math.isclose(bigram.perplexity(test), math.exp(-bigram.log_probability(previous, following).mean()))


def test_unfitted_models_and_empty_input_get_clear_errors():
    with pytest.raises(ValueError, match="not fitted yet"):
        BigramModel(5).perplexity([[1, 2]])
    with pytest.raises(ValueError, match="no scored pair"):
        UnigramModel(5).fit([[1, 2]]).perplexity([[1, 0]])
    with pytest.raises(ValueError, match=r"`discount` must be in \(0, 1\)"):
        BigramModel(5, discount=1.5)
