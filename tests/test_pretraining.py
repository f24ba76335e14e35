"""Masked language modelling data: BERT's rates, what is never selected, keras-hub's statistics,
next-sentence pairs, contiguous segments and the batches that mask them afresh."""

import keras
import numpy as np
import pytest

from transformer_course.pretraining import (
    IS_NEXT,
    PretrainingBatches,
    contiguous_segments,
    gather_selected,
    group_sentences,
    mask_tokens,
    next_sentence_pairs,
    pack_pair,
    split_sentences,
)

VOCABULARY, MASK, CLS, SEP = 1000, 3, 1, 2


def batch(seed=0, rows=500, length=220):
    generator = np.random.default_rng(seed)
    ids = generator.integers(10, VOCABULARY, size=(rows, length))
    ids[:, 0], ids[:, 100] = CLS, SEP
    ids[::3, 180:] = 0  # padding at the end of a third of the rows
    return ids


def rates(original, masked, selected):
    return {
        "selected": selected.sum() / np.isin(original, (0, CLS, SEP), invert=True).sum(),
        "mask": np.mean(masked[selected] == MASK),
        "unchanged": np.mean(masked[selected] == original[selected]),
    }


def test_bert_rates_over_a_hundred_thousand_tokens():
    ids = batch()
    masked, labels, selected = mask_tokens(
        ids, np.random.default_rng(1), VOCABULARY, MASK, unselectable_token_ids=(0, CLS, SEP)
    )
    measured = rates(ids, masked, selected)
    assert np.isin(ids, (0, CLS, SEP), invert=True).sum() > 100_000
    assert measured["selected"] == pytest.approx(0.15, abs=0.01)
    assert measured["mask"] == pytest.approx(0.80, abs=0.01)
    assert measured["unchanged"] == pytest.approx(0.10, abs=0.01)
    assert 1 - measured["mask"] - measured["unchanged"] == pytest.approx(0.10, abs=0.01)


def test_padding_and_special_tokens_are_never_selected_and_labels_sit_at_selected_positions_only():
    ids = batch(seed=2)
    masked, labels, selected = mask_tokens(
        ids, np.random.default_rng(3), VOCABULARY, MASK, unselectable_token_ids=(0, CLS, SEP)
    )
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
        vocabulary_size=VOCABULARY,
        mask_selection_rate=0.15,
        mask_token_id=MASK,
        unselectable_token_ids=[0, CLS, SEP],
        mask_token_rate=0.8,
        random_token_rate=0.1,
    )
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
    selected = np.array([[False, True, False, True, True], [False, False, False, False, False]])
    labels = np.array([[0, 7, 0, 8, 9], [0, 0, 0, 0, 0]])
    positions, position_labels = gather_selected(selected, labels, max_predictions=4)
    np.testing.assert_array_equal(positions, [[1, 3, 4, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(position_labels, [[7, 8, 9, 0], [0, 0, 0, 0]])
    positions, position_labels = gather_selected(selected, labels, max_predictions=2)
    np.testing.assert_array_equal(positions, [[1, 3], [0, 0]])


# --- masked-LM-only pre-training on contiguous segments ---------------------------------------


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


def test_batches_per_epoch_cuts_pretraining_into_rounds_that_go_on_where_they_ended():
    token_ids = np.tile(np.arange(10, 22, dtype="int32")[:, None], (1, 6))  # row r holds 10 + r everywhere
    batches = PretrainingBatches(
        token_ids,
        None,
        None,
        batch_size=4,
        vocabulary_size=40,
        mask_token_id=MASK,
        special_token_ids=(CLS, SEP),
        max_predictions=2,
        batches_per_epoch=2,
    )
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


def test_pack_single_pads_short_texts_and_keeps_head_and_tail_of_long_ones():
    from transformer_course.pretraining import pack_single

    packed = pack_single([[7, 8], list(range(10, 20)), []], cls_id=CLS, sep_id=SEP, sequence_length=8)
    np.testing.assert_array_equal(
        packed["token_ids"],
        [
            [CLS, 7, 8, SEP, 0, 0, 0, 0],
            [CLS, 10, 15, 16, 17, 18, 19, SEP],  # room for 6: the first 1 (a quarter, rounded down), the last 5
            [CLS, SEP, 0, 0, 0, 0, 0, 0],
        ],
    )
    assert packed["token_ids"].dtype == np.int32 and not packed["segment_ids"].any()
    assert packed["segment_ids"].shape == (3, 8)
    whole_head = pack_single([list(range(10, 20))], CLS, SEP, 8, head_fraction=1.0)["token_ids"][0]
    np.testing.assert_array_equal(whole_head, [CLS, 10, 11, 12, 13, 14, 15, SEP])
    with pytest.raises(ValueError, match="head_fraction"):
        pack_single([[7]], CLS, SEP, 8, head_fraction=1.5)
    with pytest.raises(ValueError, match="sequence_length"):
        pack_single([[7]], CLS, SEP, 2)
