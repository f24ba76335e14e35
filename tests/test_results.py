import json
import math
from pathlib import Path

import pytest

from transformer_course.tooling import results

ROOT = Path(__file__).resolve().parents[1]


def test_report_metric_prints_and_hands_the_value_to_the_runner(tmp_path, monkeypatch, capsys):
    target = tmp_path / "metrics.jsonl"
    monkeypatch.setenv(results.METRICS_FILE_VARIABLE, str(target))
    results.report_metric("accuracy", 0.5, "test accuracy", headline=True)
    results.report_metric("accuracy", 0.75, "test accuracy", headline=True)  # a later report wins
    results.report_environment({"cpu_count": 2}, {"keras": "3"})
    assert "accuracy = 0.5000" in capsys.readouterr().out
    metrics, environment = results.read_report(target)
    assert metrics == {"accuracy": {"value": 0.75, "description": "test accuracy", "headline": True}}
    assert environment == {"hardware": {"cpu_count": 2}, "versions": {"keras": "3"}}


def test_report_metric_without_a_runner_only_prints(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv(results.METRICS_FILE_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    results.report_metric("loss", 1)
    assert capsys.readouterr().out.startswith("loss = 1\n")  # an integer stays an integer
    assert list(tmp_path.iterdir()) == []


def test_a_metric_read_against_another_is_recorded_with_that_name(tmp_path, monkeypatch):
    target = tmp_path / "metrics.jsonl"
    monkeypatch.setenv(results.METRICS_FILE_VARIABLE, str(target))
    results.report_metric("pretrained", 0.8, "pre-trained", headline=True, read_against="scratch")
    results.report_metric("scratch", 0.7, "from scratch")
    metrics, _ = results.read_report(target)
    assert metrics["pretrained"]["read_against"] == "scratch" and "read_against" not in metrics["scratch"]
    for wrong in ("pretrained", 3):
        with pytest.raises(ValueError, match="`read_against` must name another metric"):
            results.report_metric("pretrained", 0.8, read_against=wrong)


@pytest.mark.parametrize("value", [math.nan, math.inf, "high", None])
def test_report_metric_rejects_non_numbers(value):
    with pytest.raises(ValueError, match="`value` must be"):
        results.report_metric("x", value)


def test_record_and_table(tmp_path):
    path = results.write_record(
        tmp_path,
        "01_example",
        profile="full",
        metrics={"acc": {"value": 0.98125, "description": "test accuracy", "headline": True}},
        seconds=125.0,
        hardware={"accelerator": None, "cpu_count": 2},
        versions={"keras": "3.15.1"},
        commit={"commit": "a" * 40, "dirty": False},
    )
    record = json.loads(path.read_text())
    for key in ("metrics", "profile", "hardware", "versions", "seconds", "commit", "finished_at"):
        assert key in record
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    table = results.results_table(results.load_records(tmp_path))
    assert "| 01_example | test accuracy | 0.9812 | full | CPU (2 cores) | 2.1 min | aaaaaaaaaa |" in table
    # A record that says which class of CPU made it (its vector extensions set TensorFlow's speed) shows it.
    results.write_record(
        tmp_path,
        "02_example",
        profile="full",
        metrics={"acc": {"value": 0.5, "description": "test accuracy", "headline": True}},
        seconds=60.0,
        hardware={"accelerator": None, "cpu_count": 2, "vectors": "AVX2, no AVX-512"},
        versions={"keras": "3.15.1"},
        commit={"commit": "b" * 40, "dirty": False},
    )
    table = results.results_table(results.load_records(tmp_path))
    assert "| 02_example | test accuracy | 0.50 | full | CPU (2 cores, AVX2, no AVX-512) | 1.0 min |" in table


def test_update_readme_table_needs_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="results-table:start"):
        results.update_readme_table(readme, tmp_path)


def test_readme_table_matches_the_recorded_results():
    """The README's table is generated from results/; regenerate it with
    `transformer-course results --update-readme README.md`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("<!-- results-table:start -->") + len("<!-- results-table:start -->")
    end = text.index("<!-- results-table:end -->")
    assert text[start:end].strip() == results.results_table(results.load_records(ROOT / "results"))


def test_integer_metrics_are_printed_and_recorded_as_integers(tmp_path, monkeypatch, capsys):
    import json

    import numpy as np

    from transformer_course.tooling import results

    target = tmp_path / "metrics.jsonl"
    monkeypatch.setenv(results.METRICS_FILE_VARIABLE, str(target))
    results.report_metric("best_epoch", np.int64(5), "epoch with the best validation loss")
    results.report_metric("accuracy", 0.5)
    assert capsys.readouterr().out.splitlines() == [
        "best_epoch = 5  (epoch with the best validation loss)",
        "accuracy = 0.5000",
    ]
    entries = [json.loads(line) for line in target.read_text().splitlines()]
    assert entries[0]["value"] == 5 and isinstance(entries[0]["value"], int)
    assert results.format_value(5) == "5" and results.format_value(0.5) == "0.50"
    assert results.format_value(29.91) == "29.91"
    assert results.format_value(0.99875) == "0.9988"


def test_a_pipe_in_a_description_does_not_split_the_table_row():
    from transformer_course.tooling import results

    record = {
        "notebook": "07_x",
        "profile": "full",
        "seconds": 60.0,
        "commit": "abc",
        "hardware": {"cpu_count": 2, "accelerator": None},
        "metrics": {"bleu": {"value": 29.91, "description": "BLEU (nrefs:1|tok:13a)", "headline": True}},
    }
    row = results.results_table([record]).splitlines()[-1]
    assert row.count(" | ") == 6 and "nrefs:1\\|tok:13a" in row and "| 29.91 |" in row


def test_atomic_writes_give_files_ordinary_permissions(tmp_path):
    import os
    import stat

    from transformer_course._files import write_text_atomically

    umask = os.umask(0o022)
    try:
        fresh = write_text_atomically(tmp_path / "new.json", "{}")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # not mkstemp's private 0600
        kept = tmp_path / "kept.json"
        kept.write_text("old")
        kept.chmod(0o640)
        write_text_atomically(kept, "new")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "new"
    finally:
        os.umask(umask)


def test_a_headline_read_against_another_metric_shows_both():
    from transformer_course.tooling import results

    record = {
        "notebook": "08_x",
        "profile": "full",
        "seconds": 60.0,
        "commit": "abc",
        "hardware": {"cpu_count": 2, "accelerator": None},
        "metrics": {
            "fine_tuned_1000_pretrained": {
                "value": 0.81234,
                "description": "pre-trained, 1,000 labels",
                "headline": True,
                "read_against": "fine_tuned_1000_scratch",
            },
            "fine_tuned_1000_scratch": {"value": 0.71234, "description": "from scratch, 1,000 labels"},
        },
    }
    row = results.results_table([record]).splitlines()[-1]
    assert "| pre-trained, 1,000 labels | 0.8123 vs 0.7123 (from scratch, 1,000 labels) |" in row
    del record["metrics"]["fine_tuned_1000_scratch"]
    assert "| 0.8123 |" in results.results_table([record]).splitlines()[-1]


def test_load_record_reads_the_checkout_first_then_the_copy_shipped_in_the_package(tmp_path, monkeypatch):
    from transformer_course.tooling import results

    packaged = tmp_path / "packaged"
    packaged.mkdir()
    (packaged / "06_x.json").write_text(json.dumps({"profile": "full", "from": "package"}))
    monkeypatch.setattr(results, "PACKAGED_RECORDS", packaged)
    assert results.load_record("06_x", tmp_path / "no_results_here")["from"] == "package"  # a pip or Colab install
    (tmp_path / "06_x.json").write_text(json.dumps({"profile": "full", "from": "checkout"}))
    assert results.load_record("06_x", tmp_path)["from"] == "checkout"
    assert results.load_record("07_missing", tmp_path) is None


def test_the_package_ships_every_full_profile_record_as_recorded():
    from pathlib import Path

    from transformer_course.tooling import results

    recorded = sorted(Path(__file__).resolve().parents[1].joinpath("results").glob("[0-9][0-9]_*.json"))
    assert recorded
    for path in recorded:
        assert (results.PACKAGED_RECORDS / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_load_record_finds_the_checkouts_results_from_any_working_folder(tmp_path, monkeypatch):
    from pathlib import Path

    from transformer_course.tooling import results

    monkeypatch.chdir(tmp_path)  # not notebooks/: "../results" would miss
    root = Path(results.__file__).resolve().parents[3]
    assert results.checkout_results() == root / "results"
    expected = json.loads((root / "results" / "06_imdb_classifier.json").read_text(encoding="utf-8"))
    assert results.load_record("06_imdb_classifier") == expected
