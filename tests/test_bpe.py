"""Byte-level BPE from scratch: lossless on any text, special tokens whole, equal to Hugging Face's."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.bpe import BytePairEncoding, bytes_to_unicode, pre_tokenize

CORPUS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "the mat and the log"] * 3 + [
    "catalogue of cats, café au lait — naïve 🐈‍⬛ cats!"
]
# Sennrich et al. (2016, §3.1): low ×5, lower ×2, newest ×6, widest ×3; each word a text of its own.
SENNRICH = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3
FIXTURE = "The cat  sat\t on  the mat — café 🐈‍⬛ naïve\n\n  end  \u00a0ünïcödé 日本語 123,456!!"


@pytest.fixture(scope="module")
def trained():
    return BytePairEncoding.train(CORPUS, num_merges=40, special_tokens=["<|endoftext|>"])


def test_sennrich_corpus_merges_in_count_order_with_ties_to_the_older_tokens():
    bpe = BytePairEncoding.train(SENNRICH, num_merges=6)
    # e+s and s+t both occur 9 times: the tie goes to the older first token, "e" (a byte) ...
    assert [a + b" " + b for a, b in bpe.merges] == [b"e s", b"es t", b"l o", b"lo w", b"e w", b"n ew"]
    # ... and n+ew beats ew+est (both 6): "n" is a byte, older than the merged "ew".
    assert [bpe.token(i) for i in bpe.encode("lowest newest")] == ["low", "est", " ", "new", "est"]


def test_trained_merges_equal_hugging_face_trainer_where_ties_agree():
    tokenizers = pytest.importorskip("tokenizers")
    ours = BytePairEncoding.train(SENNRICH, num_merges=12)
    reference = tokenizers.Tokenizer(tokenizers.models.BPE())
    reference.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=256 + 12, show_progress=False, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    reference.train_from_iterator(SENNRICH, trainer)
    merges = [" ".join(m) if isinstance(m, list) else m for m in json.loads(reference.to_str())["model"]["merges"]]
    assert ours.vocabulary_and_merges()[1] == merges


def test_encoding_equals_hugging_face_token_for_token(trained):
    tokenizers = pytest.importorskip("tokenizers")
    vocabulary, merges = trained.vocabulary_and_merges()
    pairs = [tuple(merge.split(" ")) for merge in merges]
    reference = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocabulary, merges=pairs))
    reference.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    for text in (FIXTURE, CORPUS[0], CORPUS[-1], "   ", "a\n\n\nb", "x  y"):
        assert trained.encode(text) == reference.encode(text).ids, text
    assert len(trained.encode("the cat")) < len(b"the cat")  # the merges did shorten it


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_decode_encode_gives_any_text_back(text):
    bpe = _shared()
    assert bpe.decode(bpe.encode(text)) == text
    assert all(0 <= index < bpe.vocabulary_size for index in bpe.encode(text))
    assert "".join(pre_tokenize(text)) == text


@given(st.text(), st.text())
@settings(max_examples=100, deadline=None)
def test_special_tokens_are_never_split(before, after):
    bpe = _shared()
    special = bpe.special_ids["<|endoftext|>"]
    ids = bpe.encode(before + "<|endoftext|>" + after)
    assert ids.count(special) >= 1 and bpe.decode(ids) == before + "<|endoftext|>" + after
    assert special not in bpe.encode(before.replace("<|endoftext|>", ""))


_BPE = []


def _shared():
    if not _BPE:
        _BPE.append(BytePairEncoding.train(CORPUS, num_merges=40, special_tokens=["<|endoftext|>"]))
    return _BPE[0]


def test_training_never_merges_across_a_special_token_or_a_pre_token_boundary():
    bpe = BytePairEncoding.train(
        ["ab<|endoftext|>ab<|endoftext|>ab", "x y x y"], num_merges=10, special_tokens=["<|endoftext|>"]
    )
    tokens = {bpe.vocabulary[index] for index in range(256, len(bpe.vocabulary))}
    assert b"ab" in tokens and not any(b"<|" in token or b"b<" in token for token in tokens)
    assert not any(token.strip() != token.lstrip(b" ") or b" " in token.strip() for token in tokens)


def test_bytes_to_unicode_is_one_to_one_and_printable():
    stand_in = bytes_to_unicode()
    assert len(set(stand_in.values())) == 256
    assert all(character.isprintable() and not character.isspace() for character in stand_in.values())


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="num_merges"):
        BytePairEncoding.train(["a"], num_merges=-1)
    with pytest.raises(ValueError, match="not tokens yet"):
        BytePairEncoding([(b"ab", b"c")])
    with pytest.raises(ValueError, match="special_tokens"):
        BytePairEncoding(special_tokens=["<s>", "<s>"])
    with pytest.raises(TypeError, match="text"):
        BytePairEncoding().encode(b"bytes")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        BytePairEncoding().decode([256])


def test_with_id_offset_moves_every_id_and_keeps_the_encoding():
    learned = BytePairEncoding.train(["the cat sat on the mat"] * 3, 10, special_tokens=["<|endoftext|>"])
    moved = learned.with_id_offset(1)
    text = "the mat sat<|endoftext|>on the cat"
    assert moved.encode(text) == [i + 1 for i in learned.encode(text)]
    assert moved.special_ids == {"<|endoftext|>": learned.special_ids["<|endoftext|>"] + 1}
    assert moved.decode(moved.encode(text)) == text and moved.vocabulary_size == learned.vocabulary_size + 1
