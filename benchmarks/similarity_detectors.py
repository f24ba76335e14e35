"""The grader's similarity section beside copydetect (winnowing, as in MOSS), on the same cases.

Each case is a student's program for an exercise and the answer it may copy (the grader's reference
or the package's implementation); each detector gives a score in [0, 1] for "the program copies the
answer": the grader's containment of the answer's 5-token sequences after its normalisation
(:mod:`transformer_course_grader.similarity`), and copydetect's share of the answer's fingerprints
found in the program (``CodeFingerprint`` with k=25 characters, window 1, the defaults of its
command line; copydetect tokenises with Pygments, renaming variables and literals). The copies
should score high, the honest answers written independently low.

Needs ``pip install copydetect`` (not a course dependency). Prints one line a case, then, for each
detector, the lowest score of a copy and the highest of an honest answer (a detector separates them
when the first is above the second).

    .venv/bin/python benchmarks/similarity_detectors.py
"""

import inspect
import re
import tempfile
from pathlib import Path

from transformer_course import decoding, masks
from transformer_course_grader import references
from transformer_course_grader.similarity import containment, normalise, strip_no_ops

# Each answer with its imports, as the grader reads a known answer (the statements it needs).
CAUSAL = "import numpy as np\n" + inspect.getsource(references._causal_reference).replace(
    "_causal_reference", "causal_mask"
)
GREEDY_NAME = references.REGISTRY["07.2"].reference.__name__
GREEDY = "import numpy as np\n" + inspect.getsource(references.REGISTRY["07.2"].reference).replace(
    GREEDY_NAME, "greedy_decode"
)
PACKAGE_GREEDY = "import numpy as np\n" + "\n\n".join(
    inspect.getsource(function)
    for function in (decoding._probabilities, decoding._start, decoding._decode, decoding.greedy_decode)
)
IMPORT, HEADER, BODY = CAUSAL.split("\n", 2)
# 03.1's reference with its helper; and that copy's comprehensions written as loops, two independent
# statements swapped and its names changed (the rewrites a copy may go through mechanically).
VECTORIZE = (
    "import re\nimport numpy as np\n\n"
    + inspect.getsource(references._standardize)
    + "\n\n"
    + inspect.getsource(references.REGISTRY["03.1"].reference).replace(
        references.REGISTRY["03.1"].reference.__name__, "vectorize"
    )
)
VECTORIZE_LOOPS = VECTORIZE[: VECTORIZE.index("def vectorize")] + (
    "def vectorize(text, vocabulary):\n    ids = []\n    lookup = {}\n"
    "    for place, token in enumerate(vocabulary):\n        lookup[token] = place\n"
    "    for token in _standardize(text).split():\n        ids.append(lookup.get(token, 1))\n"
    '    return np.array(ids, dtype="int64")\n'
)

CASES = [
    # (name, is a copy, the answer, the student's program)
    ("causal: verbatim", True, CAUSAL, CAUSAL),
    (
        "causal: padded with no-op statements",
        True,
        CAUSAL,
        IMPORT + "\n" + HEADER + "\n" + "".join(f"    unused_{n} = {n}\n    pass\n" for n in range(12)) + BODY,
    ),
    (
        "causal: renamed, numpy imported as numpy",
        True,
        CAUSAL,
        re.sub(r"\blength\b", "size", CAUSAL).replace("import numpy as np", "import numpy").replace("np.", "numpy."),
    ),
    (
        "greedy: verbatim with a helper of its own",
        True,
        GREEDY,
        "def _shape(n):\n    total = 0\n    for i in range(n):\n        total += i * i - 1\n"
        "    return total, n\n\n" + GREEDY,
    ),
    (
        "greedy: the package's, renamed",
        True,
        PACKAGE_GREEDY,
        PACKAGE_GREEDY.replace("decoded", "ids").replace("finished", "done"),
    ),
    ("vectorize: verbatim", True, VECTORIZE, VECTORIZE),
    ("vectorize: comprehensions as loops, statements reordered, renamed", True, VECTORIZE, VECTORIZE_LOOPS),
    (
        "causal: honest, a loop",
        False,
        CAUSAL,
        "import numpy as np\ndef causal_mask(length):\n    mask = np.zeros((length, length), dtype=bool)\n"
        "    for row in range(length):\n        mask[row, :row + 1] = True\n    return mask",
    ),
    (
        "greedy: honest",
        False,
        GREEDY,
        "import numpy as np\ndef greedy_decode(next_token_probabilities, start_ids, end_id, max_length):\n"
        "    decoded = np.asarray(start_ids)[:, None]\n    for _ in range(max_length):\n"
        "        step = next_token_probabilities(decoded).argmax(-1)\n"
        "        decoded = np.concatenate([decoded, step[:, None]], 1)\n"
        "        if (step == end_id).all():\n            break\n    return decoded",
    ),
    (
        "causal: the package's masks.causal_mask, honest against the reference",
        False,
        CAUSAL,
        "from keras import ops\n" + inspect.getsource(masks.causal_mask),
    ),
]


def ours(answer: str, program: str) -> float:
    return containment(normalise(strip_no_ops(answer)), normalise(strip_no_ops(program)))


def copydetect_score(answer: str, program: str) -> float:
    from copydetect import CodeFingerprint, compare_files

    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / "answer.py", Path(folder) / "program.py"]
        for path, text in zip(paths, (answer, program), strict=True):
            path.write_text(text, encoding="utf-8")
        first, second = (CodeFingerprint(str(path), 25, 1) for path in paths)
        _, (answer_share, _), _ = compare_files(first, second)
    return float(answer_share)


def main() -> None:
    try:
        import copydetect  # noqa: F401
    except ImportError:
        raise SystemExit("this benchmark needs copydetect: pip install copydetect") from None
    detectors = {"grader's containment": ours, "copydetect": copydetect_score}
    scores = {name: [] for name in detectors}
    print(f"{'case':62} {'copy':>5} " + " ".join(f"{name:>21}" for name in detectors))
    for name, copy, answer, program in CASES:
        row = {detector: function(answer, program) for detector, function in detectors.items()}
        for detector, score in row.items():
            scores[detector].append((copy, score))
        print(f"{name:62} {'yes' if copy else 'no':>5} " + " ".join(f"{score:21.2f}" for score in row.values()))
    print()
    for detector, pairs in scores.items():
        lowest_copy = min(score for copy, score in pairs if copy)
        highest_honest = max(score for copy, score in pairs if not copy)
        verdict = "separates them" if lowest_copy > highest_honest else "does not separate them"
        print(f"{detector}: lowest copy {lowest_copy:.2f}, highest honest answer {highest_honest:.2f}: {verdict}")


if __name__ == "__main__":
    main()
