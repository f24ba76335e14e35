"""Data parallelism: the same training steps on one device and on several (notebook 12).

Each of D devices holds a copy of every weight and takes 1/D of each batch; the gradients are
averaged across the devices before the update, so with the same global batch the updates (and
the losses) are those of one device, up to float rounding in the order of the sums. Keras
expresses this as a *distribution* (``keras.distribution.DataParallel``, JAX backend) set before
the model is built; the training code does not change.

Run as a program on a machine without several accelerators, XLA can pretend to have them:
``XLA_FLAGS=--xla_force_host_platform_device_count=4 KERAS_BACKEND=jax python -m
transformer_course.parallel --steps 6`` prints one JSON line with both runs' losses and step
times (Keras' own tests use the same virtual CPU devices).

References:
    Keras, "Distributed training with Keras 3" (keras.io/guides/distribution), ``DataParallel``
    and ``DeviceMesh``; Goyal et al., 2017, "Accurate, Large Minibatch SGD", §2 (data
    parallelism with the global batch split across workers).
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import argparse
import json
import sys
import time

import keras
import numpy as np

from ._validation import check_integer
from .language_model import LanguageModel
from .metrics import MaskedCrossEntropy

__all__ = ["training_memory", "training_losses", "main"]

ZERO_STAGES = (0, 1, 2, 3)


def training_memory(
    parameters: int, devices: int = 1, zero_stage: int = 0, bytes_per_number: int = 4, optimizer_states: int = 2
) -> dict[str, float]:
    """The bytes one device holds to train a model: its weights, their gradients, the optimizer's states.

    Training with AdamW keeps, for every parameter, the weight, its gradient and two moments (the
    running mean and mean square of the gradient): four numbers, 16 bytes in float32, before a
    single activation. Data parallelism replicates all four on every device. ZeRO (Rajbhandari et
    al., 2020) removes the copies, stage by stage: stage 1 shards the optimizer's states across
    the D devices (each keeps 1/D and updates that share of the weights), stage 2 the gradients too,
    stage 3 the weights too (each layer's weights gathered when it runs). Activations, which grow
    with the batch and the length, are not counted.

    Args:
        parameters: int >= 1, the model's trainable parameters.
        devices: int D >= 1, data-parallel devices.
        zero_stage: 0 (plain data parallelism), 1, 2 or 3.
        bytes_per_number: int >= 1, 4 for float32 (mixed-precision training keeps 2-byte weights and
            gradients but 4-byte master weights and moments: ZeRO's own count, §3.1, is 16 bytes a
            parameter too).
        optimizer_states: int >= 0, numbers the optimizer keeps a parameter (AdamW 2, SGD with
            momentum 1, SGD 0).

    Returns:
        dict of float bytes on one device: ``"weights"``, ``"gradients"``, ``"optimizer states"``
        and ``"total"``.

    Raises:
        ValueError: naming the argument, for a size below 1 or an unknown ``zero_stage``.

    Source: Rajbhandari et al., 2020, "ZeRO: Memory Optimizations Toward Training Trillion
    Parameter Models", §5 and figure 1 (the stages P_os, P_os+g, P_os+g+p).

    Example:
        >>> memory = training_memory(1_000_000)
        >>> memory["total"] / 1_000_000  # bytes a parameter: weight, gradient, two moments
        16.0
        >>> training_memory(1_000_000, devices=4, zero_stage=3)["total"] / 1_000_000
        4.0
    """
    parameters = check_integer("parameters", parameters)
    devices = check_integer("devices", devices)
    bytes_per_number = check_integer("bytes_per_number", bytes_per_number)
    optimizer_states = check_integer("optimizer_states", optimizer_states, minimum=0)
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"`zero_stage` must be one of {ZERO_STAGES}; received {zero_stage!r}.")
    each = parameters * bytes_per_number

    def share(sharded_from):  # a copy on every device, or 1/D of it from this stage on
        return each / devices if zero_stage >= sharded_from else float(each)

    memory = {"weights": share(3), "gradients": share(2), "optimizer states": optimizer_states * share(1)}
    return memory | {"total": sum(memory.values())}


def training_losses(distribution, steps: int, batch_size: int = 16, length: int = 64, seed: int = 0) -> dict:
    """Train a small Llama-style language model ``steps`` steps under ``distribution``; its losses and times.

    The model (vocabulary 500, width 64, 2 blocks, 4 query heads, 2 key/value heads), its initial
    weights and the batches (random ids, each row's targets its ids moved one place left) depend
    on ``seed`` only, so two calls with different distributions train the same model on the same
    data.

    Args:
        distribution: a ``keras.distribution.Distribution`` (``DataParallel(devices=...)``), or
            None for one device.
        steps: int ≥ 1, training steps (AdamW, learning rate 1e-3), one batch each.
        batch_size: int, the **global** batch: split across the devices under data parallelism.
        length: int, tokens a row.
        seed: int.

    Returns:
        dict: ``losses`` (list of float, one per step, the batch's mean loss before its update)
        and ``seconds`` (list of float, each step's wall-clock time; the first includes compiling).

    Raises:
        ValueError: for a non-positive ``steps``, ``batch_size`` or ``length``.

    Example:
        >>> result = training_losses(None, steps=2, batch_size=4, length=8)
        >>> len(result["losses"]), all(loss > 0 for loss in result["losses"])
        (2, True)
    """
    steps, batch_size = check_integer("steps", steps), check_integer("batch_size", batch_size)
    length = check_integer("length", length)
    rows = np.random.default_rng(seed).integers(1, 500, (steps * batch_size, length + 1)).astype("int32")
    keras.distribution.set_distribution(distribution)
    try:
        keras.utils.set_random_seed(seed)
        model = LanguageModel(
            500,
            length,
            embed_dim=64,
            intermediate_dim=176,
            num_heads=4,
            num_layers=2,
            dropout=0.0,
            architecture="llama",
            num_key_value_heads=2,
        )
        model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss=MaskedCrossEntropy())
        losses, seconds = [], []
        for step in range(steps):
            batch = rows[step * batch_size : (step + 1) * batch_size]
            started = time.perf_counter()
            losses.append(float(model.train_on_batch(batch[:, :-1], batch[:, 1:])))
            seconds.append(time.perf_counter() - started)
    finally:
        keras.distribution.set_distribution(None)
    return {"losses": losses, "seconds": seconds}


def main(argv=None) -> None:
    """``python -m transformer_course.parallel``: one device, then all devices, as one JSON line.

    Prints ``{"backend", "devices", "one_device", "data_parallel"}``, the last two as
    :func:`training_losses` returns them. Needs the JAX backend (``KERAS_BACKEND=jax``).

    Raises:
        SystemExit: with a message, on another backend.
    """
    parser = argparse.ArgumentParser(prog="python -m transformer_course.parallel", description=main.__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16)
    arguments = parser.parse_args(argv)
    if keras.backend.backend() != "jax":
        raise SystemExit(
            f"keras.distribution's DataParallel needs KERAS_BACKEND=jax; this is {keras.backend.backend()}."
        )
    devices = keras.distribution.list_devices()
    one = training_losses(None, arguments.steps, arguments.batch_size)
    many = training_losses(keras.distribution.DataParallel(devices=devices), arguments.steps, arguments.batch_size)
    print(
        json.dumps({"backend": keras.backend.backend(), "devices": devices, "one_device": one, "data_parallel": many})
    )


if __name__ == "__main__":
    # As a program (on JAX): keras.utils.set_random_seed imports TensorFlow, where it is installed, only to seed
    # it; nothing here uses it, and starting it took a third of the program's time (8 of 25 s of a core, 2 cores).
    sys.modules.setdefault("tensorflow", None)
    main()
