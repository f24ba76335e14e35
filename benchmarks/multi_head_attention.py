"""Time the course's two attention layers against Keras' own, side by side.

Our MultiHeadAttention against keras.layers.MultiHeadAttention (self-attention), and our
GroupedQueryAttention against keras.layers.GroupQueryAttention (causal self-attention, a
quarter as many key/value heads as query heads): forward and backward passes on the same inputs
and the same weights, each layer compiled with tf.function, the four steps' repetitions
interleaved so all see the same machine load. Prints the median time of each and the ratio ours
/ Keras per layer (the course's target: at most 1.10 for both).

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

from transformer_course.attention import GroupedQueryAttention, MultiHeadAttention  # noqa: E402


def compiled_step(layer, inputs, **call_arguments):
    """A tf.function running forward and backward through `layer` on `inputs` (self-attention)."""

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            output = layer(inputs, inputs, **call_arguments)
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
    inputs = tf.constant(
        np.random.default_rng(0).normal(size=(arguments.batch, arguments.length, arguments.width)).astype("float32")
    )
    groups = max(1, arguments.heads // 4)
    pairs = {  # layer: (Keras' layer, ours, call arguments)
        "MultiHeadAttention": (
            keras.layers.MultiHeadAttention(num_heads=arguments.heads, key_dim=key_dim),
            MultiHeadAttention(num_heads=arguments.heads, key_dim=key_dim),
            {},
        ),
        "GroupedQueryAttention": (
            keras.layers.GroupQueryAttention(
                head_dim=key_dim, num_query_heads=arguments.heads, num_key_value_heads=groups
            ),
            GroupedQueryAttention(head_dim=key_dim, num_query_heads=arguments.heads, num_key_value_heads=groups),
            {"use_causal_mask": True},
        ),
    }
    steps = {}
    for name, (reference, ours, call_arguments) in pairs.items():
        reference(inputs, inputs)
        ours(inputs, inputs)
        ours.set_weights(reference.get_weights())
        np.testing.assert_allclose(
            ours(inputs, inputs, **call_arguments).numpy(),
            reference(inputs, inputs, **call_arguments).numpy(),
            atol=1e-4,
        )
        steps[(name, "keras")] = compiled_step(reference, inputs, **call_arguments)
        steps[(name, "ours")] = compiled_step(ours, inputs, **call_arguments)
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
    print(
        f"forward+backward, B={arguments.batch} T={arguments.length} E={arguments.width} N={arguments.heads} "
        f"(G={groups} key/value heads for grouped queries), {arguments.repeats} interleaved repeats"
    )
    print(
        f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    )
    medians = {name: statistics.median(values) for name, values in times.items()}
    for layer in pairs:
        print(layer)
        for side in ("keras", "ours"):
            print(
                f"  {side:<6} median {1000 * medians[(layer, side)]:8.1f} ms  "
                f"(min {1000 * min(times[(layer, side)]):.1f} ms)"
            )
        ratio = medians[(layer, "ours")] / medians[(layer, "keras")]
        print(f"  ratio ours / keras = {ratio:.3f}  (target <= 1.10: {'met' if ratio <= 1.10 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
