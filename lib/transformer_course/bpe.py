"""Byte-level byte-pair encoding (BPE), from scratch: training, encoding by merge rank, decoding.

Byte-pair encoding (Sennrich et al., 2016, *Neural Machine Translation of Rare Words with Subword
Units*, §3.1) starts from single symbols and repeatedly merges the most frequent adjacent pair into
a new symbol. GPT-2 (Radford et al., 2019, §2.2) runs it on **bytes**: the 256 byte values are the
starting vocabulary, so every string — any script, emoji, stray control character — can be
encoded, and no `[UNK]` is ever needed.

The steps, as GPT-2 takes them:

1. **Pre-tokenisation.** The text is cut by a regular expression (:data:`GPT2_PATTERN`) into
   words with their leading space (``" flight"``), runs of digits, runs of punctuation, and
   whitespace; merges never cross these boundaries, so a token never spans two words.
2. **Training** (:meth:`BytePairEncoding.train`): count every pre-token, then repeat: count the
   adjacent pairs of symbols inside the pre-tokens (each weighted by how often its pre-token
   occurs), merge the most frequent pair everywhere, and record it. **Ties** (two pairs with the
   same count) go to the pair of older tokens: the lower id of the first token, then of the second
   (a byte's id is its value; a merged token's id says when it was made). Hugging Face's trainer
   breaks ties by its own ids, which number the 256 bytes in the order of GPT-2's stand-in
   characters (:func:`bytes_to_unicode`) rather than by value: the two trainers learn the same
   merges except where a tie involves a byte shown by a stand-in (the space, control bytes, some
   of Latin-1) — the space, for one, sorts before the letters here and after them there.
3. **Encoding** (:meth:`BytePairEncoding.encode`): inside each pre-token, apply the learned merges
   in the order they were learned (by **rank**): repeatedly merge the present pair of lowest rank,
   until no learned pair is left.
4. **Decoding**: concatenate the tokens' bytes and read them as UTF-8. ``decode(encode(text))``
   gives ``text`` back for every string.

Special tokens (``"<|endoftext|>"``) are matched before pre-tokenisation and are never split.

Ids: 0–255 are the bytes, then one id per merge in the order learned, then the special tokens.
:meth:`BytePairEncoding.vocabulary_and_merges` writes the vocabulary and merges in GPT-2's text
form (bytes shown through :func:`bytes_to_unicode`), the form Hugging Face ``tokenizers`` and
keras-hub's ``BytePairTokenizer`` load.

Example:
    >>> bpe = BytePairEncoding.train(["low lower lowest", "low low"], num_merges=4)
    >>> [bpe.token(i) for i in bpe.encode("lowest low")]  # merges: l+o, lo+w, " "+low, " low"+e
    ['low', 'e', 's', 't', ' low']
    >>> bpe.decode(bpe.encode("lowest low"))
    'lowest low'
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Iterable

import regex

__all__ = ["BytePairEncoding", "GPT2_PATTERN", "bytes_to_unicode", "pre_tokenize"]

# GPT-2's pre-tokenisation pattern (its encoder.py): contractions, a letter run with its leading
# space, a digit run, a punctuation run, whitespace not followed by a non-space, other whitespace.
GPT2_PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte: printable bytes stand for themselves, the others
    (space, control bytes...) for the characters from U+0100 on, in order.

    Returns:
        dict of the 256 byte values (int) to one-character str each, all different.

    Example:
        >>> stand_in = bytes_to_unicode()
        >>> stand_in[ord("a")], stand_in[ord(" ")]
        ('a', 'Ġ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_in, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            stand_in[byte] = chr(byte)
        else:
            stand_in[byte] = chr(256 + extra)
            extra += 1
    return stand_in


def pre_tokenize(text: str) -> list[str]:
    """``text`` cut by :data:`GPT2_PATTERN`: the pieces merges never cross; they join back to ``text``.

    Example:
        >>> pre_tokenize("I'm flying!  ok")
        ['I', "'m", ' flying', '!', ' ', ' ok']
    """
    return GPT2_PATTERN.findall(text)


class BytePairEncoding:
    """A byte-level BPE vocabulary: the 256 bytes, the learned merges in order, the special tokens.

    Args:
        merges: list of ``(bytes, bytes)`` pairs, in the order they were learned (rank 0 first);
            each pair's two parts must be the bytes of earlier tokens.
        special_tokens: strs that are matched whole and never split; their ids follow the merges.

    Raises:
        ValueError: for a merge whose parts are not tokens yet, or a repeated special token.
    """

    def __init__(self, merges: Iterable[tuple[bytes, bytes]] = (), special_tokens: Iterable[str] = ()):
        self.vocabulary: list[bytes] = [bytes([byte]) for byte in range(256)]
        self.ids: dict[bytes, int] = {token: index for index, token in enumerate(self.vocabulary)}
        self.ranks: dict[tuple[int, int], int] = {}
        for rank, (first, second) in enumerate(merges):
            if first not in self.ids or second not in self.ids:
                raise ValueError(f"merge {rank} ({first!r}, {second!r}) joins bytes that are not tokens yet.")
            self.ranks[self.ids[first], self.ids[second]] = rank
            if first + second not in self.ids:
                self.ids[first + second] = len(self.vocabulary)
                self.vocabulary.append(first + second)
        self.merged = {pair: self.ids[self.vocabulary[pair[0]] + self.vocabulary[pair[1]]] for pair in self.ranks}
        self.special_tokens = list(special_tokens)
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise ValueError(f"`special_tokens` must not repeat; received {self.special_tokens!r}.")
        self.special_ids = {token: len(self.vocabulary) + index for index, token in enumerate(self.special_tokens)}
        by_length = sorted(self.special_tokens, key=len, reverse=True)  # the longest match first
        alternatives = "|".join(regex.escape(token) for token in by_length)
        self._special = regex.compile(f"({alternatives})") if by_length else None
        self._cache: dict[str, list[int]] = {}
        self._byte_ids = list(range(256))  # each byte's token id: its value, here

    @classmethod
    def from_vocabulary_and_merges(
        cls, vocabulary: dict[str, int], merges: Iterable[str], special_tokens: Iterable[str] = (), id_offset: int = 0
    ) -> BytePairEncoding:
        """A published byte-level BPE (GPT-2's ``vocab.json`` and ``merges.txt``) with its own ids.

        Encoding follows the merges by rank, as always; the ids are the published ones, plus
        ``id_offset`` (the course's models keep id 0 for padding: GPT-2's ids with ``id_offset=1``).

        Args:
            vocabulary: dict of token (bytes through :func:`bytes_to_unicode`) to id, as
                :meth:`vocabulary_and_merges` writes it; special tokens included.
            merges: ``"first second"`` strs, rank 0 first.
            special_tokens: which of the vocabulary's entries are special tokens (kept whole).
            id_offset: int >= 0, added to every published id; ids below it are not tokens.

        Returns:
            :class:`BytePairEncoding` whose :meth:`encode` gives the published ids + ``id_offset``.

        Raises:
            ValueError: for a vocabulary that lacks a byte, a merge's parts or its result, or a
                special token.
        """
        from_stand_in = {character: byte for byte, character in bytes_to_unicode().items()}
        special_tokens = list(special_tokens)
        encoding = cls(special_tokens=())
        size = max(vocabulary.values()) + 1 + id_offset
        encoding.vocabulary = [b""] * size
        for text, index in vocabulary.items():
            if text not in special_tokens:
                encoding.vocabulary[index + id_offset] = bytes(from_stand_in[character] for character in text)
        encoding.ids = {token: index for index, token in enumerate(encoding.vocabulary) if token}
        if any(bytes([byte]) not in encoding.ids for byte in range(256)):
            raise ValueError("`vocabulary` must hold every one of the 256 bytes.")
        encoding._byte_ids = [encoding.ids[bytes([byte])] for byte in range(256)]
        encoding.ranks, encoding.merged = {}, {}
        for rank, merge in enumerate(merges):
            first, second = (bytes(from_stand_in[c] for c in part) for part in merge.split(" "))
            if first not in encoding.ids or second not in encoding.ids or first + second not in encoding.ids:
                raise ValueError(f"merge {rank} ({merge!r}): its parts and their join must be in `vocabulary`.")
            pair = (encoding.ids[first], encoding.ids[second])
            encoding.ranks[pair], encoding.merged[pair] = rank, encoding.ids[first + second]
        missing = [token for token in special_tokens if token not in vocabulary]
        if missing:
            raise ValueError(f"special tokens {missing!r} are not in `vocabulary`.")
        encoding.special_tokens = special_tokens
        encoding.special_ids = {token: vocabulary[token] + id_offset for token in special_tokens}
        by_length = sorted(special_tokens, key=len, reverse=True)
        encoding._special = regex.compile("(" + "|".join(map(regex.escape, by_length)) + ")") if by_length else None
        return encoding

    # --- training ---------------------------------------------------------------------------

    def with_id_offset(self, id_offset: int) -> BytePairEncoding:
        """The same merges and special tokens with every id moved up by ``id_offset``.

        The course's models keep id 0 for padding, so a tokenizer learned here (bytes at ids
        0 … 255) is moved up by 1 before its ids reach a model: the step notebooks 09 and 11 take
        after :meth:`train`. Through :meth:`vocabulary_and_merges` and
        :meth:`from_vocabulary_and_merges`: the same encoding, published ids plus the offset.

        Args:
            id_offset: int >= 0.

        Returns:
            :class:`BytePairEncoding` whose :meth:`encode` gives this one's ids + ``id_offset``.

        Example:
            >>> learned = BytePairEncoding.train(["aaab"], 1, special_tokens=["<|endoftext|>"])
            >>> learned.encode("aab<|endoftext|>"), learned.with_id_offset(1).encode("aab<|endoftext|>")
            ([256, 98, 257], [257, 99, 258])
        """
        return BytePairEncoding.from_vocabulary_and_merges(
            *self.vocabulary_and_merges(), special_tokens=self.special_tokens, id_offset=id_offset
        )

    @classmethod
    def train(
        cls, texts: Iterable[str], num_merges: int, special_tokens: Iterable[str] = (), progress: bool = False
    ) -> BytePairEncoding:
        """Learn ``num_merges`` merges from ``texts`` (fewer if no pair is left to merge).

        Counts every pre-token once, then merges the most frequent adjacent pair again and again,
        updating only the counts of the pre-tokens that contain it; ties go to the pair of older
        tokens (lower ids). Special tokens are cut out of the texts first and never merged with anything.

        Args:
            texts: iterable of str.
            num_merges: int >= 0.
            special_tokens: strs kept whole (see the class).
            progress: bool, show a progress bar over the merges.

        Returns:
            :class:`BytePairEncoding`.

        Raises:
            ValueError: for a negative ``num_merges``.
        """
        if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
            raise ValueError(f"`num_merges` must be an integer >= 0; received {num_merges!r}.")
        special_tokens = list(special_tokens)
        splitter = cls(special_tokens=special_tokens)
        counts = collections.Counter(
            piece
            for text in texts
            for part in splitter._split_special(text)
            if part not in splitter.special_ids
            for piece in pre_tokenize(part)
        )
        words = [list(piece.encode("utf-8")) for piece in counts]  # symbols (token ids) of each distinct pre-token
        frequency = list(counts.values())
        vocabulary = [bytes([byte]) for byte in range(256)]
        pair_counts: collections.Counter = collections.Counter()
        where = collections.defaultdict(set)  # pair -> the words that hold it
        for index, word in enumerate(words):
            for pair in zip(word, word[1:]):
                pair_counts[pair] += frequency[index]
                where[pair].add(index)

        def entry(pair):  # the heap's order: highest count, then the older tokens (lower ids)
            return (-pair_counts[pair], pair)

        heap = [entry(pair) for pair in pair_counts]
        heapq.heapify(heap)
        merges = []
        bar = None
        if progress:
            from ._progress import progress as progress_bar

            bar = progress_bar(total=num_merges, desc="BPE merges")
        while len(merges) < num_merges and heap:
            count, pair = heapq.heappop(heap)
            if -count != pair_counts.get(pair, 0) or -count <= 0:
                continue  # a stale entry: the pair's count changed since it was pushed
            new = len(vocabulary)
            vocabulary.append(vocabulary[pair[0]] + vocabulary[pair[1]])
            merges.append((vocabulary[pair[0]], vocabulary[pair[1]]))
            changed = set()
            for index in where.pop(pair):
                word, weight = words[index], frequency[index]
                for old in zip(word, word[1:]):
                    pair_counts[old] -= weight
                    changed.add(old)
                merged, position = [], 0
                while position < len(word):
                    if position + 1 < len(word) and (word[position], word[position + 1]) == pair:
                        merged.append(new)
                        position += 2
                    else:
                        merged.append(word[position])
                        position += 1
                words[index] = merged
                for fresh in zip(merged, merged[1:]):
                    pair_counts[fresh] += weight
                    where[fresh].add(index)
                    changed.add(fresh)
            pair_counts.pop(pair, None)
            for other in changed:
                if pair_counts.get(other, 0) > 0:
                    heapq.heappush(heap, entry(other))
                else:
                    pair_counts.pop(other, None)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        return cls(merges, special_tokens)

    # --- encoding and decoding ---------------------------------------------------------------

    def _split_special(self, text: str) -> list[str]:
        return [part for part in self._special.split(text) if part] if self._special else ([text] if text else [])

    def _encode_piece(self, piece: str) -> list[int]:
        """One pre-token -> ids: merge the present pair of lowest rank until none is learned."""
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        word = [self._byte_ids[byte] for byte in piece.encode("utf-8")]
        while len(word) > 1:
            rank, index = min(
                (self.ranks.get(pair, len(self.ranks)), index) for index, pair in enumerate(zip(word, word[1:]))
            )
            if rank == len(self.ranks):
                break
            target = (word[index], word[index + 1])
            merged, position = [], 0
            while position < len(word):
                if position + 1 < len(word) and (word[position], word[position + 1]) == target:
                    merged.append(self.merged[target])
                    position += 2
                else:
                    merged.append(word[position])
                    position += 1
            word = merged
        if len(self._cache) < 100_000:
            self._cache[piece] = word
        return word

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids: special tokens whole, the rest pre-tokenised and merged by rank.

        Args:
            text: str, any Unicode.

        Returns:
            list of int ids in ``[0, vocabulary_size)``.

        Raises:
            TypeError: for a ``text`` that is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a str; received {type(text).__name__}.")
        ids = []
        for part in self._split_special(text):
            if part in self.special_ids:
                ids.append(self.special_ids[part])
            else:
                for piece in pre_tokenize(part):
                    ids.extend(self._encode_piece(piece))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text: the tokens' bytes joined and read as UTF-8 (an invalid sequence, which
        only ids not made by :meth:`encode` can give, becomes U+FFFD).

        Raises:
            ValueError: for an id outside ``[0, vocabulary_size)``.
        """
        special = {index: token for token, index in self.special_ids.items()}
        data = bytearray()
        for index in ids:
            index = int(index)
            if index in special:
                data += special[index].encode("utf-8")
            elif 0 <= index < len(self.vocabulary) and self.vocabulary[index]:  # b"": an id that is no token
                data += self.vocabulary[index]
            else:
                raise ValueError(f"token id {index} is outside the vocabulary (size {self.vocabulary_size}).")
        return data.decode("utf-8", errors="replace")

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The learned merges as ``(bytes, bytes)`` pairs, rank 0 (the first learned) first."""
        ordered = sorted(self.ranks.items(), key=lambda item: item[1])
        return [(self.vocabulary[first], self.vocabulary[second]) for (first, second), _ in ordered]

    @property
    def vocabulary_size(self) -> int:
        """int: the bytes, the merged tokens and the special tokens (one more than the largest id)."""
        return max(len(self.vocabulary), max(self.special_ids.values(), default=-1) + 1)

    def token(self, index: int) -> str:
        """A token as text: a special token, or its bytes read as UTF-8 (partial characters as U+FFFD)."""
        for token, special in self.special_ids.items():
            if special == index:
                return token
        return self.vocabulary[index].decode("utf-8", errors="replace")

    def vocabulary_and_merges(self) -> tuple[dict[str, int], list[str]]:
        """The vocabulary and merges in GPT-2's text form, as Hugging Face ``tokenizers`` and keras-hub load them.

        Returns:
            ``(vocabulary, merges)``: dict of token (bytes through :func:`bytes_to_unicode`) to id,
            special tokens included; list of ``"first second"`` strs, rank 0 first.
        """
        stand_in = bytes_to_unicode()
        shown = ["".join(stand_in[byte] for byte in token) for token in self.vocabulary]
        vocabulary = {text: index for index, text in enumerate(shown)}
        vocabulary.update(self.special_ids)
        merges = [None] * len(self.ranks)
        for (first, second), rank in self.ranks.items():
            merges[rank] = f"{shown[first]} {shown[second]}"
        return vocabulary, merges
