"""A rate check for notebook 08's pre-training: does the discriminator leave its floor, and at which setting?

Notebook 08's third edition pre-trained ELECTRA at the masked LM's peak rate (10⁻³, twice
ELECTRA-Small's 5·10⁻⁴, Clark et al., 2020, Table 6) with a 300-update warm-up, and its
discriminator's loss sat at the loss of a constant guess for most of the run. Before comparing
objectives, every objective gets the same short check of its own settings:

* **ELECTRA** at peak rates 10⁻³, 5·10⁻⁴ and 2.5·10⁻⁴ with the generator a quarter of the
  discriminator's width, and at the middle rate with the generator a third of it (the paper
  finds ¼ to ½ best, §3.2);
* **the masked LM** at the same three peak rates.

Each arm pre-trains notebook 08's encoder (its full-profile text, WordPiece vocabulary, inputs,
sizes and batch size) for **the same compute**: ``--updates`` masked-LM updates' worth of time.
The three kinds of step (the masked LM's, ELECTRA's with each generator width) are timed first,
interleaved, and an arm's updates are ``--updates`` times the masked LM's step over its own. A
budget in updates of a reference, not in minutes, keeps the check the same on a slower machine
(a machine of this kind ran notebook 08's steps 4.4 times slower than another did, two days
apart): only its length changes. The schedule is the notebook's, scaled to the shorter run: a
linear warm-up over the first fifth of the updates (as 1,000 of the notebook's ~5,000), the peak
held, a cosine decay over the last 15%. Then each arm is scored on notebook 08's held-out inputs:

* ELECTRA: the discriminator's held-out loss **relative to its floor** (the binary entropy of the
  replaced-token rate, ``electra.constant_guess_loss``): ``below floor`` = 1 − loss / floor, 0 for
  a discriminator that learned nothing; the ROC AUC of P(replaced) (0.5 for a guess) and the
  recall of replaced tokens; the generator's accuracy on the masked positions;
* the masked LM: its held-out masked-LM accuracy and loss.

A short screen tells which settings collapse onto the floor at the start of training, where the
third edition's run lost it (when the rate reached its peak); it does not say what 16 minutes
reach. The notebook's own run answers that, with the settings this check chose.

    .venv/bin/python benchmarks/electra_rates.py                   # 10 to 40 min on 2 cores, by the machine
    .venv/bin/python benchmarks/electra_rates.py --profile smoke   # three minutes: the code runs
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf
from masked_word_baselines import pretraining_text, word_pieces  # notebook 08's section 1 (a script beside this one)

from transformer_course import profile
from transformer_course.bert import build_bert_pretrainer
from transformer_course.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraBatches,
    ElectraPretrainer,
    ReplacedTokenDetectionLoss,
    detection_quality,
    electra_inputs,
)
from transformer_course.metrics import MaskedCrossEntropy, masked_accuracy
from transformer_course.pretraining import PretrainingBatches, contiguous_segments, gather_selected, mask_tokens
from transformer_course.tooling.runtime import hardware
from transformer_course.training import WarmupCosineDecay

PAD, UNK, CLS, SEP, MASK = range(5)  # the reserved tokens, first in the vocabulary, as in notebook 08
ARMS = (
    ("ELECTRA", 1e-3, 0.25),
    ("ELECTRA", 5e-4, 0.25),
    ("ELECTRA", 2.5e-4, 0.25),
    ("ELECTRA", 5e-4, 1 / 3),
    ("masked LM", 1e-3, None),
    ("masked LM", 5e-4, None),
    ("masked LM", 2.5e-4, None),
)
WARMUP_SHARE, DECAY_SHARE = 0.2, 0.15


def new_model(objective, vocabulary_size, settings, generator_fraction):
    if objective == "masked LM":
        return build_bert_pretrainer(
            vocabulary_size,
            settings.sequence_length,
            settings.max_predictions,
            **settings.model,
            dropout=0.0,
            next_sentence=False,
        )
    return ElectraPretrainer(
        vocabulary_size,
        settings.sequence_length,
        settings.max_predictions,
        **settings.model,
        dropout=0.0,
        generator_fraction=generator_fraction,
    )


def compiled(model, objective, peak, updates, settings):
    """`model` compiled with notebook 08's AdamW and a warm-up / hold / cosine schedule over `updates`."""
    warmup, decay = max(1, int(WARMUP_SHARE * updates)), max(1, int(DECAY_SHARE * updates))
    schedule = WarmupCosineDecay(peak, warmup, updates, hold_steps=max(0, updates - warmup - decay))
    if objective == "masked LM":
        arguments = {"loss": {"mlm": MaskedCrossEntropy()}, "metrics": {"mlm": [masked_accuracy]}}
    else:
        arguments = {
            "loss": {"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()},
            "loss_weights": {"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT},
        }
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), jit_compile=settings.jit_compile, **arguments
    )
    return model


def batches(objective, segments, vocabulary_size, settings, per_epoch=None):
    if objective == "masked LM":
        return PretrainingBatches(
            segments,
            None,
            None,
            settings.batch_size,
            vocabulary_size,
            MASK,
            (CLS, SEP),
            settings.max_predictions,
            seed=0,
            batches_per_epoch=per_epoch,
        )
    return ElectraBatches(
        segments,
        None,
        settings.batch_size,
        vocabulary_size,
        MASK,
        (CLS, SEP),
        settings.max_predictions,
        seed=0,
        batches_per_epoch=per_epoch,
    )


def step_seconds(kinds, segments, vocabulary_size, settings, timing_steps):
    """Median seconds of one update of each kind ``(objective, generator fraction)``, timed interleaved."""
    steps = {}
    for objective, fraction in kinds:
        model = compiled(new_model(objective, vocabulary_size, settings, fraction), objective, 1e-4, 1000, settings)
        data = batches(objective, segments, vocabulary_size, settings)
        model.train_on_batch(*data[0])  # compiles: not timed
        steps[objective, fraction] = (model, data)
    seconds = {kind: [] for kind in kinds}
    for step in range(1, timing_steps + 1):
        for kind, (model, data) in steps.items():
            started = time.perf_counter()
            model.train_on_batch(*data[step])
            seconds[kind].append(time.perf_counter() - started)
    return {kind: float(np.median(values)) for kind, values in seconds.items()}


def run_arm(objective, peak, fraction, updates, segments, held_out, vocabulary_size, settings):
    """Pre-train one arm for `updates` updates from seed 0, then score it on the held-out inputs."""
    keras.utils.set_random_seed(0)
    model = compiled(new_model(objective, vocabulary_size, settings, fraction), objective, peak, updates, settings)
    quarters = max(1, updates // 4)
    started = time.perf_counter()
    history = model.fit(batches(objective, segments, vocabulary_size, settings, quarters), epochs=4, verbose=0)
    trained_seconds = time.perf_counter() - started
    key = "discriminator_loss" if objective == "ELECTRA" else "loss"
    trace = [float(value) for value in history.history[key]]
    if objective == "ELECTRA":
        scores = detection_quality(model, held_out["ELECTRA"])
    else:
        inputs, targets = held_out["masked LM"]
        loss, accuracy = model.evaluate(inputs, targets, batch_size=256, verbose=0)[:2]
        scores = {"loss": float(loss), "accuracy": float(accuracy)}
    return {
        "updates": quarters * 4,
        "seconds": trained_seconds,
        "warmup": max(1, int(WARMUP_SHARE * quarters * 4)),
        "trace": trace,
        **scores,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full", choices=("full", "smoke"))
    parser.add_argument(
        "--updates", type=int, default=400, help="each arm's compute, in masked-LM updates (the smoke profile: 8)"
    )
    parser.add_argument("--timing-steps", type=int, default=10)
    options = parser.parse_args()
    settings = profile(options.profile).notebook("08")
    reference_updates = options.updates if options.profile == "full" else 8
    started = time.perf_counter()

    held_out, texts = pretraining_text(settings)
    texts = texts if settings.pretraining_reviews is None else texts[: settings.pretraining_reviews - len(held_out)]
    vocabulary, tokenize = word_pieces(settings, texts)
    segments = contiguous_segments(tokenize(texts), settings.sequence_length, CLS, SEP)
    validation = contiguous_segments(tokenize(held_out), settings.sequence_length, CLS, SEP)
    validation = validation[: settings.validation_segments]  # notebook 08's held-out inputs and blanks (seed 1)
    masked, labels, selected = mask_tokens(
        validation, np.random.default_rng(1), len(vocabulary), MASK, unselectable_token_ids=(PAD, CLS, SEP, MASK)
    )
    positions, position_labels = gather_selected(selected, labels, settings.max_predictions)
    blanks = {"token_ids": masked, "segment_ids": np.zeros_like(masked), "mask_positions": positions}
    held_out_inputs = {
        "masked LM": (blanks, {"mlm": position_labels}),
        "ELECTRA": electra_inputs(
            validation, np.random.default_rng(1), len(vocabulary), MASK, (PAD, CLS, SEP, MASK), settings.max_predictions
        )[0],
    }
    prepared = time.perf_counter() - started

    machine = hardware()
    print(
        f"Pre-training rate check for notebook 08 ({options.profile} profile): {len(segments):,} inputs of "
        f"{settings.sequence_length}, encoder {dict(settings.model)}, batch {settings.batch_size}; each arm the "
        f"time of {reference_updates:,} masked-LM updates; warm-up {WARMUP_SHARE:.0%} of an arm's updates, the "
        f"last {DECAY_SHARE:.0%} decay; held out: {len(validation):,} inputs"
    )
    print(
        f"machine: {machine['processor']}, {machine['cpu_count']} CPU cores; Keras {keras.__version__}, "
        f"TensorFlow {tf.__version__}, NumPy {np.__version__}; data and vocabulary {prepared:.0f} s",
        flush=True,
    )
    kinds = list(dict.fromkeys((objective, fraction) for objective, _, fraction in ARMS))
    seconds = step_seconds(kinds, segments, len(vocabulary), settings, options.timing_steps)
    reference = seconds["masked LM", None]
    print(
        f"one update, median of {options.timing_steps} interleaved: "
        + ", ".join(
            f"{objective}{f' (generator {fraction:.2f})' if fraction else ''} {value:.3f} s ({value / reference:.2f}x)"
            for (objective, fraction), value in seconds.items()
        ),
        flush=True,
    )
    for objective, peak, fraction in ARMS:
        updates = max(4, round(reference_updates * reference / seconds[objective, fraction]))
        facts = run_arm(objective, peak, fraction, updates, segments, held_out_inputs, len(vocabulary), settings)
        name = f"{objective}, peak {peak:.2g}" + (f", generator {fraction:.2f} wide" if fraction else "")
        line = (
            f"  {name:<44} {facts['updates']:>5,} updates (warm-up {facts['warmup']:,}), "
            f"{facts['seconds'] / 60:.1f} min"
        )
        if objective == "ELECTRA":
            line += (
                f"\n      discriminator held out: loss {facts['loss']:.4f} against its floor {facts['floor']:.4f} "
                f"(replaced rate {facts['rate']:.3f}): "
                f"{abs(facts['below_floor']):.1%} {'below' if facts['below_floor'] > 0 else 'above'} it; "
                f"AUC {facts['auc']:.3f}, recall {facts['recall']:.1%}; generator accuracy "
                f"{facts['generator_accuracy']:.1%}"
                f"\n      training loss by quarter: {', '.join(f'{value:.4f}' for value in facts['trace'])}"
            )
        else:
            line += (
                f"\n      held-out blanks: accuracy {facts['accuracy']:.1%}, loss {facts['loss']:.3f}; "
                f"training loss by quarter: {', '.join(f'{value:.3f}' for value in facts['trace'])}"
            )
        print(line, flush=True)
    print(f"whole run {(time.perf_counter() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
