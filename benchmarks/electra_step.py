"""ELECTRA's training step against the masked LM's, and its sampler: inverse cumulative sum against Gumbel-max.

At notebook 08's sizes (full profile: WordPiece vocabulary of 8,000, inputs of 128, 20 chosen
positions, width 128, 2 blocks, batches of 64; the generator a quarter of the width), with XLA as
the notebook compiles it, one run, interleaved rounds:

* ``masked LM``              ``build_bert_pretrainer(next_sentence=False)``, one update;
* ``ELECTRA``                ``ElectraPretrainer`` (its sampler: one uniform number a position, the
                             inverse of the cumulative sum), one update;
* ``ELECTRA, Gumbel-max``    the same model with ``argmax(log p + g)`` sampling (a Gumbel number and
                             two logarithms per vocabulary id), one update;
* the two samplers alone, on the generator's (64, 20, 8000) probabilities.

The ratios say what an ELECTRA update costs in masked-LM updates: at equal pre-training minutes,
the objective with the dearer update gets fewer of them.

    .venv/bin/python benchmarks/electra_step.py
"""

import os
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _timing import interleaved_seconds
from keras import ops

from transformer_course import profile
from transformer_course.bert import build_bert_pretrainer
from transformer_course.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraBatches,
    ElectraPretrainer,
    ReplacedTokenDetectionLoss,
    ReplaceWithSamples,
)
from transformer_course.metrics import MaskedCrossEntropy
from transformer_course.pretraining import PretrainingBatches
from transformer_course.tooling.runtime import hardware

MASK = 4


class GumbelMaxSamples(ReplaceWithSamples):
    """The sampler as Gumbel-max: argmax(log p + g), g standard Gumbel, one per vocabulary id."""

    def draw(self, probabilities):
        log_probabilities = ops.log(ops.clip(ops.stop_gradient(ops.cast(probabilities, "float32")), 1e-20, 1.0))
        uniform = keras.random.uniform(ops.shape(log_probabilities), minval=1e-10, maxval=1.0, seed=self.seed_generator)
        return ops.cast(ops.argmax(log_probabilities - ops.log(-ops.log(uniform)), axis=-1), "int32")


def main() -> int:
    settings = profile("full").notebook("08")
    vocabulary = settings.vocabulary_size
    length, chosen, batch = settings.sequence_length, settings.max_predictions, settings.batch_size
    rows = np.random.default_rng(0).integers(5, vocabulary, size=(batch * 4, length)).astype("int32")
    rows[:, 0], rows[:, -1] = 2, 3
    mlm_batches = PretrainingBatches(rows, None, None, batch, vocabulary, MASK, (2, 3), chosen, seed=0)
    electra_batches = ElectraBatches(rows, None, batch, vocabulary, MASK, (2, 3), chosen, seed=0)
    keras.utils.set_random_seed(0)
    mlm = build_bert_pretrainer(vocabulary, length, chosen, **settings.model, dropout=0.0, next_sentence=False)
    mlm.compile(optimizer="adamw", loss={"mlm": MaskedCrossEntropy()}, jit_compile=settings.jit_compile)
    models = {}
    for name, sampler in (("ELECTRA", None), ("ELECTRA, Gumbel-max", GumbelMaxSamples)):
        keras.utils.set_random_seed(0)
        model = ElectraPretrainer(
            vocabulary, length, chosen, **settings.model, dropout=0.0, generator_fraction=settings.generator_fraction
        )
        if sampler is not None:  # the same model, its sampling layer drawing the other way
            layer = model.get_layer("replace_with_samples")
            layer.draw = types.MethodType(sampler.draw, layer)
        model.compile(
            optimizer="adamw",
            loss={"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()},
            loss_weights={"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT},
            jit_compile=settings.jit_compile,
        )
        models[name] = model
    steps = {"masked LM": lambda: mlm.train_on_batch(*mlm_batches[0])}
    for name, model in models.items():
        steps[name] = lambda model=model: model.train_on_batch(*electra_batches[0])
    probabilities = keras.ops.softmax(keras.random.normal((batch, chosen, vocabulary), seed=1) * 3.0)
    samplers = {
        "sampler: inverse cumulative sum": ReplaceWithSamples(seed=0).draw,
        "sampler: Gumbel-max": GumbelMaxSamples(seed=0).draw,
    }
    for function in steps.values():
        function(), function()  # compile
    sampler_calls = {
        name: (lambda draw=draw: ops.convert_to_numpy(draw(probabilities))) for name, draw in samplers.items()
    }
    for function in sampler_calls.values():
        function()
    seconds = interleaved_seconds({**steps, **sampler_calls}, repeats=15)
    machine = hardware()
    print(
        f"ELECTRA's step against the masked LM's at notebook 08's sizes ({settings.model}, vocabulary "
        f"{vocabulary:,}, batch {batch}, {length} positions, {chosen} chosen); XLA {settings.jit_compile}; "
        "median of 15 interleaved rounds"
    )
    print(f"machine: {machine['processor']}, {machine['cpu_count']} CPU cores; Keras {keras.__version__}")
    median = {name: float(np.median(values)) for name, values in seconds.items()}
    for name, value in median.items():
        ratio = f"  ({value / median['masked LM']:.2f}x the masked LM's update)" if name in steps else ""
        print(f"  {name:<32} {value * 1000:8.1f} ms{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
