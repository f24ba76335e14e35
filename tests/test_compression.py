"""The arithmetic coder driven by a language model: a hand-worked example, exact round trips, the code's
length against the model's −log₂ p, and the clear errors of data that does not decode."""

import keras
import numpy as np
import pytest

from transformer_course.bpe import BytePairEncoding
from transformer_course.compression import (
    FREQUENCY_BITS,
    ArithmeticDecoder,
    ArithmeticEncoder,
    CompressedDataError,
    code_length_bits,
    compress,
    decompress,
    integer_frequencies,
)
from transformer_course.language_model import build_language_model

TEXTS = ["the film was good and the acting was great.", "a bad film, with a terrible plot!"] * 10


def test_the_hand_worked_three_symbol_example():
    """Frequencies 2, 1, 1 (of 4); the message 0, 2, 1 (worked by hand, 32-bit registers).

    Symbol 0 narrows [0, 2³² − 1] to its lower half [0, 2³¹ − 1]: bit 0 settles and the interval doubles
    back to [0, 2³² − 1]. Symbol 2 takes the top quarter [3·2³⁰, 2³² − 1]: bits 1 and 1 settle. Symbol 1
    takes [2³¹, 3·2³⁰ − 1]: bit 1, then bit 0. Finishing: low < 2³⁰, so the bits 0 and 1 pick a point
    inside. The code 0 11 10 01 is 7 bits: the ideal 1 + 2 + 2 = 5 bits, plus the 2 that end it."""
    encoder = ArithmeticEncoder()
    intervals = []
    for symbol in (0, 2, 1):
        encoder.encode(symbol, [2, 1, 1])
        intervals.append((encoder.low, encoder.high, encoder.bits_written))
    assert intervals == [(0, 2**32 - 1, 1), (0, 2**32 - 1, 3), (0, 2**32 - 1, 5)]
    data = encoder.finish()
    assert encoder.bits_written == 7 and data == bytes([0b01110010])
    decoder = ArithmeticDecoder(data)
    assert [decoder.decode([2, 1, 1]) for _ in range(3)] == [0, 2, 1]


def test_a_pending_bit_is_written_inverted_after_the_next_settled_bit():
    """Frequencies 1, 2, 1: symbol 1 takes the middle half [2³⁰, 3·2³⁰ − 1], which settles no bit but is
    doubled around the middle (one pending bit); symbol 0 then takes the bottom quarter: bit 0, and the
    pending bit as 1."""
    encoder = ArithmeticEncoder()
    encoder.encode(1, [1, 2, 1])
    assert (encoder.pending, encoder.bits_written) == (1, 0)
    encoder.encode(0, [1, 2, 1])
    assert encoder._bits[:3] == [0, 1, 0] and encoder.pending == 0
    decoder = ArithmeticDecoder(encoder.finish())
    assert [decoder.decode([1, 2, 1]) for _ in range(2)] == [1, 0]


@pytest.mark.parametrize("seed", range(6))
def test_random_tables_round_trip_within_two_bits_of_the_ideal_length(seed):
    rng = np.random.default_rng(seed)
    size, count = int(rng.integers(2, 60)), int(rng.integers(1, 400))
    tables = [rng.integers(0, 5000, size) + (np.arange(size) == rng.integers(size)) for _ in range(count)]
    symbols = [int(rng.choice(np.flatnonzero(table), p=table[table > 0] / table.sum())) for table in tables]
    encoder = ArithmeticEncoder()
    for symbol, table in zip(symbols, tables):
        encoder.encode(symbol, table)
    decoder = ArithmeticDecoder(encoder.finish())
    assert [decoder.decode(table) for table in tables] == symbols
    ideal = sum(-np.log2(table[symbol] / table.sum()) for symbol, table in zip(symbols, tables))
    # The integer narrowing loses at most about count * 2**-28 bits a token; the ending costs 2 bits.
    assert ideal - 1e-6 <= encoder.bits_written <= ideal + 2 + count * 1e-6


def test_the_coder_refuses_a_symbol_without_a_share():
    encoder = ArithmeticEncoder()
    with pytest.raises(ValueError, match="`symbol` 1 has no share"):
        encoder.encode(1, [3, 0, 1])
    with pytest.raises(ValueError, match="must total between 1 and 2\\*\\*30"):
        encoder.encode(0, [2**30, 1])


def test_integer_frequencies_total_a_power_of_two_and_never_drop_a_token():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=5000) * 6
    probabilities = (np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()).astype("float32")
    probabilities[0] = 0.3  # padding: excluded whatever its probability
    frequencies = integer_frequencies(probabilities)
    assert frequencies.dtype == np.int64 and frequencies.sum() == 2**FREQUENCY_BITS
    assert frequencies[0] == 0 and frequencies[1:].min() >= 1
    # The documented rule, recomputed: 1 + floor(p * (2**24 - n)), the rest to the most probable id.
    expected = 1 + np.floor(probabilities[1:].astype("float64") * (2**FREQUENCY_BITS - 4999)).astype("int64")
    best = 1 + int(np.argmax(probabilities[1:]))
    assert (np.delete(frequencies, [0, best]) == np.delete(np.concatenate([[0], expected]), [0, best])).all()
    with pytest.raises(ValueError, match="finite, non-negative"):
        integer_frequencies(np.array([0.5, np.nan, 0.5]))


def test_code_length_is_the_sum_of_minus_log2_p():
    probabilities = np.array([0.0, 0.5, 0.25, 0.25])
    assert code_length_bits([1, 1, 2, 3], lambda prefix: probabilities) == pytest.approx(1 + 2 + 2)


@pytest.fixture(scope="module")
def model_and_tokenizer():
    learned = BytePairEncoding.train(TEXTS, 40, special_tokens=["<|endoftext|>"])
    tokenizer = BytePairEncoding.from_vocabulary_and_merges(
        *learned.vocabulary_and_merges(), special_tokens=["<|endoftext|>"], id_offset=1
    )
    keras.utils.set_random_seed(0)
    model = build_language_model(
        tokenizer.vocabulary_size, 16, embed_dim=16, num_heads=2, intermediate_dim=32, num_layers=1
    )
    return model, tokenizer


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "the film was good",
        "très bien — ¿qué? 映画 🎬👍",
        "a text longer than the model's sixteen-token context: " + TEXTS[0] * 3,
    ],
    ids=["empty", "one character", "ascii", "non-ascii and emoji", "longer than the context"],
)
def test_round_trips_exactly_and_codes_within_a_few_bytes_of_the_models_bits(model_and_tokenizer, text):
    model, tokenizer = model_and_tokenizer
    data, statistics = compress(text, model, tokenizer, statistics=True)
    assert decompress(data, model, tokenizer) == text
    assert statistics["tokens"] == len(tokenizer.encode(text))
    assert len(data) == statistics["header_bytes"] + statistics["payload_bytes"]
    if statistics["tokens"] > 16:
        assert statistics["restarts"] >= 1  # the context was restarted with the last half of its window
    # The code: the integer frequencies' ideal length, plus at most 2 ending bits and 7 bits of padding.
    assert statistics["frequency_bits"] <= 8 * statistics["payload_bytes"] <= statistics["frequency_bits"] + 10
    # Under the model's own float probabilities: the frequencies' floor of 1 costs a small share more.
    assert statistics["frequency_bits"] == pytest.approx(statistics["model_bits"], rel=0.01, abs=0.1)


def test_data_that_does_not_decode_is_a_clear_error_never_wrong_text(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    text = TEXTS[0] + TEXTS[1]
    data = compress(text, model, tokenizer)
    with pytest.raises(CompressedDataError, match="truncated: its header promises"):
        decompress(data[:-3], model, tokenizer)
    with pytest.raises(CompressedDataError, match="ends inside its header"):
        decompress(data[:7], model, tokenizer)
    with pytest.raises(CompressedDataError, match="magic bytes"):
        decompress(b"PK" + data[2:], model, tokenizer)
    with pytest.raises(CompressedDataError, match="format version 9"):
        decompress(data[:4] + bytes([9]) + data[5:], model, tokenizer)
    with pytest.raises(CompressedDataError, match="after its code"):
        decompress(data + b"\0", model, tokenizer)
    damaged = bytearray(data)
    damaged[-4] ^= 0xFF
    with pytest.raises(CompressedDataError, match="does not match the checksum"):
        decompress(bytes(damaged), model, tokenizer)
    keras.utils.set_random_seed(1)  # the same architecture, other weights
    other = build_language_model(
        tokenizer.vocabulary_size, 16, embed_dim=16, num_heads=2, intermediate_dim=32, num_layers=1
    )
    with pytest.raises(CompressedDataError, match="does not match the checksum"):
        decompress(data, other, tokenizer)
    wider = build_language_model(
        tokenizer.vocabulary_size, 32, embed_dim=16, num_heads=2, intermediate_dim=32, num_layers=1
    )
    with pytest.raises(CompressedDataError, match="context length 16"):
        decompress(data, wider, tokenizer)


def test_bad_arguments_are_named(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(TypeError, match="`text` must be a str; received bytes"):
        compress(b"film", model, tokenizer)
    with pytest.raises(TypeError, match="`model` must be a LanguageModel"):
        compress("film", keras.Sequential(), tokenizer)
    plain = BytePairEncoding.train(TEXTS, 5)  # ids from 0, no <|endoftext|>: not this model's tokenizer
    with pytest.raises(ValueError, match="`start_id` is needed"):
        compress("film", model, plain)
    with pytest.raises(ValueError, match="`streams` must be"):
        compress("film", model, tokenizer, streams=0)
    with pytest.raises(TypeError, match="`data` must be bytes; received str"):
        decompress("LMAC", model, tokenizer)


@pytest.mark.parametrize("streams", [2, 5, 500])
def test_streams_coded_side_by_side_round_trip(model_and_tokenizer, streams):
    model, tokenizer = model_and_tokenizer
    text = TEXTS[0] + " ¿qué? 🎬 " + TEXTS[1] * 2
    data, statistics = compress(text, model, tokenizer, streams=streams, statistics=True)
    assert statistics["streams"] == min(streams, statistics["tokens"])
    assert decompress(data, model, tokenizer) == text
    payload_bits = 8 * statistics["payload_bytes"]
    assert statistics["frequency_bits"] <= payload_bits <= statistics["frequency_bits"] + 10 * streams


def test_the_line_tokenizer_writes_each_newline_as_the_separator(model_and_tokenizer):
    from transformer_course.compression import LineTokenizer

    model, tokenizer = model_and_tokenizer
    end = tokenizer.special_ids["<|endoftext|>"]
    lines = LineTokenizer(tokenizer, end)
    text = "a good film\n\nthe plot 🎬\n"
    ids = lines.encode(text)
    assert ids.count(end) == 3 and lines.decode(ids) == text
    assert decompress(compress(text, model, lines), model, lines) == text
    with pytest.raises(ValueError, match="line 2 of the text encodes to the separator id"):
        lines.encode("a film\nthe <|endoftext|> token")


def test_a_tokenizer_that_does_not_give_the_text_back_is_refused(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer

    class Lossy:
        special_ids = tokenizer.special_ids

        def encode(self, text):
            return tokenizer.encode(text.lower())

        def decode(self, ids):
            return tokenizer.decode(ids)

    with pytest.raises(ValueError, match="does not give this text back"):
        compress("The Film", model, Lossy())


def test_the_general_purpose_compressors_round_trip_and_shrink_repetitive_text():
    from transformer_course.compression import general_purpose_compressors

    data = ("the film was good and the acting was great. " * 50).encode()
    sizes = general_purpose_compressors(data, repeats=2)
    assert sorted(sizes) == ["bzip2 -9", "gzip -9", "xz -9e", "zstd -19"]
    assert all(0 < entry["bytes"] < len(data) / 5 and entry["compress_seconds"] >= 0 for entry in sizes.values())
    with pytest.raises(ValueError, match="`data` must not be empty"):
        general_purpose_compressors(b"")


@pytest.mark.parametrize("streams", [1, 3])
def test_a_count_table_drives_the_same_coder_to_its_own_code_length(model_and_tokenizer, streams):
    from transformer_course.ngram import BigramModel

    _, tokenizer = model_and_tokenizer
    end = tokenizer.special_ids["<|endoftext|>"]
    training = np.array([[end, *tokenizer.encode(text)] for text in TEXTS[:2]], dtype=object)
    rows = np.zeros((2, max(len(row) for row in training)), "int64")
    for index, row in enumerate(training):
        rows[index, : len(row)] = row
    bigram = BigramModel(tokenizer.vocabulary_size).fit(rows)
    text = "the film was great, with a good plot"
    data, statistics = compress(text, bigram, tokenizer, streams=streams, statistics=True)
    assert decompress(data, bigram, tokenizer) == text and statistics["restarts"] == 0
    # One stream: the model's bits are the table's own -log2 P(token | the token before), from <|endoftext|> on.
    if streams == 1:
        ids = [end, *tokenizer.encode(text)]
        expected = -np.sum(bigram.log_probability(np.array(ids[:-1]), np.array(ids[1:]))) / np.log(2)
        assert statistics["model_bits"] == pytest.approx(expected, rel=1e-4)
    with pytest.raises(CompressedDataError, match="context length"):
        decompress(data, model_and_tokenizer[0], tokenizer)  # coded by the table, not the network


def test_a_count_table_gives_whole_distributions_equal_to_its_pair_probabilities():
    from transformer_course.ngram import BigramModel

    bigram = BigramModel(6).fit(np.array([[1, 2, 3, 1, 2, 4, 0], [2, 2, 5, 1, 3, 0, 0]]))
    rows = bigram.next_token_probabilities(np.array([1, 2, 5, 4]))
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-12)
    for row, previous in zip(rows, [1, 2, 5, 4]):
        expected = np.exp(bigram.log_probability(np.full(5, previous), np.arange(1, 6)))
        np.testing.assert_allclose(row[1:], expected, rtol=1e-12)
        assert row[0] == 0.0
