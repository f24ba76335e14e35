"""The cost of one update of each notebook's main training step, on this CPU: what a full run takes here.

Every full-profile training amount is a number of updates (or epochs), the same on every machine; what
differs between machines is the seconds an update takes. This script builds each notebook's main model
at its full-profile sizes, on random token ids of its shapes, compiled as the notebook compiles it, and
times its update (Keras' ``train_on_batch``): one untimed call to compile, then ``--repeats`` timed
calls of every step interleaved, so that a busy moment slows all alike; the median of each is kept.

* 01  the LSTM encoder-decoder at the lesson's size (batches of 10 sequences of 4) and at the bottleneck
      sweep's longest length (batches of 32 sequences of 20, 64 units);
* 02  the same with dot-product attention, at the lesson's size and the length sweep's longest;
* 06  the IMDB Transformer classifier with positions (batches of 32 reviews at the longest bucket, 600
      tokens: an upper bound; XLA);
* 07  the English-to-Spanish encoder-decoder (batches of 128 pairs at the longest bucket, source 20 and
      target 22 tokens: an upper bound, where the notebook's batches grouped by length average about 8);
* 08  the masked LM and ELECTRA (batches of 64 inputs of 128 pieces; XLA);
* 09  the decoder at each width of the IsoFLOP sweep (batches of 32 rows of 256 BPE tokens; XLA);
* 11  the Llama-style decoder with rotary positions (batches of 32 rows of 256; XLA), also 12's base;
* 10  the Vision Transformer on 8×8 digits (batches of 128, 2×2 patches; XLA);
* 13  the Llama-style decoder over characters (batches of 32 rows of 128; XLA).

The table printed is appended to ``results/benchmarks/update_costs.txt`` with the CPU's model name and
its vector extensions (AVX-512 or AVX2 only), one block a machine: with the updates each notebook makes
(from its record) it gives a notebook's training minutes on each CPU class seen.

    .venv/bin/python benchmarks/update_costs.py [--repeats 5] [--no-append]
"""

import argparse
import datetime
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _timing import interleaved_seconds

from transformer_course import profile
from transformer_course.bert import build_bert_pretrainer
from transformer_course.classifier import build_sentiment_classifier
from transformer_course.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraBatches,
    ElectraPretrainer,
    ReplacedTokenDetectionLoss,
)
from transformer_course.language_model import build_language_model
from transformer_course.metrics import MaskedCrossEntropy
from transformer_course.pretraining import PretrainingBatches
from transformer_course.seq2seq import build_attention_encoder_decoder, build_encoder_decoder
from transformer_course.tooling.runtime import hardware, vector_extensions
from transformer_course.translation import build_translation_model
from transformer_course.vision import VisionTransformer

RESULTS = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "update_costs.txt"


def cpu_description() -> str:
    """The CPU's model name, its class by vector extensions (AVX-512 or AVX2 only) and its cores."""
    name = hardware()["processor"]
    return f"{name}, {vector_extensions() or 'vector extensions unknown'}, {os.cpu_count()} cores"


def _ids(rng, rows, length, vocabulary):
    return rng.integers(1, vocabulary, size=(rows, length)).astype("int32")


def _language_model_step(rng, vocabulary, length, batch, jit, **architecture):
    keras.utils.set_random_seed(0)
    model = build_language_model(vocabulary, length, **architecture)
    model.compile(optimizer="adamw", loss=MaskedCrossEntropy(), jit_compile=jit)
    rows = _ids(rng, batch, length, vocabulary)
    return lambda: model.train_on_batch(rows, rows)


def _one_hot(rng, rows, length, features):
    return np.eye(features, dtype="float32")[rng.integers(1, features, size=(rows, length))]


def _reversal_step(rng, length, features, units, batch, attention):
    """01's or 02's encoder-decoder, on one-hot sequences and their reversals."""
    keras.utils.set_random_seed(0)
    if attention:
        model, _ = build_attention_encoder_decoder(length, features, units, score="dot")
    else:
        model = build_encoder_decoder(length, features, units=units)
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    inputs = _one_hot(rng, batch, length, features)
    return lambda: model.train_on_batch(inputs, inputs[:, ::-1])


def steps() -> dict:
    """Each notebook's update, compiled and called once: name -> a callable making one update."""
    rng, built = np.random.default_rng(0), {}
    full = profile("full")

    for notebook, attention in (("01", False), ("02", True)):
        settings = full.notebook(notebook)
        built[f"{notebook} lesson"] = _reversal_step(
            rng, settings.n_timesteps_in, settings.n_features, settings.units, settings.batch_size, attention
        )
        built[f"{notebook} sweep, length {max(settings.sweep_lengths)}"] = _reversal_step(
            rng, max(settings.sweep_lengths), settings.sweep_n_features, settings.sweep_units,
            settings.sweep_batch_size, attention,
        )  # fmt: skip

    settings = full.notebook("06")
    keras.utils.set_random_seed(0)
    classifier = build_sentiment_classifier(settings.max_tokens, settings.sequence_length, **settings.model)
    classifier.compile(optimizer="rmsprop", loss="binary_crossentropy", jit_compile=settings.jit_compile)
    reviews = _ids(rng, settings.batch_size, settings.sequence_length, settings.max_tokens)
    sentiments = rng.integers(0, 2, size=(settings.batch_size, 1)).astype("float32")
    built["06 classifier"] = lambda: classifier.train_on_batch(reviews, sentiments)

    settings = full.notebook("07")  # the recorded run's vocabularies and lengths
    keras.utils.set_random_seed(0)
    translation = build_translation_model(12004, 15000, 20, 22, **settings.model)
    translation.compile(optimizer="adam", loss=MaskedCrossEntropy(label_smoothing=settings.label_smoothing))
    pairs = {
        "source_ids": _ids(rng, settings.batch_size, 20, 12004),
        "target_ids": _ids(rng, settings.batch_size, 22, 15000),
    }
    targets = _ids(rng, settings.batch_size, 22, 15000)
    built["07 translation"] = lambda: translation.train_on_batch(pairs, targets)

    settings = full.notebook("08")
    vocabulary, length, chosen = settings.vocabulary_size, settings.sequence_length, settings.max_predictions
    rows = _ids(rng, settings.batch_size * 4, length, vocabulary)
    rows[:, 0], rows[:, -1] = 2, 3
    mlm_batches = PretrainingBatches(rows, None, None, settings.batch_size, vocabulary, 4, (2, 3), chosen, seed=0)
    electra_batches = ElectraBatches(rows, None, settings.batch_size, vocabulary, 4, (2, 3), chosen, seed=0)
    keras.utils.set_random_seed(0)
    mlm = build_bert_pretrainer(vocabulary, length, chosen, **settings.model, dropout=0.0, next_sentence=False)
    mlm.compile(optimizer="adamw", loss={"mlm": MaskedCrossEntropy()}, jit_compile=settings.jit_compile)
    built["08 masked LM"] = lambda: mlm.train_on_batch(*mlm_batches[0])
    keras.utils.set_random_seed(0)
    electra = ElectraPretrainer(vocabulary, length, chosen, **settings.model, dropout=0.0,
                                generator_fraction=settings.generator_fraction)  # fmt: skip
    electra.compile(
        optimizer="adamw",
        loss={"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()},
        loss_weights={"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT},
        jit_compile=settings.jit_compile,
    )
    built["08 ELECTRA"] = lambda: electra.train_on_batch(*electra_batches[0])

    settings = full.notebook("09")
    vocabulary = 256 + settings.merges + 2  # padding, bytes, merges, <|endoftext|>
    for width in settings.sweep_embed_dims:
        architecture = {**settings.model, "embed_dim": width, "intermediate_dim": 4 * width}
        built[f"09 width {width}"] = _language_model_step(
            rng, vocabulary, settings.chunk_length, settings.batch_size, settings.jit_compile, **architecture
        )

    settings = full.notebook("10")
    keras.utils.set_random_seed(0)
    vit = VisionTransformer(image_size=8, channels=1, patch_size=settings.patch_size, num_classes=10, **settings.model)
    vit.compile(
        optimizer=keras.optimizers.AdamW(settings.learning_rate, weight_decay=settings.weight_decay),
        loss="sparse_categorical_crossentropy",
        jit_compile=settings.jit_compile,
    )
    images = rng.random((settings.batch_size, 8, 8, 1)).astype("float32")
    digits = rng.integers(0, 10, size=settings.batch_size)
    built["10 ViT"] = lambda: vit.train_on_batch(images, digits)

    settings = full.notebook("11")
    built["11 Llama, rotary"] = _language_model_step(
        rng, 256 + settings.merges + 2, settings.chunk_length, settings.batch_size, settings.jit_compile,
        architecture="llama", intermediate_dim=settings.intermediate_dim,
        num_key_value_heads=settings.num_key_value_heads, **settings.model,
    )  # fmt: skip

    settings = full.notebook("13")
    built["13 Llama, characters"] = _language_model_step(
        rng, 258, settings.sequence_length, settings.batch_size, settings.jit_compile, architecture="llama",
        dropout=0.0, intermediate_dim=settings.intermediate_dim, num_key_value_heads=settings.num_key_value_heads,
        **settings.model,
    )  # fmt: skip
    for step in built.values():  # compiles
        step()
    return built


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed updates of each step (default 5)")
    parser.add_argument("--no-append", action="store_true", help=f"print only; do not append to {RESULTS.name}")
    arguments = parser.parse_args()
    seconds = interleaved_seconds(steps(), arguments.repeats)
    lines = [
        f"## {cpu_description()}",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}, Keras {keras.__version__} on "
        f"{keras.backend.backend()}, median of {arguments.repeats} interleaved updates each",
        f"{'step':<24}{'seconds an update':>19}",
        *(f"{name:<24}{float(np.median(values)):>19.3f}" for name, values in seconds.items()),
        "",
    ]
    print("\n".join(lines))
    if not arguments.no_append:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        print(f"appended to {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
