import pytest

from transformer_course import PROFILE_NAMES, profile
from transformer_course.tooling.profiles import _SETTINGS


def test_default_profile_is_full(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert profile().name == "full"
    assert profile().is_full


def test_environment_variable_selects_profile(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    assert profile().name == "smoke"
    assert not profile().is_full


def test_argument_wins_over_environment(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    assert profile("full").name == "full"


@pytest.mark.parametrize("source", ["argument", "environment"])
def test_unknown_profile_lists_the_valid_ones(monkeypatch, source):
    if source == "environment":
        monkeypatch.setenv("COURSE_PROFILE", "fast")
        call = profile
    else:
        call = lambda: profile("fast")  # noqa: E731
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert "'fast'" in message and "full" in message and "smoke" in message
    assert ("COURSE_PROFILE" in message) == (source == "environment")


def test_the_smoke_profile_only_overrides_settings_the_full_profile_has():
    from transformer_course.tooling.profiles import _SMOKE_OVERRIDES

    assert set(PROFILE_NAMES) == {"full", "smoke"}
    full, smoke = _SETTINGS["full"], _SETTINGS["smoke"]
    assert full.keys() == smoke.keys() and set(_SMOKE_OVERRIDES) <= set(full)
    for notebook, overrides in _SMOKE_OVERRIDES.items():
        assert set(overrides) <= set(full[notebook]), (notebook, set(overrides) - set(full[notebook]))
        for key, value in full[notebook].items():
            if isinstance(value, dict):  # a group (the architecture) is overridden key by key
                assert set(overrides.get(key, {})) <= set(value), (notebook, key)
                assert smoke[notebook][key] == {**value, **overrides.get(key, {})}, (notebook, key)
            else:
                assert smoke[notebook][key] == overrides.get(key, value), (notebook, key)


def test_the_architecture_is_one_read_only_group_a_builder_takes_whole():
    from transformer_course.language_model import build_language_model

    settings = profile("smoke").notebook("09")
    assert dict(settings.model) == {
        "embed_dim": 32,
        "num_heads": 2,
        "intermediate_dim": 64,
        "num_layers": 1,
        "dropout": 0.0,
    }  # the smoke sizes, and the full profile's dropout
    assert settings.model.embed_dim == settings.model["embed_dim"] == 32
    assert build_language_model(100, settings.chunk_length, **settings.model).count_params() > 0
    with pytest.raises(TypeError):
        settings.model["embed_dim"] = 64  # read-only, like the settings around it
    with pytest.raises(AttributeError, match="no setting 'model.embed_dims'.*model.embed_dim"):
        _ = settings.model.embed_dims


def test_settings_read_as_attributes_and_reject_unknown_keys():
    settings = profile("smoke").notebook("01")
    assert settings.n_features == settings["n_features"] == 10
    with pytest.raises(AttributeError, match="has no setting 'learning_rat'"):
        _ = settings.learning_rat
    with pytest.raises(ValueError, match="notebook_id"):
        profile("smoke").notebook("99")


def test_full_profile_uses_the_lecture_notes_setup():
    settings = profile("full").notebook("01")
    assert (settings.n_timesteps_in, settings.n_features) == (4, 10)
    assert (settings.train_size, settings.test_size) == (2000, 200)
    assert 20 in settings.sweep_lengths and settings.sweep_n_features == 16


def test_only_the_smoke_profile_runs_tensorflow_functions_eagerly():
    assert profile("smoke").eager_functions and not profile("full").eager_functions


@pytest.mark.tensorflow
def test_start_notebook_sets_tensorflow_functions_eager_in_smoke_and_traced_in_full(monkeypatch, capsys):
    import tensorflow as tf

    from transformer_course import start_notebook

    try:
        for name, eager in (("smoke", True), ("full", False)):
            monkeypatch.setenv("COURSE_PROFILE", name)
            start_notebook("01")
            assert tf.config.functions_run_eagerly() is eager
            assert ("functions run eagerly" in capsys.readouterr().out) is eager
    finally:
        tf.config.run_functions_eagerly(False)


def test_notebook_12s_base_trains_at_the_rate_notebook_11s_ablation_chose():
    """12's base is 11's rotary arm trained longer: its peak rate is the one 11's recorded run chose."""
    from pathlib import Path

    from transformer_course import load_record

    record = load_record("11_modern_decoders", Path(__file__).resolve().parents[1] / "results")
    assert record is not None, "results/11_modern_decoders.json is missing"
    chosen = record["metrics"]["rotary_peak_learning_rate"]["value"]
    assert _SETTINGS["full"]["12"]["base_learning_rate"] == chosen


# A setting named for a clock: these words in a key, alone or as a part (``pretraining_minutes``, ``budget_seconds``).
_CLOCK_WORDS = ("minute", "second", "hour", "budget")


def _setting_paths(values, prefix=""):
    for key, value in values.items():
        yield prefix + key
        if isinstance(value, dict):
            yield from _setting_paths(value, f"{prefix}{key}.")


def _clock_settings(table):
    """The settings of ``table`` (notebook -> settings) whose names speak of a clock, less the guards."""
    return [
        f"{notebook_id}: {path}"
        for notebook_id, values in table.items()
        for path in _setting_paths(values)
        if any(word in path.rsplit(".", 1)[-1] for word in _CLOCK_WORDS) and not path.endswith("time_limit_minutes")
    ]


@pytest.mark.parametrize("profile_name", PROFILE_NAMES)
def test_no_setting_in_minutes_or_seconds_decides_how_much_a_model_trains(profile_name):
    # Training amounts are epochs, rounds and updates, so every machine trains the same; a wall-clock setting may
    # exist only as a guard that fails a run loudly (fit_best's `time_limit_minutes`), and none is needed yet.
    assert _clock_settings(_SETTINGS[profile_name]) == []


def test_the_clock_check_finds_a_budget_in_minutes_and_spares_a_guard():
    table = {"09": {"max_training_minutes": 20, "model": {"budget_seconds": 5}, "time_limit_minutes": 90}}
    assert _clock_settings(table) == ["09: max_training_minutes", "09: model.budget_seconds"]


def test_no_notebook_sizes_training_by_a_clock():
    # The notebooks' own code: no training cut by a budget in minutes, no updates counted from a timed step.
    from pathlib import Path

    for path in sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.py")):
        source = path.read_text(encoding="utf-8")
        for forbidden in ("budget_minutes", "equal_minute_budgets(", "max_training_minutes", "_minutes * 60 /"):
            assert forbidden not in source, f"{path.name} sizes training by the clock: {forbidden!r}"
