"""Time our MultiHeadAttention against keras.layers.MultiHeadAttention, side by side.

Forward and backward pass of self-attention on the same inputs and the same weights, each layer
compiled with tf.function, repetitions interleaved so both see the same machine load. Prints the
median time of each and the ratio ours / Keras (the course's target: at most 1.10).

    .venv/bin/python benchmarks/multi_head_attention.py [--batch 32 --length 256 --width 256 --heads 8]
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from transformer_course.tooling.runtime import hardware, import_tensorflow_quietly

tf = import_tensorflow_quietly()
import keras  # noqa: E402
import numpy as np  # noqa: E402

from transformer_course.attention import MultiHeadAttention  # noqa: E402


def compiled_step(layer, inputs):
    """A tf.function running forward and backward through `layer` on `inputs`."""

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            output = layer(inputs, inputs)
            loss = tf.reduce_mean(tf.square(output))
        return loss, tape.gradient(loss, layer.trainable_variables)

    return step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    arguments = parser.parse_args(argv)
    if arguments.width % arguments.heads:
        parser.error(f"--width {arguments.width} is not divisible by --heads {arguments.heads}")
    key_dim = arguments.width // arguments.heads

    keras.utils.set_random_seed(0)
    inputs = tf.constant(np.random.default_rng(0).normal(
        size=(arguments.batch, arguments.length, arguments.width)).astype("float32"))
    reference = keras.layers.MultiHeadAttention(num_heads=arguments.heads, key_dim=key_dim)
    ours = MultiHeadAttention(num_heads=arguments.heads, key_dim=key_dim)
    reference(inputs, inputs)
    ours(inputs, inputs)
    ours.set_weights(reference.get_weights())
    np.testing.assert_allclose(ours(inputs, inputs).numpy(), reference(inputs, inputs).numpy(), atol=1e-4)

    steps = {"keras": compiled_step(reference, inputs), "ours": compiled_step(ours, inputs)}
    for step in steps.values():  # trace and warm up
        step()
        step()
    times = {name: [] for name in steps}
    for _ in range(arguments.repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            loss, _ = step()
            loss.numpy()  # wait for the result
            times[name].append(time.perf_counter() - start)

    machine = hardware()
    print(f"MultiHeadAttention forward+backward, B={arguments.batch} T={arguments.length} "
          f"E={arguments.width} N={arguments.heads}, {arguments.repeats} interleaved repeats")
    print(f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
          f"TensorFlow {tf.__version__}, Keras {keras.__version__}")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        print(f"  {name:<6} median {1000 * median:8.1f} ms  (min {1000 * min(times[name]):.1f} ms)")
    ratio = medians["ours"] / medians["keras"]
    print(f"ratio ours / keras = {ratio:.3f}  (target <= 1.10: {'met' if ratio <= 1.10 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
