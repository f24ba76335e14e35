"""Masked language modelling data: BERT's rates, what is never selected, and keras-hub's statistics."""

import numpy as np
import pytest

from transformer_course.pretraining import mask_tokens

VOCABULARY, MASK, CLS, SEP = 1000, 3, 1, 2


def batch(seed=0, rows=500, length=220):
    generator = np.random.default_rng(seed)
    ids = generator.integers(10, VOCABULARY, size=(rows, length))
    ids[:, 0], ids[:, 100] = CLS, SEP
    ids[::3, 180:] = 0  # padding at the end of a third of the rows
    return ids


def rates(original, masked, selected):
    return {"selected": selected.sum() / np.isin(original, (0, CLS, SEP), invert=True).sum(),
            "mask": np.mean(masked[selected] == MASK), "unchanged": np.mean(masked[selected] == original[selected])}


def test_bert_rates_over_a_hundred_thousand_tokens():
    ids = batch()
    masked, labels, selected = mask_tokens(ids, np.random.default_rng(1), VOCABULARY, MASK,
                                           unselectable_token_ids=(0, CLS, SEP))
    measured = rates(ids, masked, selected)
    assert np.isin(ids, (0, CLS, SEP), invert=True).sum() > 100_000
    assert measured["selected"] == pytest.approx(0.15, abs=0.01)
    assert measured["mask"] == pytest.approx(0.80, abs=0.01)
    assert measured["unchanged"] == pytest.approx(0.10, abs=0.01)
    assert 1 - measured["mask"] - measured["unchanged"] == pytest.approx(0.10, abs=0.01)


def test_padding_and_special_tokens_are_never_selected_and_labels_sit_at_selected_positions_only():
    ids = batch(seed=2)
    masked, labels, selected = mask_tokens(ids, np.random.default_rng(3), VOCABULARY, MASK,
                                           unselectable_token_ids=(0, CLS, SEP))
    assert not selected[np.isin(ids, (0, CLS, SEP))].any()
    np.testing.assert_array_equal(masked[~selected], ids[~selected])
    np.testing.assert_array_equal(labels[selected], ids[selected])
    assert (labels[~selected] == 0).all()
    random_words = masked[selected & (masked != MASK) & (masked != ids)]
    assert not np.isin(random_words, (0, CLS, SEP, MASK)).any()
    assert masked.dtype == labels.dtype == np.int32


def test_masking_is_dynamic_and_reproducible():
    ids = batch(rows=20)
    first = mask_tokens(ids, np.random.default_rng(5), VOCABULARY, MASK)[2]
    second_epoch = mask_tokens(ids, np.random.default_rng(6), VOCABULARY, MASK)[2]
    again = mask_tokens(ids, np.random.default_rng(5), VOCABULARY, MASK)[2]
    assert not np.array_equal(first, second_epoch)
    np.testing.assert_array_equal(first, again)


def test_same_statistics_as_keras_hub_masked_lm_mask_generator():
    keras_hub = pytest.importorskip("keras_hub")
    ids = batch(seed=4)
    generator = keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=VOCABULARY, mask_selection_rate=0.15, mask_token_id=MASK, unselectable_token_ids=[0, CLS, SEP],
        mask_token_rate=0.8, random_token_rate=0.1)
    keras.utils.set_random_seed(0)  # keras-hub draws from Keras' global generator: fixed, so the test cannot flake
    output = generator(ids.astype("int32"))
    theirs, positions = np.asarray(output["token_ids"]), output["mask_positions"]
    their_selected = np.zeros(ids.shape, bool)
    for row, row_positions in enumerate(positions.to_list() if hasattr(positions, "to_list") else positions):
        their_selected[row, np.asarray(row_positions, dtype="int64")] = True
    ours = mask_tokens(ids, np.random.default_rng(7), VOCABULARY, MASK, unselectable_token_ids=(0, CLS, SEP))
    ours_rates, their_rates = rates(ids, ours[0], ours[2]), rates(ids, theirs, their_selected)
    assert not their_selected[np.isin(ids, (0, CLS, SEP))].any()
    for name in ("selected", "mask", "unchanged"):
        assert ours_rates[name] == pytest.approx(their_rates[name], abs=0.01), name


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match=r"`mask_token_rate` \+ `random_token_rate` must be at most 1"):
        mask_tokens([[5, 6]], np.random.default_rng(0), 10, 3, mask_token_rate=0.9, random_token_rate=0.2)
    with pytest.raises(ValueError, match=r"`mask_selection_rate` must be a number in \[0, 1\]; received 1.5"):
        mask_tokens([[5, 6]], np.random.default_rng(0), 10, 3, mask_selection_rate=1.5)
    with pytest.raises(ValueError, match="must lie in 0..9; received ids from 5 to 12"):
        mask_tokens([[5, 12]], np.random.default_rng(0), 10, 3)


# --- next-sentence prediction ---------------------------------------------------------------

from transformer_course.pretraining import IS_NEXT, group_sentences, next_sentence_pairs, pack_pair, split_sentences  # noqa: E402


def test_split_sentences_by_the_documented_rule():
    text = 'Great film! I loved it.<br /><br />The end was "odd." Was it? yes 3.5 stars'
    assert split_sentences(text) == ["Great film!", "I loved it.", 'The end was "odd."', "Was it?", "yes 3.5 stars"]
    assert split_sentences("   ") == []
    with pytest.raises(TypeError, match="`text` must be a str; received int"):
        split_sentences(3)


def test_group_sentences_fills_spans_in_order_without_losing_a_sentence():
    sentences = ["a b c", "d e", "f g h i", "j", "k l m n o p q r", "s t"]
    spans = group_sentences(sentences, max_words=5)
    assert spans == ["a b c d e", "f g h i j", "k l m n o p q r", "s t"]  # the 8-word sentence stands alone
    assert " ".join(spans).split() == " ".join(sentences).split()
    assert group_sentences([], 5) == []
    assert group_sentences(sentences, 1) == sentences
    with pytest.raises(ValueError, match="`max_words` must be a positive integer; received 0"):
        group_sentences(sentences, 0)


def test_next_sentence_pairs_are_half_is_next_and_not_next_comes_from_another_document():
    documents = [[f"d{document} s{sentence}" for sentence in range(6)] for document in range(300)]
    pairs = next_sentence_pairs(documents, np.random.default_rng(0))
    assert len(pairs) == 300 * 5
    labels = np.array([label for _, _, label in pairs])
    assert labels.mean() == pytest.approx(0.5, abs=0.03)
    for first, second, label in pairs:
        same_document = first.split()[0] == second.split()[0]
        following = same_document and int(second.split()[1][1:]) == int(first.split()[1][1:]) + 1
        assert following if label == IS_NEXT else not same_document
    with pytest.raises(ValueError, match="at least 2 documents with sentences; received 1"):
        next_sentence_pairs([["only"], []], np.random.default_rng(0))


def test_pack_pair_layout_segments_and_truncation():
    tokens, segments = pack_pair([11, 12, 13], [21, 22], cls_id=1, sep_id=2, sequence_length=10)
    np.testing.assert_array_equal(tokens, [1, 11, 12, 13, 2, 21, 22, 2, 0, 0])
    np.testing.assert_array_equal(segments, [0, 0, 0, 0, 0, 1, 1, 1, 0, 0])
    tokens, segments = pack_pair(list(range(10, 20)), [21, 22, 23], cls_id=1, sep_id=2, sequence_length=9)
    np.testing.assert_array_equal(tokens, [1, 10, 11, 12, 2, 21, 22, 23, 2])  # the longer sentence lost its tail
    assert tokens.dtype == segments.dtype == np.int32
    with pytest.raises(ValueError, match="`sequence_length` must be an integer >= 5; received 4"):
        pack_pair([1], [2], 1, 2, 4)


def test_gather_selected_keeps_positions_and_labels_in_order_and_pads_with_zeros():
    from transformer_course.pretraining import gather_selected

    selected = np.array([[False, True, False, True, True], [False, False, False, False, False]])
    labels = np.array([[0, 7, 0, 8, 9], [0, 0, 0, 0, 0]])
    positions, position_labels = gather_selected(selected, labels, max_predictions=4)
    np.testing.assert_array_equal(positions, [[1, 3, 4, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(position_labels, [[7, 8, 9, 0], [0, 0, 0, 0]])
    positions, position_labels = gather_selected(selected, labels, max_predictions=2)
    np.testing.assert_array_equal(positions, [[1, 3], [0, 0]])


# --- the BERT-style model -------------------------------------------------------------------

import keras  # noqa: E402

from transformer_course.pretraining import build_bert_classifier, build_bert_pretrainer  # noqa: E402


def small_bert(**overrides):
    arguments = dict(vocabulary_size=40, sequence_length=12, max_predictions=3, embed_dim=16, num_heads=2,
                     intermediate_dim=32, num_layers=2, dropout=0.1)
    return build_bert_pretrainer(**{**arguments, **overrides})


def bert_inputs(rows=4, length=10, seed=0):
    generator = np.random.default_rng(seed)
    token_ids = generator.integers(5, 40, size=(rows, length)).astype("int32")
    token_ids[:, 0] = CLS
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 5:] = 1
    positions = np.tile(np.array([[1, 3, 6]], dtype="int32"), (rows, 1))
    return {"token_ids": token_ids, "segment_ids": segment_ids, "mask_positions": positions}


def test_pretrainer_outputs_and_a_training_step():
    model = small_bert()
    outputs = model(bert_inputs())
    assert tuple(outputs["mlm"].shape) == (4, 3, 40) and tuple(outputs["nsp"].shape) == (4, 2)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs["mlm"]).sum(-1), 1.0, atol=1e-5)
    from transformer_course.metrics import MaskedCrossEntropy

    model.compile(optimizer="adam", loss={"mlm": MaskedCrossEntropy(), "nsp": "sparse_categorical_crossentropy"})
    labels = {"mlm": np.array([[7, 8, 0]] * 4, dtype="int32"), "nsp": np.array([0, 1, 1, 0])}
    history = model.fit(bert_inputs(), labels, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_the_masked_lm_output_layer_is_the_token_embedding():
    model = small_bert()
    table = model.get_layer("token_embedding").token_embedding.embeddings
    assert not any(weight.shape == (16, 40) for weight in model.trainable_weights)  # no separate output matrix
    assert any(weight is table for weight in model.trainable_weights)


def test_padding_changes_nothing_on_real_tokens():
    model = small_bert(dropout=0.0)
    inputs = bert_inputs(rows=2, length=8)
    padded = {key: value.copy() for key, value in inputs.items()}
    padded["token_ids"] = np.pad(inputs["token_ids"], ((0, 0), (0, 4)))
    padded["segment_ids"] = np.pad(inputs["segment_ids"], ((0, 0), (0, 4)))
    short, long = model(inputs), model(padded)
    for key in ("mlm", "nsp"):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(short[key]), keras.ops.convert_to_numpy(long[key]),
                                   atol=1e-5)


def test_round_trip_through_a_keras_file_and_the_classifier_shares_the_encoder(tmp_path):
    model = small_bert()
    inputs = bert_inputs()
    model.save(tmp_path / "bert.keras")
    reloaded = keras.models.load_model(tmp_path / "bert.keras")
    for key in ("mlm", "nsp"):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(model(inputs)[key]),
                                   keras.ops.convert_to_numpy(reloaded(inputs)[key]), atol=1e-6)
    classifier = build_bert_classifier(reloaded, num_classes=2)
    shared = {id(weight) for weight in reloaded.get_layer("encoder_2").weights}
    assert shared <= {id(weight) for weight in classifier.weights}
    probabilities = classifier({"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]})
    assert tuple(probabilities.shape) == (4, 2)
    assert len([layer for layer in classifier.layers if layer.name.startswith("encoder_")]) == 2


def test_pretraining_batches_mask_afresh_every_epoch_and_train_the_pretrainer():
    from transformer_course.metrics import MaskedCrossEntropy
    from transformer_course.pretraining import PretrainingBatches

    inputs = bert_inputs(rows=10, length=12, seed=5)
    inputs["token_ids"][:, 5] = SEP
    batches = PretrainingBatches(inputs["token_ids"], inputs["segment_ids"], np.arange(10) % 2, batch_size=4,
                                 vocabulary_size=40, mask_token_id=MASK, special_token_ids=(CLS, SEP),
                                 max_predictions=3)
    assert len(batches) == 3
    features, labels = batches[0]
    assert features["mask_positions"].shape == labels["mlm"].shape == (4, 3)
    first = batches[0][0]["token_ids"].copy()
    batches.on_epoch_end()
    assert not np.array_equal(first, batches[0][0]["token_ids"])
    model = small_bert()
    model.compile(optimizer="adam", loss={"mlm": MaskedCrossEntropy(), "nsp": "sparse_categorical_crossentropy"})
    assert np.isfinite(model.fit(batches, epochs=1, verbose=0).history["loss"][0])


def test_token_tagger_and_span_finder_heads_shapes_padding_and_round_trip(tmp_path):
    from transformer_course.pretraining import build_span_finder, build_token_tagger

    pretrainer = small_bert(dropout=0.0)
    inputs = {key: value for key, value in bert_inputs(rows=3, length=8).items() if key != "mask_positions"}
    inputs["token_ids"][0, 6:] = 0  # a padded row
    tags = build_token_tagger(pretrainer, num_tags=3)(inputs)
    assert tuple(tags.shape) == (3, 8, 3)
    finder = build_span_finder(pretrainer)
    spans = finder(inputs)
    for key in ("start", "end"):
        values = keras.ops.convert_to_numpy(spans[key])
        assert values.shape == (3, 8)
        np.testing.assert_allclose(values.sum(-1), 1.0, atol=1e-5)
        assert (values[0, 6:] == 0).all()
    finder.save(tmp_path / "finder.keras")
    reloaded = keras.models.load_model(tmp_path / "finder.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(inputs)["start"]),
                               keras.ops.convert_to_numpy(spans["start"]), atol=1e-6)


# --- masked-LM-only pre-training on contiguous segments ---------------------------------------

from transformer_course.pretraining import (  # noqa: E402
    PretrainingBatches,
    build_bert_encoder,
    contiguous_segments,
    gelu_approximate,
)


def test_contiguous_segments_read_the_documents_as_one_stream_without_padding():
    documents = [[10, 11, 12], [20, 21], [], [30, 31, 32, 33]]
    rows = contiguous_segments(documents, sequence_length=6, cls_id=CLS, sep_id=SEP)
    stream = [10, 11, 12, SEP, 20, 21, SEP, SEP, 30, 31, 32, 33, SEP]  # 13 tokens: three windows of 4, one left over
    assert rows.dtype == np.int32 and rows.shape == (3, 6)
    np.testing.assert_array_equal(rows[:, 1:-1].ravel(), stream[:12])
    assert (rows[:, 0] == CLS).all() and (rows[:, -1] == SEP).all() and (rows != 0).all()
    assert contiguous_segments([], 6, CLS, SEP).shape == (0, 6)
    with pytest.raises(ValueError, match="sequence_length"):
        contiguous_segments(documents, 2, CLS, SEP)


def test_masked_lm_only_pretrainer_trains_and_its_classifier_gets_a_fresh_pooler(tmp_path):
    from transformer_course.metrics import MaskedCrossEntropy

    model = small_bert(next_sentence=False)
    assert set(model.output) == {"mlm"} and not any(layer.name == "pooler" for layer in model.layers)
    token_ids = contiguous_segments([np.arange(5, 40)] * 3, 12, CLS, SEP)
    batches = PretrainingBatches(token_ids, None, None, batch_size=4, vocabulary_size=40, mask_token_id=MASK,
                                 special_token_ids=(CLS, SEP), max_predictions=3)
    features, labels = batches[0]
    assert set(labels) == {"mlm"} and (features["segment_ids"] == 0).all()
    model.compile(optimizer="adam", loss={"mlm": MaskedCrossEntropy()})
    assert np.isfinite(model.fit(batches, epochs=1, verbose=0).history["loss"][0])
    model.save(tmp_path / "mlm.keras")
    classifier = build_bert_classifier(keras.models.load_model(tmp_path / "mlm.keras"), num_classes=2)
    assert classifier.get_layer("pooler").count_params() == 16 * 16 + 16
    assert tuple(classifier({"token_ids": token_ids[:2], "segment_ids": np.zeros_like(token_ids[:2])}).shape) == (2, 2)


def test_a_mean_pooled_classifier_reads_the_mean_of_the_real_positions_and_ignores_padding(tmp_path):
    model = small_bert(next_sentence=False, dropout=0.0)
    inputs = bert_inputs(rows=2, length=8)
    features = {"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]}
    classifier = build_bert_classifier(model, num_classes=2, dropout=0.0, pooling="mean")
    assert not any(layer.name == "pooler" for layer in classifier.layers)
    padded = {key: np.pad(value, ((0, 0), (0, 4))) for key, value in features.items()}
    np.testing.assert_allclose(keras.ops.convert_to_numpy(classifier(features)),
                               keras.ops.convert_to_numpy(classifier(padded)), atol=1e-5)
    # the same as the softmax layer on the hand-computed mean of the encoder's outputs at the real positions
    from transformer_course.pretraining import build_bert_encoder

    encoded = keras.ops.convert_to_numpy(build_bert_encoder(model)(padded))
    real = (padded["token_ids"] != 0)[..., None]
    mean = (encoded * real).sum(axis=1) / real.sum(axis=1)
    expected = keras.ops.convert_to_numpy(classifier.get_layer("classifier_output")(mean))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(classifier(padded)), expected, atol=1e-5)
    classifier.save(tmp_path / "mean.keras")
    reloaded = keras.models.load_model(tmp_path / "mean.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(padded)),
                               keras.ops.convert_to_numpy(classifier(padded)), atol=1e-6)
    with pytest.raises(ValueError, match="`pooling` must be one of .*received 'max'"):
        build_bert_classifier(model, num_classes=2, pooling="max")


def test_batches_per_epoch_cuts_pretraining_into_rounds_that_go_on_where_they_ended():
    token_ids = np.tile(np.arange(10, 22, dtype="int32")[:, None], (1, 6))  # row r holds 10 + r everywhere
    batches = PretrainingBatches(token_ids, None, None, batch_size=4, vocabulary_size=40, mask_token_id=MASK,
                                 special_token_ids=(CLS, SEP), max_predictions=2, batches_per_epoch=2)
    assert len(batches) == 2
    seen = []
    for _ in range(3):  # 3 rounds of 2 batches of 4 = 24 rows = two whole passes over the 12 rows
        for index in range(len(batches)):
            features, _ = batches[index]
            seen.extend(np.bincount(row).argmax() for row in features["token_ids"])  # most of a row stays unmasked
        batches.on_epoch_end()
    assert sorted(seen[:12]) == list(range(10, 22)) and sorted(seen[12:]) == list(range(10, 22))
    with pytest.raises(ValueError, match="batches_per_epoch"):
        PretrainingBatches(token_ids, None, None, 4, 40, MASK, (CLS, SEP), 2, batches_per_epoch=0)


def test_encoder_outputs_do_not_depend_on_padding_and_approximate_gelu_round_trips(tmp_path):
    model = small_bert(dropout=0.0, activation=gelu_approximate)
    encoder = build_bert_encoder(model)
    inputs = bert_inputs(rows=2, length=8)
    short = keras.ops.convert_to_numpy(encoder({"token_ids": inputs["token_ids"],
                                                "segment_ids": inputs["segment_ids"]}))
    long = keras.ops.convert_to_numpy(encoder({"token_ids": np.pad(inputs["token_ids"], ((0, 0), (0, 4))),
                                               "segment_ids": np.pad(inputs["segment_ids"], ((0, 0), (0, 4)))}))
    np.testing.assert_allclose(long[:, :8], short, atol=1e-5)
    model.save(tmp_path / "approximate.keras")
    reloaded = keras.models.load_model(tmp_path / "approximate.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(inputs)["mlm"]),
                               keras.ops.convert_to_numpy(model(inputs)["mlm"]), atol=1e-6)
    np.testing.assert_allclose(float(gelu_approximate(keras.ops.convert_to_tensor(1.0))), 0.8411920, atol=1e-6)
