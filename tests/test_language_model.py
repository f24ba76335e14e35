"""The decoder-only language model and its cached generation."""

import keras
import numpy as np
import pytest

from transformer_course.decoding import greedy_decode, sample_decode
from transformer_course.generation import CachedLanguageModel
from transformer_course.language_model import build_language_model


def small_language_model(num_layers, tie_embeddings=True, seed=0):
    keras.utils.set_random_seed(seed)
    return build_language_model(
        30, 16, embed_dim=16, intermediate_dim=32, num_heads=2, num_layers=num_layers, tie_embeddings=tie_embeddings
    )


def recomputing(model):
    def next_token_probabilities(decoded):
        probabilities = keras.ops.convert_to_numpy(model(np.asarray(decoded, "int32")))[:, -1, :].copy()
        probabilities[:, 0] = 0.0
        return probabilities / probabilities.sum(axis=1, keepdims=True)

    return next_token_probabilities


@pytest.mark.parametrize("num_layers, tie_embeddings", [(1, True), (2, True), (2, False)])
def test_cached_generation_equals_recomputing_token_for_token(num_layers, tie_embeddings):
    model = small_language_model(num_layers, tie_embeddings, seed=num_layers)
    prompt = np.array([[3, 7, 5], [4, 4, 9]])

    def from_prompt(function):
        """The strategies start from one id per row (the prompt's last); the model sees the whole prompt."""
        return lambda decoded: function(np.concatenate([prompt[:, :-1], decoded], axis=1))

    def cached_steps():
        """The cached model's next-token function, with a fresh cache."""
        return from_prompt(CachedLanguageModel(model, 16).next_token_function(prompt))

    cached = greedy_decode(cached_steps(), prompt[:, -1], 2, 12)
    recomputed = greedy_decode(from_prompt(recomputing(model)), prompt[:, -1], 2, 12)
    np.testing.assert_array_equal(cached, recomputed)
    seeded = [sample_decode(cached_steps(), prompt[:, -1], 2, 12, temperature=0.9, top_p=0.9, seed=4) for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])
    np.testing.assert_array_equal(
        seeded[0],
        sample_decode(from_prompt(recomputing(model)), prompt[:, -1], 2, 12, temperature=0.9, top_p=0.9, seed=4),
    )


def test_the_language_model_is_causal():
    model = small_language_model(2)
    ids = np.array([[3, 7, 5, 8, 9]])
    changed = ids.copy()
    changed[0, 3:] = [11, 12]
    before, after = keras.ops.convert_to_numpy(model(ids)), keras.ops.convert_to_numpy(model(changed))
    np.testing.assert_allclose(before[0, :3], after[0, :3], atol=1e-6)
    # its cached pass: the prompt at once, then one token a step, gives what the whole model gives
    caches = model.initial_caches(1, 5)
    prompt, caches = model.call_with_cache(ids[:, :3], caches, 0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(prompt), before[:, :3], atol=1e-5)
    for position in (3, 4):
        step, caches = model.call_with_cache(ids[:, position : position + 1], caches, position, last_only=True)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(step)[:, 0], before[:, position], atol=1e-5)


def test_prompts_with_padding_or_too_long_are_refused():
    generator = CachedLanguageModel(small_language_model(1), 8)
    with pytest.raises(ValueError, match="padding"):
        generator.next_token_function(np.array([[3, 0]]))
    with pytest.raises(ValueError, match="1 <= t0 <= 8"):
        generator.next_token_function(np.ones((1, 9), "int32"))


def test_excluded_ids_are_never_generated_and_rows_still_sum_to_one():
    model = small_language_model(1)
    prompt = np.array([[3, 7, 5], [4, 4, 9]])
    next_token = CachedLanguageModel(model, 16).next_token_function(prompt, excluded_ids=(1, 2))
    probabilities = next_token(prompt)
    assert (probabilities[:, :3] == 0).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    sampled = sample_decode(
        CachedLanguageModel(model, 16).next_token_function(prompt, excluded_ids=(1,)),
        prompt,
        None,
        12,
        temperature=1.5,
        seed=0,
    )
    assert not np.isin(sampled[:, 3:], [0, 1]).any()
    with pytest.raises(ValueError, match="excluded_ids"):
        CachedLanguageModel(model, 16).next_token_function(prompt, excluded_ids=(30,))(prompt)


def test_running_text_chunks_join_texts_with_a_separator_and_shift_targets_by_one():
    from transformer_course.training import running_text_chunks

    inputs, targets = running_text_chunks([[5, 6, 7, 0, 0], [8, 9, 0, 0, 0]], chunk_length=3, separator_id=2)
    # stream: 5 6 7 2 8 9 2 -> inputs of 3, targets one place later
    np.testing.assert_array_equal(inputs, [[5, 6, 7], [2, 8, 9]])
    np.testing.assert_array_equal(targets, [[6, 7, 2], [8, 9, 2]])
    inputs, targets = running_text_chunks([np.array([3, 4, 5, 6])], chunk_length=3, separator_id=1)
    np.testing.assert_array_equal(inputs, [[3, 4, 5], [6, 1, 0]])  # the last row alone is padded
    np.testing.assert_array_equal(targets, [[4, 5, 6], [1, 0, 0]])
    assert inputs.dtype == np.int32
    with pytest.raises(ValueError, match="at least 2 tokens in all"):
        running_text_chunks([[0, 0]], chunk_length=3, separator_id=1)[0]  # only one separator


def test_token_log_probabilities_pick_the_target_and_skip_padding():
    from transformer_course.metrics import perplexity, token_log_probabilities

    keras.utils.set_random_seed(0)
    model = build_language_model(30, 8, embed_dim=16, intermediate_dim=32, num_heads=2, num_layers=1)
    inputs = np.random.default_rng(0).integers(1, 30, size=(5, 8)).astype("int32")
    targets = np.roll(inputs, -1, axis=1)
    targets[:, -1] = 0
    scores = token_log_probabilities(model, inputs, targets, batch_size=2)
    full = keras.ops.convert_to_numpy(model(inputs))
    expected = np.log(np.take_along_axis(full, targets[..., None], -1)[..., 0])
    np.testing.assert_allclose(scores[:, :-1], expected[:, :-1], atol=1e-5)
    assert (scores[:, -1] == 0).all()
    assert perplexity(scores, targets) == pytest.approx(np.exp(-expected[:, :-1].mean()), rel=1e-5)
    assert perplexity(np.full((1, 3), -np.log(30.0)), [[1, 2, 3]]) == pytest.approx(30.0)  # uniform over 30 words
    with pytest.raises(ValueError, match="no real token"):
        perplexity(np.zeros((1, 2)), [[0, 0]])


def test_bits_per_character_is_the_summed_code_length_over_the_characters():
    from transformer_course.metrics import bits_per_character

    scores = np.log(np.array([[0.5, 0.25, 1.0], [0.125, 1.0, 1.0]]))  # padding targets hold 0 (log 1)
    targets = np.array([[4, 5, 6], [7, 0, 0]])
    assert bits_per_character(scores, targets, characters=3) == pytest.approx((1 + 2 + 0 + 3) / 3)
    with pytest.raises(ValueError, match="characters"):
        bits_per_character(scores, targets, characters=0)
    with pytest.raises(ValueError, match="no real token"):
        bits_per_character(scores, np.zeros_like(targets), characters=3)


def test_compressors_find_repetition_and_cannot_compress_random_bytes_much():
    from transformer_course.metrics import compressor_bits_per_character

    repeated = compressor_bits_per_character("the film was good. " * 500)
    rng = np.random.default_rng(0)
    random_text = "".join(chr(c) for c in rng.integers(33, 127, size=20_000))  # 94 printable ASCII characters
    scattered = compressor_bits_per_character(random_text)
    assert set(repeated) == {"zlib -9", "bz2 -9", "xz -9e"}
    assert all(value < 0.3 for value in repeated.values())
    assert all(np.log2(94) - 0.1 < value < 8.0 for value in scattered.values())  # no coder beats the entropy
    with pytest.raises(ValueError, match="empty"):
        compressor_bits_per_character("")


def test_row_batches_go_on_where_the_last_epoch_ended_and_cover_every_row_each_pass():
    from transformer_course.training import RowBatches

    inputs = np.arange(10)[:, None] * np.ones((1, 3), "int32")
    batches = RowBatches(inputs, inputs + 1, batch_size=4, batches_per_epoch=2, seed=3)
    seen = []
    for _ in range(5):  # 5 epochs of 2 batches of 4: 40 rows, four passes over the 10
        for index in range(len(batches)):
            x, y = batches[index]
            assert x.shape == (4, 3) and np.array_equal(y, x + 1)
            seen.extend(x[:, 0])
        batches.on_epoch_end()
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:20]) == list(range(10))
    whole = RowBatches(inputs, inputs, batch_size=4)
    assert len(whole) == 3 and sorted(np.concatenate([whole[i][0][:, 0] for i in range(3)])) == list(range(10))
    with pytest.raises(ValueError, match="inputs"):
        RowBatches(inputs, inputs[:5], batch_size=4)
    # A classifier's rows: one float label a row, kept with its row and as a float.
    labels = RowBatches(inputs, inputs[:, 0] / 10, batch_size=4, seed=3)
    x, y = labels[0]
    assert y.dtype == np.float32 and y.shape == (4,) and np.allclose(y, x[:, 0] / 10)
    with pytest.raises(ValueError, match=r"\(rows,\)"):
        RowBatches(inputs, inputs[:5, 0], batch_size=4)


def test_the_model_names_its_parts_and_a_gpt2_layout_reloads_as_itself(tmp_path):
    from transformer_course.transformer import gelu_approximate

    keras.utils.set_random_seed(0)
    model = build_language_model(
        30,
        16,
        embed_dim=16,
        intermediate_dim=32,
        num_heads=2,
        num_layers=2,
        normalize_first=True,
        final_norm=True,
        activation=gelu_approximate,
    )
    assert [block.name for block in model.decoder_blocks] == ["decoder_1", "decoder_2"]
    assert model.final_norm.name == "final_norm" and model.token_embedding.name == "token_embedding"
    assert build_language_model(30, 16, embed_dim=16, intermediate_dim=32, num_heads=2).final_norm is None
    ids = np.array([[3, 4, 5, 6]], "int32")
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(reloaded) is type(model) and reloaded.activation is gelu_approximate
    assert len(reloaded.weights) == len(model.weights)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(ids)), keras.ops.convert_to_numpy(model(ids)), atol=1e-6
    )
    with pytest.raises(TypeError):
        build_language_model(30, 16, 16)


def test_beam_search_through_the_cache_keeps_what_beam_search_keeps_recomputing():
    from transformer_course.decoding import batch_beam_search, beam_search

    model = small_language_model(2, seed=3)
    prompts, beams = np.array([[3, 7, 5], [4, 4, 9]]), 3
    rows = np.repeat(prompts, beams, axis=0)  # row b * K + k: beam k of prompt b
    next_tokens = CachedLanguageModel(model, 16).next_token_function(rows)
    cached, _ = batch_beam_search(
        lambda decoded: next_tokens(np.concatenate([rows[:, :-1], decoded], axis=1)),
        prompts[:, -1],
        2,
        10,
        beams,
        0.6,
        reorder=next_tokens.reorder,
    )
    assert cached.shape[0] == len(prompts)
    recomputed = recomputing(model)

    def after(prompt):
        """Next-token probabilities of every row continuing ``prompt``, the model rerun on the whole text."""
        return lambda decoded: recomputed(
            np.concatenate([np.repeat(prompt[None, :-1], len(decoded), axis=0), decoded], axis=1)
        )

    for row, prompt in zip(cached, prompts):
        expected, _ = beam_search(after(prompt), prompt[-1], 2, 10, beams, 0.6)
        np.testing.assert_array_equal(row[: len(expected)], expected)
        assert not row[len(expected) :].any()


@pytest.mark.parametrize(
    "name",
    [
        "token_log_probabilities",
        "perplexity",
        "bits_per_character",
        "compressor_bits_per_character",
        "RowBatches",
        "running_text_chunks",
    ],
)
def test_a_name_that_moved_out_of_the_language_model_still_imports_with_a_warning(name):
    import importlib

    from transformer_course import language_model

    new_home = importlib.import_module(f"transformer_course.{language_model.MOVED[name]}")
    with pytest.warns(DeprecationWarning, match=rf"language_model\.{name} moved to transformer_course\."):
        old = getattr(language_model, name)
    assert old is getattr(new_home, name) and name in new_home.__all__
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        language_model.no_such_name  # noqa: B018


def test_compute_parameters_are_the_blocks_matrices_and_the_tied_output_product():
    from transformer_course.language_model import compute_parameters, training_flops_per_token

    # Worked by hand: V=10, E=4, F=8, one block: 4·16 (attention) + 2·4·8 (feed-forward) + 10·4 (output) = 168.
    assert compute_parameters(10, 4, 8, 1) == 168
    assert training_flops_per_token(10, 5, 4, 8, 1) == 3 * (2 * 168 + 4 * 1 * 5 * 4) == 1248
    # The same count read off a built model: every kernel of its blocks, and the token-embedding table.
    model = build_language_model(10, 5, embed_dim=4, intermediate_dim=8, num_heads=2, num_layers=2)
    kernels = sum(int(np.prod(w.shape)) for w in model.weights if w.path.endswith("kernel") and "decoder" in w.path)
    assert kernels + 10 * 4 == compute_parameters(10, 4, 8, 2)
    with pytest.raises(ValueError, match="`embed_dim`"):
        compute_parameters(10, 0, 8, 1)
