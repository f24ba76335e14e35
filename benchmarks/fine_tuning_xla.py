"""Notebook 08's fine-tuning run with and without XLA: whole runs, compiling included, side by side.

Notebook 08 fine-tunes about fifty classifiers, each a fresh model compiled once: a few hundred
updates, a validation pass after every epoch, and one scoring pass. XLA makes a long pre-training
run faster on a CPU, but each short run also pays for compiling (again for a last, smaller batch).
This script times whole runs of the notebook's classifier — its full-profile encoder (width 128,
2 blocks, inputs of 128 pieces), mean pooling, AdamW with BERT's warm-up and linear decay, batches
of 32, 1,000 validation and 5,000 scored reviews — on random token ids (the time does not depend
on the ids), with ``jit_compile`` True and False alternating:

* ``--labels 1000 --epochs 6``  the size of the notebook's learning-rate grid;
* ``--labels 6000 --epochs 2``  the largest size of its curve (each epoch 188 updates).

Prints the seconds of every epoch (the first includes compiling), of fitting, and of the whole run
with scoring, and the ratio of the medians, without XLA over with it.

    .venv/bin/python benchmarks/fine_tuning_xla.py [--repeats 2]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from transformer_course.tooling.runtime import hardware, import_tensorflow_quietly

tf = import_tensorflow_quietly()
import keras  # noqa: E402
import numpy as np  # noqa: E402

from transformer_course import profile  # noqa: E402
from transformer_course.bert import build_bert_classifier, build_bert_pretrainer  # noqa: E402
from transformer_course.training import WarmupLinearDecay, fit_best  # noqa: E402

VOCABULARY_SIZE = 7669  # notebook 08's WordPiece vocabulary in its recorded run


def random_reviews(rng, count, length):
    """`count` inputs of `length` ids: [CLS] (2), random pieces, [SEP] (3); every position real."""
    token_ids = rng.integers(5, VOCABULARY_SIZE, size=(count, length)).astype("int32")
    token_ids[:, 0], token_ids[:, -1] = 2, 3
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}


def one_run(settings, data, labels, epochs, jit_compile):
    """One fine-tuning run as notebook 08 makes it: (seconds of each epoch, of fitting, of the whole run)."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    started = time.perf_counter()
    encoder = build_bert_pretrainer(
        VOCABULARY_SIZE,
        settings.sequence_length,
        settings.max_predictions,
        **settings.model,
        dropout=settings.encoder_dropout,
        next_sentence=False,
    )
    model = build_bert_classifier(encoder, num_classes=2, dropout=settings.classifier_dropout, pooling="mean")
    steps = -(-labels // settings.fine_tune_batch_size)
    schedule = WarmupLinearDecay(3e-4, steps, steps * epochs)
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    training = ({key: value[:labels] for key, value in data["train"][0].items()}, data["train"][1][:labels])
    model, _, facts = fit_best(
        model,
        training,
        data["validation"],
        epochs=epochs,
        patience=epochs,
        batch_size=settings.fine_tune_batch_size,
        validation_batch_size=256,
    )
    fitted = time.perf_counter() - started
    model.evaluate(*data["test"], batch_size=256, verbose=0)
    return facts["epoch_seconds"], fitted, time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs of each set-up per size, alternating")
    arguments = parser.parse_args(argv)
    settings = profile("full").notebook("08")
    rng = np.random.default_rng(0)
    data = {
        name: (random_reviews(rng, count, settings.sequence_length), rng.integers(0, 2, count))
        for name, count in (("train", 6000), ("validation", 1000), ("test", 5000))
    }
    machine = hardware()
    print(
        f"Notebook 08's fine-tuning run with and without XLA: {settings.model}, inputs of "
        f"{settings.sequence_length}, batches of {settings.fine_tune_batch_size}; 1,000 validation and 5,000 "
        "scored reviews"
    )
    print(
        f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    )
    for labels, epochs in ((1000, 6), (6000, 2)):
        totals = {True: [], False: []}
        for _ in range(arguments.repeats):
            for jit_compile in (True, False):
                epoch_seconds, fitted, total = one_run(settings, data, labels, epochs, jit_compile)
                totals[jit_compile].append(total)
                print(
                    f"  {labels:>5,} labels, {epochs} epochs, XLA {jit_compile!s:<5}: epochs "
                    f"{', '.join(f'{value:.1f}' for value in epoch_seconds)} s; fit {fitted:.1f} s, "
                    f"with scoring {total:.1f} s",
                    flush=True,
                )
        ratio = statistics.median(totals[False]) / statistics.median(totals[True])
        print(f"  {labels:>5,} labels: a whole run without XLA takes {ratio:.2f}x the time with it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
