"""A language model as a compressor: arithmetic coding driven by next-token probabilities.

A model that gives the next token probability p spends, in an ideal code, −log₂ p bits on it
(Shannon, 1948): the model's cross-entropy *is* a code length. **Arithmetic coding** (Witten,
Neal and Cleary, 1987, *Arithmetic coding for data compression*, CACM 30(6)) reaches it to within
a few bits per message: the coder keeps an interval [low, high] of integers, narrows it at every
token to the token's share of it, and writes out the leading bits on which low and high agree.
The decoder, with the same model, repeats the same narrowing and reads which share the code falls
in. Prediction and compression are one problem (MacKay, *Information Theory, Inference, and
Learning Algorithms*, 2003, ch. 6; Delétang et al., 2024, *Language Modeling Is Compression*).

* :func:`compress` / :func:`decompress` — text to bytes and back, with a
  :class:`~transformer_course.language_model.LanguageModel` and its tokenizer; the model runs one
  step per token through its key/value cache on both sides.
* :func:`integer_frequencies` — the one rule that turns float probabilities into the integer
  frequencies the coder narrows by.
* :class:`ArithmeticEncoder` / :class:`ArithmeticDecoder` — the coder itself, for any source of
  integer frequencies (a hand-worked table in the tests; a model here).

**Determinism.** Encoder and decoder must narrow by *identical* integers, or the decoder goes
wrong from the first difference on. The integers come from the model's float32 probabilities by
:func:`integer_frequencies`, whose arithmetic is exact (an elementwise product, a floor, integer
sums). The probabilities themselves are computed the same way on both sides (one cached step a
token, the same shapes, the same compiled function), so on one machine and backend they agree bit
for bit. Across machines (another CPU's vector unit, another backend or library version) a
model's floats may differ in the last bits; then decoding fails — with the checksum's clear error,
never with wrong text.

**Context.** The model reads at most ``model.sequence_length`` tokens. When the cache is full the
coder **restarts** it: a fresh cache primed with the last half of the window (one pass over those
tokens), then one step a token again — the same on both sides, so every token still has at least
half a window of context.

**Streams.** A step's cost on a CPU is mostly fixed, so :func:`compress` can cut the tokens into
B contiguous parts coded side by side, the model running them as one batch (``streams=B``).

The format: a header (magic ``LMAC``, format version, the model's vocabulary size and context
length, the number of streams and each one's token count and code length, and the CRC-32 of the
text's UTF-8 bytes), then each stream's arithmetic code.

Example:
    >>> encoder = ArithmeticEncoder()
    >>> for symbol in (0, 2, 1):  # a fixed three-symbol table: frequencies 2, 1, 1 of 4
    ...     encoder.encode(symbol, [2, 1, 1])
    >>> data = encoder.finish()
    >>> decoder = ArithmeticDecoder(data)
    >>> [decoder.decode([2, 1, 1]) for _ in range(3)]
    [0, 2, 1]
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

__all__ = [
    "narrowed",
    "ArithmeticEncoder",
    "ArithmeticDecoder",
    "CompressedDataError",
    "CompressionStatistics",
    "integer_frequencies",
    "compress",
    "decompress",
    "code_length_bits",
    "FREQUENCY_BITS",
    "PRECISION",
    "FORMAT_VERSION",
    "general_purpose_compressors",
    "LineTokenizer",
]

PRECISION = 32  # bits of the coder's low and high registers
_TOP = (1 << PRECISION) - 1
_HALF = 1 << (PRECISION - 1)
_QUARTER = 1 << (PRECISION - 2)
FREQUENCY_BITS = 24  # the frequencies of every step total 2**24 (at most 2**(PRECISION - 2): no token's share is empty)
FORMAT_VERSION = 1
MAGIC = b"LMAC"


class CompressedDataError(ValueError):
    """Data that :func:`decompress` cannot turn back into the text: damaged, truncated, from another format
    version, or coded with another model or tokenizer (the message says which it can tell)."""


def _cumulative(frequencies) -> np.ndarray:
    """int64 ``(V + 1,)``: 0, then the running sums of the frequencies."""
    frequencies = np.asarray(frequencies, dtype="int64")
    if frequencies.ndim != 1 or frequencies.size == 0 or (frequencies < 0).any():
        raise ValueError(
            f"`frequencies` must be a non-empty 1-D array of non-negative integers; received shape {frequencies.shape}."
        )
    cumulative = np.zeros(frequencies.size + 1, dtype="int64")
    np.cumsum(frequencies, out=cumulative[1:])
    if not 0 < cumulative[-1] <= _QUARTER:
        raise ValueError(f"`frequencies` must total between 1 and 2**{PRECISION - 2}; received {int(cumulative[-1])}.")
    return cumulative


def narrowed(low: int, high: int, cumulative, symbol: int) -> tuple[int, int]:
    """One step of arithmetic coding: the interval ``[low, high]`` narrowed to ``symbol``'s share.

    ``low + ⌊width · c / T⌋`` and ``low + ⌊width · (c + f) / T⌋ − 1``, with ``width = high − low + 1``,
    ``c`` the frequencies before the symbol, ``f`` its own, ``T`` their total; integer arithmetic only
    (Python ints: no overflow), so the encoder and the decoder narrow identically.

    Args:
        low, high: ints, the interval's ends (inclusive), ``0 <= low <= high < 2**32``.
        cumulative: ints ``(V + 1,)``, 0 and then the running sums of the frequencies.
        symbol: int, the symbol coded (its frequency > 0).

    Returns:
        ``(low, high)``: ints, the narrowed interval.

    Example:
        >>> narrowed(0, 2**32 - 1, [0, 2, 3, 4], 2) == (3 * 2**30, 2**32 - 1)  # the top quarter
        True
    """
    total, width = int(cumulative[-1]), high - low + 1
    return low + width * int(cumulative[symbol]) // total, low + width * int(cumulative[symbol + 1]) // total - 1


class ArithmeticEncoder:
    """The arithmetic coder of Witten, Neal and Cleary (1987), with 32-bit integer registers.

    The interval ``[low, high]`` (inclusive) starts as all of ``[0, 2**32 - 1]``. Coding a symbol
    of frequency ``f`` whose lower cumulative frequency is ``c`` (of a total ``T``) narrows it to

        low' = low + ⌊width · c / T⌋,  high' = low + ⌊width · (c + f) / T⌋ − 1,  width = high − low + 1;

    then, while the interval lies in one half, that half's bit is settled: it is written and the
    interval doubled. An interval straddling the middle but inside the middle half ``[¼, ¾)`` is
    doubled around the middle and the bit it will settle is **pending**: written, inverted, after
    the next settled bit. After this, ``width > 2**30``, so every symbol of frequency ≥ 1 keeps a
    non-empty share while ``T ≤ 2**30``.

    ``encode(symbol, frequencies)`` codes one symbol; ``finish()`` writes the two bits that pick a
    point inside the last interval and returns the code as bytes (the last byte padded with zeros).
    """

    def __init__(self):
        self.low, self.high, self.pending, self._bits = 0, _TOP, 0, []

    def _emit(self, bit: int) -> None:
        self._bits.append(bit)
        if self.pending:
            self._bits.extend([1 - bit] * self.pending)
            self.pending = 0

    def encode(self, symbol: int, frequencies) -> None:
        """Narrow the interval to ``symbol``'s share of ``frequencies`` (ints, ``frequencies[symbol] > 0``).

        Raises:
            ValueError: for a ``symbol`` outside ``frequencies`` or of frequency 0, or frequencies that do not
                total between 1 and 2**30.
        """
        self.encode_cumulative(symbol, _cumulative(frequencies))

    def encode_cumulative(self, symbol: int, cumulative: np.ndarray) -> None:
        """:meth:`encode` with the cumulative frequencies already summed: int ``(V + 1,)``, 0 first."""
        if not 0 <= symbol < len(cumulative) - 1 or cumulative[symbol + 1] <= cumulative[symbol]:
            raise ValueError(
                f"`symbol` {symbol} has no share: it must index a frequency > 0 of the {len(cumulative) - 1} given."
            )
        self.low, self.high = narrowed(self.low, self.high, cumulative, symbol)
        while True:
            if self.high < _HALF:
                self._emit(0)
            elif self.low >= _HALF:
                self._emit(1)
                self.low, self.high = self.low - _HALF, self.high - _HALF
            elif self.low >= _QUARTER and self.high < _HALF + _QUARTER:
                self.pending += 1
                self.low, self.high = self.low - _QUARTER, self.high - _QUARTER
            else:
                break
            self.low, self.high = 2 * self.low, 2 * self.high + 1

    def finish(self) -> bytes:
        """The code: two more bits (a point inside ``[low, high]``), packed 8 to a byte, big-endian."""
        self.pending += 1
        self._emit(0 if self.low < _QUARTER else 1)
        return np.packbits(np.array(self._bits, dtype="uint8")).tobytes()

    @property
    def bits_written(self) -> int:
        """The number of bits written so far."""
        return len(self._bits)

    @property
    def bits(self) -> list[int]:
        """The bits written so far, 0s and 1s in order (a copy)."""
        return list(self._bits)


class ArithmeticDecoder:
    """The decoder of :class:`ArithmeticEncoder`'s code: the same narrowing, reading which share the code is in.

    ``value`` holds the next 32 bits of the code (zeros past its end). At each step the symbol is the
    one whose share ``[c, c + f)`` holds ``⌊((value − low + 1) · T − 1) / width⌋``; then the interval
    is narrowed and doubled exactly as the encoder did, shifting in the next bit of the code each
    time.

    Args:
        data: bytes, the code of :meth:`ArithmeticEncoder.finish`.
    """

    def __init__(self, data: bytes):
        self._bits = np.unpackbits(np.frombuffer(bytes(data), dtype="uint8")).tolist()
        self.position, self.low, self.high, self.value = 0, 0, _TOP, 0
        for _ in range(PRECISION):
            self.value = 2 * self.value + self._next_bit()

    def _next_bit(self) -> int:
        bit = self._bits[self.position] if self.position < len(self._bits) else 0
        self.position += 1
        return bit

    def decode(self, frequencies) -> int:
        """The next symbol, under ``frequencies`` (the encoder's for this step)."""
        return self.decode_cumulative(_cumulative(frequencies))

    def decode_cumulative(self, cumulative: np.ndarray) -> int:
        """:meth:`decode` with the cumulative frequencies already summed: int ``(V + 1,)``, 0 first."""
        total, width = int(cumulative[-1]), self.high - self.low + 1
        target = ((self.value - self.low + 1) * total - 1) // width
        symbol = int(np.searchsorted(cumulative, target, side="right")) - 1
        self.low, self.high = narrowed(self.low, self.high, cumulative, symbol)
        while True:
            if self.high < _HALF:
                pass
            elif self.low >= _HALF:
                self.low, self.high, self.value = self.low - _HALF, self.high - _HALF, self.value - _HALF
            elif self.low >= _QUARTER and self.high < _HALF + _QUARTER:
                self.low, self.high, self.value = self.low - _QUARTER, self.high - _QUARTER, self.value - _QUARTER
            else:
                break
            self.low, self.high = 2 * self.low, 2 * self.high + 1
            self.value = 2 * self.value + self._next_bit()
        return symbol

    @property
    def bits_read_past_end(self) -> int:
        """How many of the bits read lay past the code's end (read as zeros)."""
        return max(0, self.position - len(self._bits))


def integer_frequencies(probabilities, excluded_ids=(0,), total_bits: int = FREQUENCY_BITS) -> np.ndarray:
    """The coder's integer frequencies from a model's next-token probabilities, by one exact rule.

    Every id but ``excluded_ids`` gets ``1 + ⌊p · (2**total_bits − n)⌋`` (n: the ids kept), so
    that no token is ever impossible to code; the ids excluded (padding) get 0; what is left of
    ``2**total_bits`` (or, if the floats summed above 1, what is over) goes to the most probable id.
    Each step is exact in IEEE arithmetic (a product and a floor per id, then integer sums), so the
    same float32 probabilities give the same integers on every machine.

    A token of probability p costs about −log₂(p + 1/2**24) bits: the floor of 1 costs a token that
    the model called impossible 24 bits, and costs the others almost nothing (n / 2**24 of the mass,
    0.05% for 8,000 ids).

    Args:
        probabilities: float ``(..., V)``, next-token distributions (non-negative, each summing to about 1).
        excluded_ids: ints, ids given frequency 0 (never coded).
        total_bits: int, each distribution's frequencies total ``2**total_bits`` (at most 30).

    Returns:
        int64 NumPy ``(..., V)``, each row summing to exactly ``2**total_bits``.

    Raises:
        ValueError: for probabilities that are not finite and non-negative, rows summing far above 1,
            or more ids than ``2**total_bits``.

    Example:
        >>> integer_frequencies(np.array([0.0, 0.5, 0.25, 0.25], "float32"), total_bits=4)  # 1+6, 1+3, 1+3; 1 left
        array([0, 8, 4, 4])
    """
    probabilities = np.asarray(probabilities)
    if probabilities.ndim < 1 or not np.isfinite(probabilities).all() or (probabilities < 0).any():
        raise ValueError(
            "`probabilities` must be an array (..., V) of finite, non-negative numbers; received "
            f"shape {probabilities.shape}"
            + ("" if probabilities.ndim < 1 else ", with a negative or non-finite value")
            + "."
        )
    if not 1 <= total_bits <= PRECISION - 2:
        raise ValueError(f"`total_bits` must be between 1 and {PRECISION - 2}; received {total_bits}.")
    kept = np.ones(probabilities.shape[-1], dtype=bool)
    kept[np.asarray(excluded_ids, dtype="int64")] = False
    total, count = 1 << total_bits, int(kept.sum())
    if not 0 < count <= total:
        raise ValueError(f"{count} ids to code do not fit in frequencies totalling 2**{total_bits}.")
    frequencies = np.where(kept, 1 + np.floor(probabilities.astype("float64") * (total - count)), 0).astype("int64")
    best = np.argmax(np.where(kept, probabilities, -1), axis=-1)[..., None]
    left = total - frequencies.sum(axis=-1, keepdims=True)
    np.put_along_axis(frequencies, best, np.take_along_axis(frequencies, best, axis=-1) + left, axis=-1)
    if (np.take_along_axis(frequencies, best, axis=-1) < 1).any():  # floats summing far above 1 (never a softmax)
        raise ValueError(
            "`probabilities` must sum to about 1 along the last axis; received sums up to "
            f"{float(probabilities.astype('float64').sum(axis=-1).max()):.6f}."
        )
    return frequencies


def _cumulative_rows(frequencies: np.ndarray) -> np.ndarray:
    """int64 ``(B, V + 1)``: each row 0, then its running sums."""
    cumulative = np.zeros((frequencies.shape[0], frequencies.shape[1] + 1), dtype="int64")
    np.cumsum(frequencies, axis=1, out=cumulative[:, 1:])
    return cumulative


class _Context:
    """Next-token probabilities of B streams in one batch, one cached step a token; restarted when full.

    The streams advance in lockstep (one token each a step), so they share positions and restart
    together, with the last half of the window; the same object drives both sides, so that the
    encoder and the decoder call the model identically.
    """

    def __init__(self, model, start_id: int, rows: int):
        from .generation import CachedLanguageModel

        self.history = np.full((rows, 1), int(start_id), dtype="int32")
        self.restarts = 0
        self._table = model if _is_count_table(model) else None
        if self._table is not None:  # P(next | the last token): no cache, no window to restart
            self._probabilities = self._table_probabilities()
            return
        self.window = int(model.sequence_length)
        if self.window < 2:
            raise ValueError(f"the model's sequence length must be at least 2; received {self.window}.")
        self._generator = CachedLanguageModel(model, self.window)
        self._restart(self.history)

    def _table_probabilities(self) -> np.ndarray:
        # float32, as a language model's: the same rounding to integer frequencies on both sides
        return self._table.next_token_probabilities(self.history[:, -1]).astype("float32")

    def _restart(self, prompt: np.ndarray) -> None:
        self._next = self._generator.next_token_function(prompt)
        self._fed = prompt
        self._probabilities = self._next(self._fed)

    def probabilities(self) -> np.ndarray:
        """float32 ``(B, V)``: each stream's next-token distribution."""
        return self._probabilities

    def append(self, token_ids) -> None:
        """Feed each stream its next token: ints ``(B,)``."""
        column = np.asarray(token_ids, dtype="int32")[:, None]
        if self._table is not None:
            self.history = column
            self._probabilities = self._table_probabilities()
            return
        self.history = np.concatenate([self.history[:, -self.window :], column], axis=1)
        if self._fed.shape[1] == self.window:  # the cache is full: restart from the last half of the window
            self.restarts += 1
            self._restart(self.history[:, -(self.window // 2) :])
            return
        self._fed = np.concatenate([self._fed, column], axis=1)
        self._probabilities = self._next(self._fed)


class CompressionStatistics(dict):
    """What :func:`compress` measured: ``tokens``, ``characters``, ``streams``, ``header_bytes``, ``payload_bytes``,
    ``model_bits`` (Σ −log₂ p of the coded tokens under the model's own float probabilities),
    ``frequency_bits`` (the same under the integer frequencies coded with), ``restarts`` (context
    restarts), ``model_seconds`` and ``coder_seconds``."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, position: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise CompressedDataError(f"the data ends inside its header ({what}): it is truncated or not this format.")
        byte = data[position]
        value, shift, position = value | (byte & 0x7F) << shift, shift + 7, position + 1
        if not byte & 0x80:
            return value, position
        if shift > 63:
            raise CompressedDataError(f"the header's {what} is malformed: this is not the format of `compress`.")


def _is_count_table(model) -> bool:
    """A next-token model given by counts (:class:`~transformer_course.ngram.BigramModel`): it gives the
    distribution after a token, ``next_token_probabilities(previous) -> (B, V)``, and has no cache."""
    return callable(getattr(model, "next_token_probabilities", None)) and hasattr(model, "vocabulary_size")


def _context_length(model) -> int:
    """What the header records of the model's context: a language model's window, 1 for a count table."""
    return 1 if _is_count_table(model) else int(model.sequence_length)


def _check_model(model, tokenizer):
    if not _is_count_table(model):
        for name in ("sequence_length", "call_with_cache", "initial_caches"):
            if not hasattr(model, name):
                raise TypeError(
                    f"`model` must be a LanguageModel (with a key/value cache) or a fitted count table "
                    f"(BigramModel); received {type(model).__name__}, which has no `{name}`."
                )
    for name in ("encode", "decode"):
        if not callable(getattr(tokenizer, name, None)):
            raise TypeError(
                f"`tokenizer` must have `encode` and `decode` methods; received {type(tokenizer).__name__}."
            )


def _start_id(tokenizer, start_id):
    if start_id is not None:
        return int(start_id)
    special = getattr(tokenizer, "special_ids", {}) or {}
    if "<|endoftext|>" not in special:
        raise ValueError("`start_id` is needed: the tokenizer has no <|endoftext|> token to read before the text.")
    return int(special["<|endoftext|>"])


def _streams(token_ids: list, streams: int) -> list:
    """The token ids cut into ``streams`` contiguous parts of near-equal length (none empty for a non-empty text)."""
    count = max(1, min(streams, len(token_ids)))
    bounds = [len(token_ids) * index // count for index in range(count + 1)]
    return [token_ids[bounds[index] : bounds[index + 1]] for index in range(count)]


def _run_streams(parts_or_counts, model, start_id, coders, step, progress: bool, description: str):
    """Drive the coders through every step: ``step(row, position, cumulative, probabilities) -> the token``.

    Returns the :class:`_Context` (for its restart count) and the seconds in the model and in the coder."""
    import time

    from ._progress import progress as progress_bar

    lengths = list(parts_or_counts)
    longest, rows = max(lengths), len(lengths)
    started = time.perf_counter()
    context = _Context(model, start_id, rows)
    model_seconds, coder_seconds = time.perf_counter() - started, 0.0
    for position in progress_bar(range(longest), desc=description, unit="step", disable=not progress):
        started = time.perf_counter()
        probabilities = context.probabilities()
        cumulative = _cumulative_rows(integer_frequencies(probabilities))
        tokens = [
            step(row, position, cumulative[row], probabilities[row]) if position < lengths[row] else start_id
            for row in range(rows)
        ]
        between = time.perf_counter()
        coder_seconds += between - started
        if position + 1 < longest:
            context.append(tokens)
            model_seconds += time.perf_counter() - between
    return context, model_seconds, coder_seconds


def compress(
    text: str,
    model,
    tokenizer,
    *,
    start_id: int | None = None,
    streams: int = 1,
    statistics: bool = False,
    progress: bool = False,
):
    """Compress ``text`` with a language model: arithmetic coding of its tokens under the model's probabilities.

    The text is tokenised; the model reads ``start_id`` and predicts the first token, then each token
    in turn (one cached step a token, the context restarted with its last half when the window is
    full); each token is coded with :func:`integer_frequencies` of the model's distribution (padding,
    id 0, excluded). With ``streams`` B > 1 the tokens are cut into B contiguous parts, each coded on
    its own from ``start_id`` by its own coder, and the model runs the B parts as one batch: nearly B
    times the speed on a CPU (a step's cost is mostly fixed), for a few bits more at each part's cold
    start.

    Args:
        text: str, any text the tokenizer encodes (a byte-level BPE: every string but lone surrogates).
        model: a :class:`~transformer_course.language_model.LanguageModel` (inference mode: no dropout),
            or a fitted count table with ``next_token_probabilities`` (:class:`~transformer_course.ngram.BigramModel`,
            whose context is the last token: the coder takes any next-token distribution).
        tokenizer: its tokenizer, with ``encode(str) -> list[int]`` (the model's ids, 0 never used)
            and ``decode(ids) -> str``, such as :class:`~transformer_course.bpe.BytePairEncoding`.
        start_id: int, the id read before the text; None: the tokenizer's ``<|endoftext|>`` (a text
            begins where one ends, as in the training text of notebook 09).
        streams: int >= 1, parts coded side by side (fewer for a text of fewer tokens).
        statistics: bool, also return a :class:`CompressionStatistics`.
        progress: bool, a progress bar over the steps.

    Returns:
        bytes (the header, then each stream's code); with ``statistics``, ``(bytes, CompressionStatistics)``.

    Raises:
        TypeError: for a ``text`` that is not a str, or a model without a cache or a tokenizer without
            encode/decode.
        ValueError: for a tokenizer whose ids fall outside the model's vocabulary (or use id 0), or that
            does not give the text back (``decode(encode(text)) != text``), no ``start_id`` to begin
            with, or ``streams`` < 1.

    Example:
        >>> data = compress("a good film", model, tokenizer)          # doctest: +SKIP
        >>> decompress(data, model, tokenizer)                         # doctest: +SKIP
        'a good film'
    """
    from ._validation import check_integer

    if not isinstance(text, str):
        raise TypeError(f"`text` must be a str; received {type(text).__name__}.")
    _check_model(model, tokenizer)
    streams = check_integer("streams", streams)
    start_id = _start_id(tokenizer, start_id)
    vocabulary_size = int(model.vocabulary_size)
    token_ids = [int(i) for i in tokenizer.encode(text)]
    bad = [i for i in token_ids if not 0 < i < vocabulary_size]
    if bad:
        raise ValueError(
            f"the tokenizer gives ids outside the model's vocabulary 1..{vocabulary_size - 1} "
            f"(e.g. {bad[0]}): they are not the same model and tokenizer."
        )
    if tokenizer.decode(token_ids) != text:
        raise ValueError(
            "the tokenizer does not give this text back (decode(encode(text)) differs from it): "
            "it cannot be compressed losslessly with this tokenizer."
        )
    parts = _streams(token_ids, streams) if token_ids else []
    encoders = [ArithmeticEncoder() for _ in parts]
    bits = {"model": 0.0, "frequency": 0.0}

    def step(row, position, cumulative, probabilities):
        token = parts[row][position]
        encoders[row].encode_cumulative(token, cumulative)
        bits["model"] -= float(np.log2(max(float(probabilities[token]), 1e-45)))
        bits["frequency"] -= float(np.log2((cumulative[token + 1] - cumulative[token]) / (1 << FREQUENCY_BITS)))
        return token

    context, model_seconds, coder_seconds = (
        _run_streams(map(len, parts), model, start_id, encoders, step, progress, "compressing")
        if parts
        else (None, 0.0, 0.0)
    )
    payloads = [encoder.finish() for encoder in encoders]
    checksum = zlib.crc32(text.encode("utf-8"))
    header = (
        MAGIC
        + bytes([FORMAT_VERSION])
        + _varint(vocabulary_size)
        + _varint(_context_length(model))
        + _varint(len(parts))
        + b"".join(_varint(len(part)) + _varint(len(payload)) for part, payload in zip(parts, payloads))
        + checksum.to_bytes(4, "big")
    )
    data = header + b"".join(payloads)
    if not statistics:
        return data
    return data, CompressionStatistics(
        tokens=len(token_ids),
        characters=len(text),
        streams=len(parts),
        header_bytes=len(header),
        payload_bytes=sum(map(len, payloads)),
        model_bits=bits["model"],
        frequency_bits=bits["frequency"],
        restarts=context.restarts if context else 0,
        model_seconds=model_seconds,
        coder_seconds=coder_seconds,
    )


def _read_header(data: bytes) -> tuple:
    """``(vocabulary size, context length, [(tokens, code bytes), ...], checksum, [payload, ...])`` of ``data``."""
    if data[:4] != MAGIC:
        raise CompressedDataError(
            "`data` does not begin with the format's magic bytes b'LMAC': it was not made by `compress`."
        )
    if len(data) < 5:
        raise CompressedDataError("the data ends inside its header (format version): it is truncated.")
    if data[4] != FORMAT_VERSION:
        raise CompressedDataError(
            f"the data is format version {data[4]}; this `decompress` reads version {FORMAT_VERSION} only."
        )
    vocabulary_size, position = _read_varint(data, 5, "vocabulary size")
    window, position = _read_varint(data, position, "context length")
    count, position = _read_varint(data, position, "stream count")
    streams = []
    for _ in range(min(count, len(data))):
        tokens, position = _read_varint(data, position, "token count")
        length, position = _read_varint(data, position, "code length")
        streams.append((tokens, length))
    if len(streams) < count:
        raise CompressedDataError("the data ends inside its header (stream table): it is truncated.")
    if len(data) < position + 4:
        raise CompressedDataError("the data ends inside its header (checksum): it is truncated.")
    checksum, position = int.from_bytes(data[position : position + 4], "big"), position + 4
    promised, present = sum(length for _, length in streams), len(data) - position
    if present < promised:
        raise CompressedDataError(
            f"the data is truncated: its header promises {promised:,} bytes of code, {present:,} are present."
        )
    if present > promised:
        raise CompressedDataError(
            f"the data holds {present - promised:,} bytes after its code: it is not one output of `compress`."
        )
    payloads = []
    for _, length in streams:
        payloads.append(data[position : position + length])
        position += length
    return vocabulary_size, window, streams, checksum, payloads


def decompress(data: bytes, model, tokenizer, *, start_id: int | None = None, progress: bool = False) -> str:
    """The text :func:`compress` coded in ``data``, with the same model and tokenizer.

    Args:
        data: bytes from :func:`compress` (its streams are read from the header).
        model, tokenizer, start_id: exactly those given to :func:`compress` (the same weights, on a
            machine and backend that compute the same float32 probabilities).
        progress: bool, a progress bar over the steps.

    Returns:
        str, equal to the text compressed.

    Raises:
        CompressedDataError: for data that is not this format or from another format version, a
            header or code cut short, a model of another vocabulary size or context length than the
            one that compressed it, or a decoded text whose checksum differs from the one recorded
            (another model's weights, another tokenizer, a machine whose floats differ, or damaged
            data) — never wrong text.
        TypeError: for ``data`` that is not bytes, or a model or tokenizer of the wrong kind.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"`data` must be bytes; received {type(data).__name__}.")
    data = bytes(data)
    _check_model(model, tokenizer)
    vocabulary_size, window, streams, checksum, payloads = _read_header(data)
    if vocabulary_size != int(model.vocabulary_size) or window != _context_length(model):
        raise CompressedDataError(
            f"the data was coded with a model of vocabulary size {vocabulary_size:,} and context length "
            f"{window:,}; this model has {int(model.vocabulary_size):,} and {_context_length(model):,}: "
            "decompress with the model that compressed it."
        )
    start_id = _start_id(tokenizer, start_id)
    decoders = [ArithmeticDecoder(payload) for payload in payloads]
    decoded = [[] for _ in streams]

    def step(row, position, cumulative, probabilities):
        token = decoders[row].decode_cumulative(cumulative)
        decoded[row].append(token)
        return token

    if any(tokens for tokens, _ in streams):
        _run_streams([tokens for tokens, _ in streams], model, start_id, decoders, step, progress, "decompressing")
    token_ids = [token for part in decoded for token in part]
    mismatch = (
        "the decoded text does not match the checksum recorded when it was compressed: the model's "
        "weights, the tokenizer or the machine's arithmetic differ from those that compressed it "
        "(the coder needs the very same probabilities), or the data is damaged."
    )
    try:
        text = tokenizer.decode(token_ids) if token_ids else ""
        same = zlib.crc32(text.encode("utf-8")) == checksum
    except (UnicodeError, ValueError, KeyError, IndexError) as error:
        raise CompressedDataError(mismatch) from error
    if not same:
        raise CompressedDataError(mismatch)
    return text


class LineTokenizer:
    """A tokenizer that writes each newline as one separator token (notebook 09: ``<|endoftext|>``).

    Notebook 09's model was trained on reviews separated by ``<|endoftext|>``, and no review holds a
    newline; a file of reviews, one a line, is coded as the model read its training text. Each line
    is encoded on its own by ``tokenizer``; ``separator_id`` goes between lines. ``decode`` splits at
    the separator and joins the lines with newlines, so ``decode(encode(text)) == text`` for every
    text ``tokenizer`` round-trips whose lines never encode to ``separator_id``.

    Args:
        tokenizer: with ``encode(str) -> list[int]`` and ``decode(ids) -> str`` (and ``special_ids``,
            passed through).
        separator_id: int, the id written for each newline.

    Example:
        >>> from transformer_course.bpe import BytePairEncoding
        >>> bpe = BytePairEncoding.train(["a b"], 1, special_tokens=["<|endoftext|>"])
        >>> lines = LineTokenizer(bpe, bpe.special_ids["<|endoftext|>"])
        >>> ids = lines.encode("a\\nb")
        >>> ids, lines.decode(ids)
        ([97, 257, 98], 'a\\nb')
    """

    def __init__(self, tokenizer, separator_id: int):
        self.tokenizer, self.separator_id = tokenizer, int(separator_id)
        self.special_ids = getattr(tokenizer, "special_ids", {})

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: each line's, ``separator_id`` between them.

        Raises:
            ValueError: for a line that itself encodes to ``separator_id`` (it holds the separator's own
                text, such as ``<|endoftext|>``): it would decode as a newline.
        """
        ids = []
        for index, line in enumerate(text.split("\n")):
            encoded = list(self.tokenizer.encode(line))
            if self.separator_id in encoded:
                raise ValueError(
                    f"line {index + 1} of the text encodes to the separator id {self.separator_id} "
                    "(it holds the separator token's own text), which would decode as a newline."
                )
            ids += ([self.separator_id] if index else []) + encoded
        return ids

    def decode(self, ids) -> str:
        lines, line = [], []
        for token in ids:
            if int(token) == self.separator_id:
                lines.append(self.tokenizer.decode(line))
                line = []
            else:
                line.append(int(token))
        return "\n".join([*lines, self.tokenizer.decode(line)])


def code_length_bits(token_ids, next_token_probabilities: Callable) -> float:
    """The ideal code length of a token sequence under a model: Σ −log₂ p(token | the tokens before), in bits.

    Args:
        token_ids: ints, the sequence (its first id is the context read first, never coded).
        next_token_probabilities: callable ``prefix (list of ints) -> float (V,)``.

    Returns:
        float, bits: what an arithmetic coder reaches to within a few bits.

    Example:
        >>> uniform = lambda prefix: np.full(4, 0.25)
        >>> code_length_bits([0, 1, 2, 3], uniform)  # three tokens of 2 bits
        6.0
    """
    token_ids = [int(i) for i in token_ids]
    return float(sum(-np.log2(next_token_probabilities(token_ids[:t])[token_ids[t]]) for t in range(1, len(token_ids))))


def general_purpose_compressors(data: bytes, repeats: int = 1) -> dict:
    """Four general-purpose compressors on the same bytes: size, and the seconds to compress and decompress.

    ``xz -9e`` (``lzma``, preset ``9 | PRESET_EXTREME``: LZ77 and range coding), ``bzip2 -9`` (``bz2``:
    the Burrows-Wheeler transform), ``zstd -19`` (the ``zstandard`` package: LZ77 and finite-state
    entropy coding) and ``gzip -9`` (``gzip``: DEFLATE). Each is timed ``repeats`` times, compressing
    and decompressing in turn; the median is kept. Every round trip is checked.

    Args:
        data: bytes, non-empty.
        repeats: int >= 1, timings per compressor (their median).

    Returns:
        dict name -> ``{"bytes": int, "compress_seconds": float, "decompress_seconds": float}``.

    Raises:
        ValueError: for empty ``data`` or ``repeats`` < 1; RuntimeError if a compressor's round trip is not exact.

    Example:
        >>> sizes = general_purpose_compressors(b"the film was good. " * 200)
        >>> sorted(sizes), sizes["xz -9e"]["bytes"] < 200
        (['bzip2 -9', 'gzip -9', 'xz -9e', 'zstd -19'], True)
    """
    import bz2
    import gzip
    import lzma
    import time

    import zstandard

    from ._validation import check_integer

    repeats = check_integer("repeats", repeats)
    data = bytes(data)
    if not data:
        raise ValueError("`data` must not be empty.")
    compressors = {
        "xz -9e": (lambda raw: lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME), lzma.decompress),
        "bzip2 -9": (lambda raw: bz2.compress(raw, 9), bz2.decompress),
        "zstd -19": (zstandard.ZstdCompressor(level=19).compress, zstandard.ZstdDecompressor().decompress),
        "gzip -9": (lambda raw: gzip.compress(raw, compresslevel=9, mtime=0), gzip.decompress),
    }
    results = {}
    for name, (squeeze, expand) in compressors.items():
        compress_times, decompress_times = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            packed = squeeze(data)
            middle = time.perf_counter()
            unpacked = expand(packed)
            compress_times.append(middle - started)
            decompress_times.append(time.perf_counter() - middle)
            if unpacked != data:
                raise RuntimeError(f"{name}'s round trip is not exact.")
        results[name] = {
            "bytes": len(packed),
            "compress_seconds": float(np.median(compress_times)),
            "decompress_seconds": float(np.median(decompress_times)),
        }
    return results
