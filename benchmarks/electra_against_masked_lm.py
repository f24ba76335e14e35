"""A trial for notebook 08: replaced-token detection (ELECTRA) against the masked LM, at equal pre-training minutes.

Both objectives pre-train notebook 08's encoder (its full-profile text, WordPiece vocabulary,
inputs, sizes, batch size and schedule) for the same wall-clock minutes on this machine; each
encoder is then fine-tuned for IMDB sentiment with notebook 08's protocol (mean of the outputs,
BERT's warm-up + linear decay, the best validation epoch, each arm's learning rate chosen from the
notebook's grid on the 1,000 validation reviews at 1,000 labels, seed 0), at 200 and 1,000
labels and several seeds, and scored on the notebook's fixed sample of 5,000 test reviews.

* **masked LM**: ``build_bert_pretrainer(next_sentence=False)``, 15% chosen, 80/10/10, the loss
  on the chosen positions (notebook 08's section 4).
* **ELECTRA**: :class:`~transformer_course.electra.ElectraPretrainer` — a generator a quarter of
  the width sharing the embeddings, its draws at the chosen positions (all ``[MASK]`` in its
  input), a discriminator the size of the masked LM's encoder judging every position, loss =
  generator + 50 x discriminator (Clark et al., 2020, §2). The discriminator is fine-tuned.

Equal minutes: each objective's step is timed after compiling (``--timing-steps`` steps), and its
number of updates is the minutes divided by that time, so a load on the machine during training
changes how long the run takes, not how much it learns. Both use notebook 08's peak learning rate
(10⁻³, chosen for the masked LM); ELECTRA's own best pre-training rate is not searched here.

A seed draws the same labelled reviews for both arms (a paired design); the table prints each
seed's difference. Notebook 08's recorded run gives the same protocol's from-scratch accuracies.

    .venv/bin/python benchmarks/electra_against_masked_lm.py            # about 50 min on 2 cores
    .venv/bin/python benchmarks/electra_against_masked_lm.py --profile smoke   # a minute: the code runs
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf
from masked_word_baselines import pretraining_text, word_pieces  # notebook 08's section 1 (a script beside this one)

from transformer_course import load_record, profile
from transformer_course.bert import build_bert_classifier, build_bert_pretrainer
from transformer_course.datasets import load_imdb
from transformer_course.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraBatches,
    ElectraPretrainer,
    ReplacedTokenDetectionLoss,
)
from transformer_course.metrics import MaskedCrossEntropy
from transformer_course.pretraining import PretrainingBatches, contiguous_segments, pack_single
from transformer_course.tooling.runtime import hardware
from transformer_course.training import WarmupCosineDecay, WarmupLinearDecay, fit_best

PAD, UNK, CLS, SEP, MASK = range(5)  # the reserved tokens, first in the vocabulary, as in notebook 08
ARMS = {"masked LM": "mlm", "ELECTRA": "electra"}


def pretrainer(kind, vocabulary_size, settings, dropout):
    """A fresh encoder with its pre-training head(s): the masked LM's or ELECTRA's."""
    if kind == "mlm":
        return build_bert_pretrainer(
            vocabulary_size,
            settings.sequence_length,
            settings.max_predictions,
            **settings.model,
            dropout=dropout,
            next_sentence=False,
        )
    return ElectraPretrainer(
        vocabulary_size,
        settings.sequence_length,
        settings.max_predictions,
        **settings.model,
        dropout=dropout,
        generator_fraction=0.25,
    )


def compiled(model, kind, updates, settings):
    """`model` compiled with notebook 08's AdamW and warm-up / hold / cosine-decay schedule over `updates`."""
    warmup = min(settings.warmup_steps, updates // 4)
    decay = max(1, int(updates * settings.decay_fraction))
    schedule = WarmupCosineDecay(settings.learning_rate, warmup, updates, hold_steps=max(0, updates - warmup - decay))
    if kind == "mlm":
        losses, weights = {"mlm": MaskedCrossEntropy()}, None
    else:
        losses = {"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()}
        weights = {"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT}
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
        loss=losses,
        loss_weights=weights,
        jit_compile=settings.jit_compile,
    )
    return model


def batches(kind, segments, vocabulary_size, settings, per_round):
    kind_of_batches = PretrainingBatches if kind == "mlm" else ElectraBatches
    arguments = (segments, None, None) if kind == "mlm" else (segments, None)
    return kind_of_batches(
        *arguments,
        settings.batch_size,
        vocabulary_size,
        MASK,
        (CLS, SEP),
        settings.max_predictions,
        seed=0,
        batches_per_epoch=per_round,
    )


def pretrain(kind, segments, vocabulary_size, settings, minutes, timing_steps):
    """Time `kind`'s step, then pre-train for `minutes` worth of its updates: (model, facts)."""
    model = compiled(pretrainer(kind, vocabulary_size, settings, 0.0), kind, 1000, settings)
    timing = batches(kind, segments, vocabulary_size, settings, None)
    model.train_on_batch(*timing[0])  # compiles: not timed
    started = time.perf_counter()
    for step in range(1, timing_steps + 1):
        model.train_on_batch(*timing[step])
    seconds_per_update = (time.perf_counter() - started) / timing_steps
    rounds = 4
    per_round = max(1, int(minutes * 60 / seconds_per_update) // rounds)
    keras.utils.set_random_seed(0)
    model = compiled(pretrainer(kind, vocabulary_size, settings, 0.0), kind, per_round * rounds, settings)
    started = time.perf_counter()
    history = model.fit(batches(kind, segments, vocabulary_size, settings, per_round), epochs=rounds, verbose=2)
    return model, {
        "seconds_per_update": seconds_per_update,
        "updates": per_round * rounds,
        "seconds": time.perf_counter() - started,
        "last_loss": history.history["loss"][-1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full", choices=("full", "smoke"))
    parser.add_argument("--minutes", type=float, default=15.0, help="pre-training minutes per objective")
    parser.add_argument("--timing-steps", type=int, default=10)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--labels", default="200,1000", help="label sizes; the learning rate is chosen at 1,000")
    options = parser.parse_args()
    settings = profile(options.profile).notebook("08")
    seeds = [int(seed) for seed in options.seeds.split(",")]
    label_sizes = [int(size) for size in options.labels.split(",")]
    minutes = options.minutes if options.profile == "full" else 0.05

    held_out, texts = pretraining_text(settings)
    texts = texts if settings.pretraining_reviews is None else texts[: settings.pretraining_reviews - len(held_out)]
    vocabulary, tokenize = word_pieces(settings, texts)
    segments = contiguous_segments(tokenize(texts), settings.sequence_length, CLS, SEP)
    trained = {
        name: pretrain(kind, segments, len(vocabulary), settings, minutes, options.timing_steps)
        for name, kind in ARMS.items()
    }

    train, test = load_imdb()
    if options.profile == "smoke":
        train = type(train)(train.texts[:600], train.labels[:600])
        test = type(test)(test.texts[:300], test.labels[:300])

    def inputs(split_texts):
        return pack_single(
            tokenize([text.replace("<br />", " ") for text in split_texts]), CLS, SEP, settings.sequence_length
        )

    labelled, test_inputs = inputs(train.texts), inputs(test.texts)
    order = np.random.default_rng(1234).permutation(len(train.labels))  # notebook 08's split
    validation_rows, pool = order[: settings.label_validation_reviews], order[settings.label_validation_reviews :]
    test_rows = np.arange(min(settings.test_sample, len(test.labels)))

    def take(data, rows):
        return {key: value[rows] for key, value in data.items()}

    runs = {}

    def fine_tune(name, size, seed, learning_rate):
        """Notebook 08's fine-tuning of arm `name`: (validation accuracy at the best epoch, test accuracy)."""
        if (name, size, seed, learning_rate) not in runs:
            started = time.perf_counter()
            keras.utils.set_random_seed(seed)
            chosen = pool[np.random.default_rng(seed).permutation(len(pool))[:size]]
            encoder = pretrainer(ARMS[name], len(vocabulary), settings, settings.encoder_dropout)
            encoder.set_weights(trained[name][0].get_weights())
            model = build_bert_classifier(encoder, 2, dropout=settings.classifier_dropout, pooling="mean")
            steps = -(-len(chosen) // settings.fine_tune_batch_size)
            epochs = int(
                np.clip(
                    np.ceil(settings.fine_tune_updates / steps),
                    settings.fine_tune_min_epochs,
                    settings.fine_tune_max_epochs,
                )
            )
            schedule = WarmupLinearDecay(learning_rate, int(settings.warmup_fraction * steps * epochs), steps * epochs)
            model.compile(
                optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                jit_compile=settings.jit_compile,
            )
            model, history, facts = fit_best(
                model,
                (take(labelled, chosen), train.labels[chosen]),
                (take(labelled, validation_rows), train.labels[validation_rows]),
                epochs=epochs,
                patience=settings.fine_tune_patience,
                batch_size=settings.fine_tune_batch_size,
                validation_batch_size=256,
            )
            test_accuracy = model.evaluate(
                take(test_inputs, test_rows), test.labels[test_rows], batch_size=256, verbose=0
            )[1]
            runs[name, size, seed, learning_rate] = (
                history.history["val_accuracy"][facts["best_epoch"] - 1],
                float(test_accuracy),
                time.perf_counter() - started,
            )
        return runs[name, size, seed, learning_rate]

    grid_labels = 1000 if options.profile == "full" else settings.grid_labels
    rate = {
        name: max(settings.learning_rates, key=lambda r, name=name: fine_tune(name, grid_labels, 0, r)[0])
        for name in ARMS
    }
    accuracy = {
        (name, size): np.array([fine_tune(name, size, seed, rate[name])[1] for seed in seeds])
        for size in (label_sizes if options.profile == "full" else [settings.grid_labels])
        for name in ARMS
    }

    machine = hardware()
    print(
        f"\nELECTRA against the masked LM at equal pre-training minutes ({options.profile} profile of notebook 08): "
        f"{len(segments):,} pre-training inputs of {settings.sequence_length}; encoder {settings.model}"
    )
    print(
        f"machine: {machine['processor']}, {machine['cpu_count']} CPU cores; Keras {keras.__version__}, "
        f"TensorFlow {tf.__version__}, NumPy {np.__version__}"
    )
    for name, (model, facts) in trained.items():
        print(
            f"  {name:<9} {model.count_params():>9,} parameters while pre-training, "
            f"{facts['seconds_per_update']:.3f} s an update -> {facts['updates']:,} updates "
            f"({facts['seconds'] / 60:.1f} min of training), last round's loss {facts['last_loss']:.3f}"
        )
    for name in ARMS:
        grid = ", ".join(f"{r:g}: {fine_tune(name, grid_labels, 0, r)[0]:.2%}" for r in settings.learning_rates)
        print(f"  {name:<9} validation accuracy by fine-tuning rate (seed 0): {grid} -> {rate[name]:g}")
    record = load_record("08_bert_pretraining")
    for size in sorted({size for _, size in accuracy}):
        mlm, electra = accuracy["masked LM", size], accuracy["ELECTRA", size]
        print(f"  {size:>5,} labels, test accuracy on {len(test_rows):,} reviews, seeds {seeds}:")
        for name, scores in (("masked LM", mlm), ("ELECTRA", electra)):
            print(f"      {name:<9} {', '.join(f'{value:.2%}' for value in scores)}  (mean {scores.mean():.2%})")
        seconds = [runs[key][2] for key in runs if key[1] == size]
        print(
            f"      fine-tuning runs at {size:,} labels: {np.mean(seconds):.0f} s each on average "
            f"(compiling and scoring included, {len(seconds)} runs)"
        )
        differences = (electra - mlm) * 100
        print(
            f"      ELECTRA minus masked LM, per seed: {', '.join(f'{d:+.1f}' for d in differences)} points "
            f"(mean {differences.mean():+.1f})"
        )
        if record is not None and f"fine_tuned_{size}_scratch" in record["metrics"]:
            print(
                f"      from scratch, notebook 08's recorded run (same protocol and seeds): "
                f"{record['metrics'][f'fine_tuned_{size}_scratch']['value']:.2%}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
