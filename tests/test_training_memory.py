"""What training holds in memory, by ZeRO stage; gradient accumulation as one larger batch on one device."""

import keras
import numpy as np
import pytest

from transformer_course.parallel import training_memory


def test_adamw_in_float32_costs_16_bytes_a_parameter_and_zero_shards_stage_by_stage():
    parameters, devices = 1_000_000, 4
    plain = training_memory(parameters, devices)
    assert plain == {"weights": 4e6, "gradients": 4e6, "optimizer states": 8e6, "total": 16e6}  # replicated
    stages = [training_memory(parameters, devices, stage)["total"] / parameters for stage in (0, 1, 2, 3)]
    assert stages == [16.0, 4 + 4 + 8 / 4, 4 + 4 / 4 + 8 / 4, 16 / 4]  # ZeRO, figure 1: P_os, P_os+g, P_os+g+p
    assert training_memory(parameters, 1, 3)["total"] == plain["total"]  # one device: nothing to shard across
    assert training_memory(parameters, optimizer_states=0)["total"] == 8e6  # plain SGD: weights and gradients
    with pytest.raises(ValueError, match="`zero_stage` must be one of \\(0, 1, 2, 3\\); received 4"):
        training_memory(parameters, zero_stage=4)
    with pytest.raises(ValueError, match="`devices` must be"):
        training_memory(parameters, devices=0)


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(1)])
    return model


def test_gradient_accumulation_over_micro_batches_is_one_update_on_their_union():
    # Data parallelism's average of D shards' gradients, on one device in turn: Keras' optimizer sums the
    # gradients of `gradient_accumulation_steps` micro-batches and applies their mean once, so for a loss that
    # is a mean over rows, 4 micro-batches of 4 rows make the update of one batch of 16.
    rng = np.random.default_rng(1)
    inputs, targets = rng.normal(size=(16, 6)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")
    whole, accumulated = _model(), _model()
    whole.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    accumulated.compile(optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=4), loss="mse")
    whole.fit(inputs, targets, batch_size=16, epochs=1, shuffle=False, verbose=0)
    for step in range(3):  # three micro-batches: the gradients are summed, the weights not yet changed
        accumulated.train_on_batch(inputs[4 * step : 4 * step + 4], targets[4 * step : 4 * step + 4])
    np.testing.assert_allclose(accumulated.get_weights()[0], _model().get_weights()[0], atol=0)
    accumulated.train_on_batch(inputs[12:], targets[12:])
    for ours, theirs in zip(accumulated.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(ours, theirs, atol=1e-6)
