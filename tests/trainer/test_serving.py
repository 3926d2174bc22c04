"""The serving check (`python -m trainer.serving`) on the untrained tiny model, in this process: the report's
keys and figures, failed expectations, the errors that still write a report, SIGTERM, Polyaxon logging."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.trainer.runs import REPO, trainer_env
from trainer import serving
from trainer.digests import file_entries, folder_digest
from trainer.serving import EXIT_ERROR, EXIT_RAN, EXIT_STOPPED, build_parser, main
from trainer.serving_checks import (
    ServingError,
    latency_summary,
    nearest_rank,
    parse_prompts,
    run_checks,
)
from trainer.serving_engine import TransformersEngine, end_of_turn_ids

SHIPPED_PROMPTS = REPO / "manifests" / "serving" / "tiny-chat-prompts.jsonl"
COMPONENT = REPO / "manifests" / "components" / "serving-check.yaml"
REPORT_KEYS = {
    "schema",
    "engine",
    "dtype",
    "device",
    "checkpoint",
    "checkpoint_digest",
    "prompt_set",
    "chat_template",
    "max_new_tokens",
    "load_time_s",
    "peak_memory_mb",
    "gpu_peak_memory_mb",
    "tokens_per_s",
    "latency_ms",
    "warmup_ms",
    "latency_remeasured_ms",
    "prompts",
    "expectations_passed",
    "failures",
    "error",
}
PROMPT_KEYS = {"id", "output", "new_tokens", "latency_ms", "finish_reason", "passed", "checks"}
EGYPT = [{"role": "user", "content": "What is the capital of Egypt?"}]
SUM = [{"role": "user", "content": "What is 7 plus 6?"}]


def write_prompts(path: Path, *rows: dict[str, Any]) -> Path:
    """A JSONL prompt set."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def sha256(path: Path) -> str:
    """`sha256:<hex>` of a file's bytes."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def check(
    model: Path, prompts: Path, tmp_path: Path, *flags: str, env: dict[str, str] | None = None
) -> tuple[int, Any]:
    """Run the serving check in this process; return (exit code, report)."""
    report = tmp_path / "report.json"
    argv = [f"--checkpoint={model}", f"--prompts={prompts}", f"--report={report}", "--max_new_tokens=8", *flags]
    code = main(argv, env=env or {})
    return code, json.loads(report.read_text(encoding="utf-8"))


def assert_error_report(report: dict[str, Any], pattern: str) -> None:
    """Every key present, the figures null, the error matching `pattern`."""
    assert set(report) == REPORT_KEYS
    assert re.search(pattern, report["error"]), report["error"]
    assert report["load_time_s"] is None and report["peak_memory_mb"] is None and report["tokens_per_s"] is None
    assert report["latency_ms"] == {"p50": None, "p95": None, "max": None}
    assert report["warmup_ms"] is None and report["latency_remeasured_ms"] == {"p50": None, "p95": None, "max": None}
    assert report["prompts"] == [] and report["expectations_passed"] is False


def test_the_report_has_every_key_and_the_figures(tiny_model: Path, tmp_path: Path) -> None:
    prompts = write_prompts(
        tmp_path / "prompts.jsonl",
        {"id": "capital", "messages": EGYPT, "expect": {"non_empty": True, "max_tokens": 8}},
        {"id": "sum", "messages": SUM},
    )
    code, report = check(tiny_model, prompts, tmp_path, f"--prompts_digest={sha256(prompts)}")
    assert code == EXIT_RAN, report
    assert set(report) == REPORT_KEYS
    assert report["schema"] == 1 and report["engine"] == "transformers" and report["dtype"] == "float32"
    assert report["device"] == "cpu" and report["error"] is None and report["max_new_tokens"] == 8
    assert report["checkpoint"] == str(tiny_model)
    assert report["checkpoint_digest"] == folder_digest(file_entries(tiny_model))
    assert report["prompt_set"] == {"path": str(prompts), "digest": sha256(prompts), "count": 2}
    template = (tiny_model / "chat_template.jinja").read_text(encoding="utf-8")
    digest = "sha256:" + hashlib.sha256(template.encode()).hexdigest()
    assert report["chat_template"] == {"applied": True, "digest": digest}
    assert report["load_time_s"] > 0 and report["peak_memory_mb"] > 50 and report["tokens_per_s"] > 0
    assert report["gpu_peak_memory_mb"] is None
    latencies = [p["latency_ms"] for p in report["prompts"]]
    assert report["latency_ms"] == latency_summary(latencies)
    assert [p["id"] for p in report["prompts"]] == ["capital", "sum"]
    for prompt in report["prompts"]:
        assert set(prompt) == PROMPT_KEYS
        # The untrained model never ends its turn: it runs out of new tokens.
        assert prompt["finish_reason"] == "length" and prompt["new_tokens"] == 8 and prompt["output"]
        assert prompt["passed"] is True
    assert [c["name"] for c in report["prompts"][0]["checks"]] == ["non_empty", "max_tokens"]
    assert report["prompts"][1]["checks"] == []
    assert report["expectations_passed"] is True and report["failures"] == []


def test_a_failed_exact_expectation_names_the_prompt_and_quotes_the_output(tiny_model: Path, tmp_path: Path) -> None:
    prompts = write_prompts(
        tmp_path / "prompts.jsonl",
        {"id": "capital", "messages": EGYPT, "expect": {"exact": "The capital of Egypt is Cairo.", "stops": True}},
        {"id": "sum", "messages": SUM, "expect": {"non_empty": True}},
    )
    code, report = check(tiny_model, prompts, tmp_path)
    assert code == EXIT_RAN
    assert report["error"] is None and report["expectations_passed"] is False
    capital, total = report["prompts"]
    assert capital["passed"] is False and total["passed"] is True
    assert {c["name"]: c["passed"] for c in capital["checks"]} == {"stops": False, "exact": False}
    [failure] = report["failures"]
    assert failure.startswith("capital: stops failed (finish_reason length); exact failed")
    assert repr(capital["output"]) in failure
    assert report["load_time_s"] > 0 and report["latency_ms"]["p95"] > 0  # figures are still reported


def test_a_prompt_set_digest_mismatch_is_an_error_report(tiny_model: Path, tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM})
    code, report = check(tiny_model, prompts, tmp_path, "--prompts_digest=sha256:" + "0" * 64)
    assert code == EXIT_ERROR
    assert_error_report(report, rf"has digest {sha256(prompts)}, --prompts_digest pins sha256:0{{64}}")
    assert report["prompt_set"]["digest"] == sha256(prompts)


def test_a_missing_checkpoint_is_an_error_report(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM})
    code, report = check(tmp_path / "no-such-model", prompts, tmp_path)
    assert code == EXIT_ERROR
    assert_error_report(report, r"checkpoint .*no-such-model is not a folder")
    assert report["checkpoint_digest"] is None and report["prompt_set"]["count"] == 1


def test_an_unknown_engine_is_an_error_report(tiny_model: Path, tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM})
    code, report = check(tiny_model, prompts, tmp_path, "--engine=vllm")
    assert code == EXIT_ERROR
    assert_error_report(
        report, "^engine vllm is not built into this program; a serving image must write the same report$"
    )
    assert report["engine"] == "vllm"


def test_a_tokenizer_without_a_chat_template_is_an_error_report(tiny_model: Path, tmp_path: Path) -> None:
    model = shutil.copytree(tiny_model, tmp_path / "model")
    (model / "chat_template.jinja").unlink()
    config = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM})
    code, report = check(model, prompts, tmp_path)
    assert code == EXIT_ERROR
    assert_error_report(report, "has no chat template")
    assert report["chat_template"] == {"applied": False, "digest": None}


def test_a_malformed_prompt_set_names_the_line(tmp_path: Path) -> None:
    text = (
        json.dumps({"id": "a", "messages": SUM})
        + "\n"
        + json.dumps({"id": "b", "messages": SUM, "expect": {"max_len": 3}})
    )
    with pytest.raises(ServingError, match=r"p line 2: unknown expectation max_len"):
        parse_prompts(text, "p")
    with pytest.raises(ServingError, match=r"p line 2: id 'a' is used twice"):
        parse_prompts(json.dumps({"id": "a", "messages": SUM}) + "\n" + json.dumps({"id": "a", "messages": SUM}), "p")
    with pytest.raises(ServingError, match=r"p line 1: messages must be a non-empty list"):
        parse_prompts(json.dumps({"id": "a", "messages": []}), "p")


def test_sigterm_ends_the_check_with_a_report(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = TransformersEngine.generate

    def generate_then_get_stopped(self: TransformersEngine, messages: Any, max_new_tokens: int) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # as the agent does when the run is stopped
        return original(self, messages, max_new_tokens)

    monkeypatch.setattr(TransformersEngine, "generate", generate_then_get_stopped)
    before = signal.getsignal(signal.SIGTERM)
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "a", "messages": SUM}, {"id": "b", "messages": EGYPT})
    code, report = check(tiny_model, prompts, tmp_path)
    assert code == EXIT_STOPPED
    # The signal arrives during the first request, the untimed warm-up: no prompt was served yet.
    assert_error_report(report, r"^stopped by signal 15 after 0 of 2 prompts$")
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


def test_inside_polyaxon_the_figures_and_the_report_are_logged(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    class FakeRun:
        def __getattr__(self, method: str) -> Any:
            def record(**kwargs: Any) -> Any:
                calls.append((method, kwargs))
                if method == "get_artifacts_lineage":
                    return type("Page", (), {"results": [type("A", (), {"name": "serving_report"})()]})()
                return None

            return record

    monkeypatch.setattr("trainer.tracking.init_polyaxon_run", lambda: FakeRun())
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM, "expect": {"stops": True}})
    code, report = check(tiny_model, prompts, tmp_path, env={"POLYAXON_RUN_INSTANCE": "o.p.runs.abc"})
    assert code == EXIT_RAN
    outputs = next(kwargs for method, kwargs in calls if method == "log_outputs")
    assert outputs == {
        "serving_expectations_passed": False,
        "serving_latency_p95_ms": report["latency_ms"]["p95"],
        "serving_tokens_per_s": report["tokens_per_s"],
        "serving_peak_memory_mb": report["peak_memory_mb"],
        "serving_load_time_s": report["load_time_s"],
    }
    artifact = next(kwargs for method, kwargs in calls if method == "log_artifact_ref")
    assert artifact == {"path": str(tmp_path / "report.json"), "kind": "file", "name": "serving_report"}
    assert calls[-1][0] == "end"


def test_the_default_report_goes_to_the_runs_outputs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POLYAXON_RUN_INSTANCE", "owner.project.runs.0123abcd")
    monkeypatch.setenv("POLYAXON_CONTEXT_ROOT", str(tmp_path))
    env = {"POLYAXON_RUN_INSTANCE": "owner.project.runs.0123abcd"}
    assert serving.default_report_path(env) == tmp_path / "artifacts" / "0123abcd" / "outputs" / "serving_report.json"
    assert serving.default_report_path({}) == Path("outputs") / "serving_report.json"


def test_nearest_rank_percentiles() -> None:
    values = [30.0, 10.0, 20.0, 50.0, 40.0]
    assert [nearest_rank(values, p) for p in (1, 20, 21, 50, 80, 81, 95, 100)] == [10, 10, 20, 30, 40, 50, 50, 50]
    hundred = [float(v) for v in range(100, 0, -1)]  # 1..100 in reverse
    assert nearest_rank(hundred, 50) == 50 and nearest_rank(hundred, 95) == 95 and nearest_rank(hundred, 99.5) == 100
    assert nearest_rank([7.0], 50) == 7.0
    assert latency_summary(values) == {"p50": 30.0, "p95": 50.0, "max": 50.0}
    assert latency_summary([]) == {"p50": None, "p95": None, "max": None}
    with pytest.raises(ValueError):
        nearest_rank([], 50)
    with pytest.raises(ValueError):
        nearest_rank(values, 0)


def test_checks_judge_each_expectation() -> None:
    expect = {"non_empty": True, "stops": True, "max_tokens": 5, "regex": r"plus \d+ is", "exact": " 7 plus 6 is 13. "}
    passed = run_checks(expect, "7 plus 6 is 13.", 5, "stop")
    assert [(c["name"], c["passed"]) for c in passed] == [
        ("non_empty", True),
        ("stops", True),
        ("max_tokens", True),
        ("regex", True),
        ("exact", True),
    ]
    failed = run_checks(expect, "  ", 6, "length")
    assert [c["passed"] for c in failed] == [False] * 5
    assert run_checks({"stops": False, "non_empty": False}, "", 0, "length") == []


def test_the_template_end_of_turn_token_is_an_end_token(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    assert end_of_turn_ids(tokenizer) == [tokenizer.convert_tokens_to_ids("<|im_end|>")]


def test_the_shipped_prompt_set_parses_and_expects_turns_to_end() -> None:
    prompts = parse_prompts(SHIPPED_PROMPTS.read_text(encoding="utf-8"), str(SHIPPED_PROMPTS))
    assert 4 <= len(prompts) <= 6
    assert all(p.expect.get("stops") and p.expect.get("non_empty") for p in prompts)


def test_the_component_passes_every_flag_of_the_program() -> None:
    component = yaml.safe_load(COMPONENT.read_text(encoding="utf-8"))
    args = component["run"]["container"]["args"]
    passed = {re.fullmatch(r"--(\w+)=\{\{ (\w+) \}\}", arg).group(1) for arg in args}  # type: ignore[union-attr]
    inputs = {item["name"] for item in component["inputs"]} - {"image", "checkpoints_connection"}
    flags = {action.dest for action in build_parser()._actions if action.option_strings} - {"help", "report"}
    assert passed == inputs == flags
    assert component["run"]["container"]["command"] == ["python", "-m", "trainer.serving"]


def test_the_module_runs_as_a_program(tmp_path: Path) -> None:
    """`python -m trainer.serving`: a bad prompt set digest is refused before any model loads, with a report."""
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM})
    report = tmp_path / "out" / "report.json"
    argv = [f"--checkpoint={tmp_path}", f"--prompts={prompts}", "--prompts_digest=sha256:00", f"--report={report}"]
    done = subprocess.run(
        [sys.executable, "-m", "trainer.serving", *argv],
        cwd=REPO,
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_ERROR, done.stderr
    assert "--prompts_digest pins sha256:00" in done.stderr
    assert json.loads(report.read_text(encoding="utf-8"))["error"].startswith(f"prompt set {prompts} has digest")


class ScriptedEngine(TransformersEngine):
    """The real engine on the tiny model, its clock replaced by a script: a slow first request (lazy
    initialisation), then the latencies given, in order, so the figures' arithmetic is exact."""

    def __init__(self, model: Path, latencies: list[float]) -> None:
        super().__init__(model, "float32")
        self.latencies = list(latencies)
        self.calls: list[str] = []

    def generate(self, messages: list[dict[str, str]], max_new_tokens: int) -> Any:
        served = super().generate(messages, max_new_tokens)
        self.calls.append(messages[0]["content"])
        return type(served)(served.output, served.new_tokens, self.latencies.pop(0), served.generate_s, "length")


def test_latency_is_measured_after_a_warm_up_and_measured_again(tiny_model: Path, tmp_path: Path) -> None:
    prompts = parse_prompts(
        "".join(
            json.dumps(row) + "\n" for row in ({"id": "capital", "messages": EGYPT}, {"id": "sum", "messages": SUM})
        ),
        "prompts.jsonl",
    )
    # The warm-up pays 4,000 ms of first-call cost; the busy first pass 2,688 ms at worst; the second 579 ms.
    engine = ScriptedEngine(tiny_model, [4000.0, 2688.0, 900.0, 579.0, 410.0])
    engine.load()
    options = build_parser().parse_args([f"--checkpoint={tiny_model}", "--prompts=x", "--max_new_tokens=4"])
    with serving.SignalStop() as stop:
        figures = serving._serve(engine, prompts, options, stop)
    egypt, total = EGYPT[0]["content"], SUM[0]["content"]
    assert engine.calls == [egypt, egypt, total, egypt, total]  # warm-up, the measured pass, the re-measure
    assert figures["warmup_ms"] == 4000.0
    assert figures["latency_ms"] == {"p50": 900.0, "p95": 2688.0, "max": 2688.0}  # the warm-up is not in it
    assert [p["latency_ms"] for p in figures["prompts"]] == [2688.0, 900.0]
    assert figures["latency_remeasured_ms"] == {"p50": 410.0, "p95": 579.0, "max": 579.0}


def test_the_report_carries_the_warm_up_and_the_re_measure(tiny_model: Path, tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", {"id": "sum", "messages": SUM})
    code, report = check(tiny_model, prompts, tmp_path)
    assert code == EXIT_RAN, report
    assert report["warmup_ms"] > 0
    assert report["latency_remeasured_ms"]["p95"] > 0 and report["latency_ms"]["p95"] > 0
