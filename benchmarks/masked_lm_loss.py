"""Pre-training speed of the notebook-08 model: the masked-LM loss on every position vs on the chosen ones.

The masked-LM loss counts only the ~15% of positions chosen by ``mask_tokens``. Two ways to get
there, measured side by side (interleaved repeats, medians), as training steps (forward, loss,
backward, optimiser update):

* ``all positions``  the output layer (a product with the whole token-embedding matrix, V words)
                     runs at every one of the T positions, and the loss is masked to the chosen
                     ones afterwards;
* ``chosen only``    the encoder's vectors at the chosen positions are gathered first (at most
                     ``max_predictions`` P of them), and the output layer runs on those alone, as
                     notebook 08 does (Devlin et al., 2019, ``max_predictions_per_seq``).

Both models have the notebook's full-profile sizes and the same weights, and pre-train as the
notebook does: the masked LM alone (no next-sentence head), on full-length single-segment inputs
``[CLS]`` + T - 2 tokens + ``[SEP]``, no dropout; the chosen positions come from ``mask_tokens``
on random ids. Before
timing, one batch is scored both ways and the two losses are checked equal (the same positions
count). Runs on any Keras backend.

    .venv/bin/python benchmarks/masked_lm_loss.py [--steps 10 --repeats 3]
"""

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _timing import interleaved_seconds  # benchmarks/_timing.py beside this script

from transformer_course import profile
from transformer_course.bert import build_bert_pretrainer
from transformer_course.metrics import MaskedCrossEntropy
from transformer_course.pretraining import gather_selected, mask_tokens
from transformer_course.tooling.runtime import hardware

MASK = 4  # special ids as in notebook 08: 0 padding, 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="training steps per timed call")
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args(argv)

    settings = profile("full").notebook("08")
    vocabulary, length, chosen = settings.vocabulary_size, settings.sequence_length, settings.max_predictions
    batches = [
        _batch(np.random.default_rng(step), settings.batch_size, length, vocabulary, chosen)
        for step in range(arguments.steps)
    ]
    models = {}
    for name, predictions in (("all positions", length), ("chosen only", chosen)):
        keras.utils.set_random_seed(0)
        model = build_bert_pretrainer(
            vocabulary, length, predictions, **settings.model, dropout=0.0, next_sentence=False
        )
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-4), loss={"mlm": MaskedCrossEntropy()}, jit_compile=settings.jit_compile
        )
        models[name] = model
    models["chosen only"].set_weights(models["all positions"].get_weights())

    losses = {
        name: float(
            model.evaluate(*batches[0][name], verbose=0, batch_size=settings.batch_size, return_dict=True)["loss"]
        )
        for name, model in models.items()
    }
    if not np.isclose(losses["all positions"], losses["chosen only"], rtol=1e-4):
        raise AssertionError(f"the two losses differ: {losses}")

    def trainer(name):
        def train():
            for batch in batches:
                models[name].train_on_batch(*batch[name])

        return train

    functions = {name: trainer(name) for name in models}
    for function in functions.values():
        function()  # compile and warm up
    seconds = interleaved_seconds(functions, arguments.repeats)
    tokens = settings.batch_size * length * arguments.steps
    rates = {name: tokens / statistics.median(values) for name, values in seconds.items()}

    machine = hardware()
    print(
        f"Masked-LM pre-training steps: vocabulary {vocabulary:,}, inputs of {length} tokens, "
        f"batch {settings.batch_size}, "
        f"E={settings.model.embed_dim}, F={settings.model.intermediate_dim}, {settings.model.num_heads} heads, "
        f"{settings.model.num_layers} "
        f"block(s), XLA {settings.jit_compile}; {arguments.steps} steps x {arguments.repeats} interleaved repeats; "
        f"loss on one batch equal both ways ({losses['all positions']:.4f})"
    )
    print(
        f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
        f"Keras {keras.__version__} ({keras.backend.backend()})"
    )
    print(f"  all positions ({length} scored an input): {rates['all positions']:9.0f} tokens/s")
    print(
        f"  chosen only   ({chosen} scored an input):  {rates['chosen only']:9.0f} tokens/s   "
        f"x{rates['chosen only'] / rates['all positions']:.2f}"
    )
    return 0


def _batch(rng, batch_size, length, vocabulary, max_predictions):
    """One batch of random single-segment inputs masked by ``mask_tokens``, as inputs/targets for both models."""
    token_ids = rng.integers(5, vocabulary, size=(batch_size, length)).astype("int32")
    token_ids[:, 0], token_ids[:, -1] = 2, 3  # [CLS] text [SEP]
    segment_ids = np.zeros_like(token_ids)
    masked, labels, selected = mask_tokens(token_ids, rng, vocabulary, MASK, unselectable_token_ids=(0, 2, 3, MASK))
    positions, position_labels = gather_selected(selected, labels, max_predictions)
    every_label = np.zeros_like(token_ids)  # the same scored positions, at their places in the input
    np.put_along_axis(every_label, positions, position_labels, axis=1)  # unused slots: label 0 at [CLS]
    every_position = np.arange(length, dtype="int32")[None].repeat(batch_size, 0)
    return {
        "all positions": (
            {"token_ids": masked, "segment_ids": segment_ids, "mask_positions": every_position},
            {"mlm": every_label},
        ),
        "chosen only": (
            {"token_ids": masked, "segment_ids": segment_ids, "mask_positions": positions},
            {"mlm": position_labels},
        ),
    }


if __name__ == "__main__":
    raise SystemExit(main())
