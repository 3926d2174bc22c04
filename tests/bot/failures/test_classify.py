"""The failure classifier on a table of real-looking conditions, exit codes and log tails."""

from __future__ import annotations

import pytest

from bot.failures import Condition, classify, exception_line
from bot.failures.classify import exit_code_of
from bot.failures.render import failed_text, failure_record, hint

FAILED = "failed"

CUDA_OOM = """\
  File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 125, in forward
    return F.linear(input, self.weight, self.bias)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB \
of which 1.21 GiB is free. Process 4127 has 77.93 GiB memory in use.
"""

TRACEBACK = """\
{'loss': 2.3011, 'grad_norm': 1.02, 'learning_rate': 2e-05, 'epoch': 0.1}
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/app/trainer/__main__.py", line 4, in <module>
    main()
  File "/app/trainer/train.py", line 211, in main
    raise ValueError(f"unknown scheduler {args.lr_scheduler_type!r}")
ValueError: unknown scheduler 'cosine_restart'
"""

CHAINED = """\
Traceback (most recent call last):
  File "/app/trainer/data.py", line 40, in load
    row = rows[0]
IndexError: list index out of range

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/trainer/train.py", line 99, in main
    raise RuntimeError("empty dataset split 'train'")
RuntimeError: empty dataset split 'train'
"""

HUB_401 = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status
    response.raise_for_status()
requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: \
https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json
huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url \
https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.
"""

S3_403 = """\
botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the GetObject operation: Access Denied
"""

NAN = """\
{'loss': 1.8721, 'grad_norm': 4.1, 'learning_rate': 0.009, 'epoch': 0.4}
{'loss': nan, 'grad_norm': nan, 'learning_rate': 0.009, 'epoch': 0.5}
Traceback (most recent call last):
  File "/app/trainer/callbacks.py", line 77, in on_log
    raise FloatingPointError("loss is not finite at step 120")
FloatingPointError: loss is not finite at step 120
"""

MISSING_MODULE = """\
Traceback (most recent call last):
  File "/app/trainer/__main__.py", line 1, in <module>
    from trainer.train import main
  File "/app/trainer/train.py", line 12, in <module>
    import peft
ModuleNotFoundError: No module named 'peft'
"""

NCCL_TIMEOUT = """\
[rank1]:[E1203 10:22:01.123456 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
"""

RANK_PREFIXED = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/app/trainer/train.py", line 88, in main
[rank0]:     trainer.train()
[rank0]: KeyError: 'messages'
"""


def lines(text: str) -> list[str]:
    return text.splitlines()


CASES = [
    # (id, conditions, log lines, kind, words in the evidence)
    (
        "k8s OOMKilled",
        [Condition("failed", "OOMKilled", "Container main was OOMKilled; exit code 137")],
        ["step 30"],
        "oom_host",
        "OOMKilled",
    ),
    (
        "evicted for memory",
        [Condition("failed", "Evicted", "The node was low on resource: memory. Container main was using 61Gi")],
        [],
        "oom_host",
        "low on resource",
    ),
    ("cuda oom", [Condition("failed", "PodFailed", "exit code 1")], lines(CUDA_OOM), "oom_cuda", "CUDA out of memory"),
    (
        "preempted by the scheduler",
        [Condition("failed", "PreemptionByScheduler", "Preempted in order to admit critical pod")],
        lines(TRACEBACK),
        "preempted",
        "Preempt",
    ),
    (
        "spot node disruption",
        [Condition("failed", "DisruptionTarget", "Pod was terminated in response to imminent node shutdown")],
        [],
        "preempted",
        "DisruptionTarget",
    ),
    (
        "local SIGKILL from outside",
        [
            Condition(
                "failed",
                "Preempted",
                "Preempted: the job's process was killed by SIGKILL from outside the job (no stop was asked). "
                "Exit code -9.",
            )
        ],
        ["{'loss': 2.1}"],
        "preempted",
        "SIGKILL",
    ),
    (
        "node lost",
        [Condition("failed", "NodeLost", "Node gke-gpu-pool-3 which was running pod main is unresponsive")],
        [],
        "node_lost",
        "NodeLost",
    ),
    (
        "local agent restart",
        [Condition("failed", "LocalAgentRestart", "The local agent restarted; the run's process was lost.")],
        [],
        "node_lost",
        "LocalAgentRestart",
    ),
    (
        "image pull back-off",
        [
            Condition("warning", "ImagePullBackOff", 'Back-off pulling image "ghcr.io/acme/trainer@sha256:dead"'),
            Condition("failed", "PolyaxonRunFailed", None),
        ],
        [],
        "image",
        "ImagePullBackOff",
    ),
    ("gated hub model", [Condition("failed", "PodFailed", "exit code 1")], lines(HUB_401), "data", "401"),
    ("bucket access denied", [], lines(S3_403), "data", "AccessDenied"),
    ("nan loss", [Condition("failed", "LocalAgent", "Exit code 1. Last log lines:\n...")], lines(NAN), "nan", "nan"),
    ("missing module", [], lines(MISSING_MODULE), "dependency", "No module named 'peft'"),
    ("nccl watchdog", [Condition("failed", None, "exit code 1")], lines(NCCL_TIMEOUT), "timeout", "Watchdog"),
    (
        "active deadline",
        [Condition("failed", "DeadlineExceeded", "Job was active longer than specified deadline")],
        [],
        "timeout",
        "DeadlineExceeded",
    ),
    (
        "code error",
        [Condition("failed", "LocalAgent", "Exit code 1. Last log lines:\n" + TRACEBACK)],
        lines(TRACEBACK),
        "code",
        "ValueError: unknown scheduler 'cosine_restart'",
    ),
    ("chained traceback", [], lines(CHAINED), "code", "RuntimeError: empty dataset split 'train'"),
    ("rank-prefixed traceback", [], lines(RANK_PREFIXED), "code", "KeyError: 'messages'"),
    (
        "bare 137",
        [Condition("failed", "LocalAgent", "Exit code 137. Last log lines:\nKilled")],
        ["Killed"],
        "oom_host",
        "137",
    ),
    (
        "missing command",
        [Condition("failed", "LocalAgent", "Exit code 127. Last log lines:\n/bin/sh: 1: trl: not found")],
        ["/bin/sh: 1: trl: not found"],
        "image",
        "127",
    ),
    (
        "nothing known",
        [Condition("failed", "LocalAgent", "Exit code 3. Last log lines:\ndone with errors")],
        ["done with errors"],
        "unknown",
        "exit code 3",
    ),
]


# As Polyaxon's Kubernetes operator and haupt write them (docs/local-polyaxon.md has the sources): a run's history
# as `get_run_statuses` returns it, oldest first.
SCHEDULED = [
    Condition("created", "OperationServiceInit", "Run is created"),
    Condition("compiled", "SchedulerPrepare", "Run is compiled"),
    Condition("queued", "SchedulerStart", "Run is queued"),
    Condition("scheduled", "AgentController", "Operation is scheduled"),
    Condition("starting", "OperatorController", "Operation is starting"),
]
RAN = [*SCHEDULED, Condition("running", "OperatorController", "Operation is running")]
PULL = Condition("warning", "ImagePullBackOff", 'Back-off pulling image "ghcr.io/acme/trainer@sha256:dead"')
DEADLINE = Condition("failed", "DeadlineExceeded", "Job was active longer than specified deadline")
BACKOFF = "Job has reached the specified backoff limit"
NO_NODE = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
    "3 No preemption victims found for incoming pod.."
)

OPERATOR_CASES = [
    # (id, conditions, log lines, kind, words the evidence must hold)
    ("pull back-off until the deadline", [*SCHEDULED, PULL, DEADLINE], [], "image", ["ImagePullBackOff", "then"]),
    ("ran until the deadline", [*RAN, DEADLINE], ["{'loss': 2.1}"], "timeout", ["DeadlineExceeded"]),
    (
        "a pull back-off before it ran is not why it failed",
        [
            *SCHEDULED,
            PULL,
            Condition("running", "OperatorController", "Operation is running"),
            Condition("failed", "BackoffLimitExceeded", BACKOFF),
        ],
        lines(TRACEBACK),
        "code",
        ["ValueError"],
    ),
    (
        "unschedulable until the deadline",
        [*SCHEDULED, Condition("warning", "ContainersNotReady", NO_NODE), DEADLINE],
        [],
        "unschedulable",
        ["0/3 nodes are available", "DeadlineExceeded"],
    ),
    (
        "OOM relayed by the operator (its termination message from the log)",
        [
            *RAN,
            Condition(
                "failed",
                "BackoffLimitExceeded",
                BACKOFF + " (Pod: <reason: OOMKilledExitCode 137, "
                "message {'loss': 2.01, 'grad_norm': 1.3}\n{'loss': 1.98})",
            ),
        ],
        [],
        "oom_host",
        ["OOMKilled"],
    ),
    (
        "OOM as newer operators word it",
        [
            *RAN,
            Condition(
                "failed",
                "BackoffLimitExceeded",
                BACKOFF + " after 1 failed attempt(s): Main container "
                '"polyaxon-main" in pod "sft-abc-x1" exit code 137 (OOMKilled): ',
            ),
        ],
        [],
        "oom_host",
        ["OOMKilled"],
    ),
    (
        "the trainer's termination message names the exception",
        [
            *RAN,
            Condition(
                "failed",
                "BackoffLimitExceeded",
                BACKOFF + " (Pod: <reason: ErrorExitCode 1, message "
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB)",
            ),
        ],
        [],
        "oom_cuda",
        ["CUDA out of memory"],
    ),
    (
        "preemption by the pod failure policy",
        [
            *RAN,
            Condition(
                "failed",
                "PodFailurePolicy",
                "Pod default/sft-abc-x1 has condition DisruptionTarget matching FailJob rule at index 0",
            ),
        ],
        ["{'loss': 2.1}"],
        "preempted",
        ["DisruptionTarget"],
    ),
    (
        "SIGTERM from outside (a drained node), the trainer's orderly stop",
        [
            *RAN,
            Condition(
                "failed",
                "BackoffLimitExceeded",
                BACKOFF + " (Pod: <reason: ErrorExitCode 143, message "
                "stopped by SIGTERM at step 40: checkpoint-40 is complete)",
            ),
        ],
        [],
        "preempted",
        ["ErrorExitCode 143"],
    ),
    (
        "the deadline's own SIGTERM is the deadline",
        [
            *RAN,
            Condition(
                "failed",
                "DeadlineExceeded",
                "Job was active longer than specified deadline (Pod: <reason: "
                "ErrorExitCode 143, message stopped by SIGTERM at step 40: checkpoint-40 is complete)",
            ),
        ],
        [],
        "timeout",
        ["DeadlineExceeded"],
    ),
    (
        "evicted for disk pressure",
        [
            *RAN,
            Condition(
                "failed",
                "BackoffLimitExceeded",
                BACKOFF + " (Pod: <reason: PodFailed, message The node "
                "was low on resource: ephemeral-storage. Threshold quantity: 10057513974, available: "
                "9670764Ki. )",
            ),
        ],
        [],
        "preempted",
        ["ephemeral-storage"],
    ),
    (
        "the node went away",
        [
            *RAN,
            Condition(
                "failed",
                "BackoffLimitExceeded",
                BACKOFF + " (Pod: <reason: ContainerStatusUnknownExitCode "
                "137, message The container could not be located when the pod was terminated)",
            ),
        ],
        [],
        "node_lost",
        ["ContainerStatusUnknown"],
    ),
    (
        "a PyTorchJob's worker replica raised",
        [
            *RAN,
            Condition(
                "failed", "PyTorchJobFailed", "PyTorchJob sft-ddp-x is failed because 1 Worker replica(s) failed."
            ),
        ],
        lines(RANK_PREFIXED),
        "code",
        ["KeyError"],
    ),
    (
        "the backoff limit and nothing else",
        [*RAN, Condition("failed", "BackoffLimitExceeded", BACKOFF)],
        [],
        "refused",
        ["BackoffLimitExceeded: Job has reached the specified backoff limit"],
    ),
]


@pytest.mark.parametrize(
    ("conditions", "log", "kind", "words"), [c[1:] for c in OPERATOR_CASES], ids=[c[0] for c in OPERATOR_CASES]
)
def test_what_the_operator_writes_is_classified_by_its_most_specific_cause(
    conditions: list[Condition], log: list[str], kind: str, words: list[str]
) -> None:
    failure = classify(conditions, log)
    assert failure.kind == kind, failure
    for word in words:
        assert word in failure.evidence, failure


def test_a_cause_and_the_end_it_led_to_are_both_quoted() -> None:
    failure = classify([*SCHEDULED, PULL, DEADLINE], [])
    assert failure.evidence == (
        'ImagePullBackOff: Back-off pulling image "ghcr.io/acme/trainer@sha256:dead" — then '
        "DeadlineExceeded: Job was active longer than specified deadline"
    )
    text = hint(failure, params={}, presets=["gpu-1x"], recipe="sft-tiny")
    assert "pulled" in text and "raise the limit" not in text


def test_the_exit_code_comes_from_the_container_the_operator_relays() -> None:
    old = [Condition("failed", "BackoffLimitExceeded", BACKOFF + " (Pod: <reason: OOMKilledExitCode 137, message x)")]
    new = [Condition("failed", "BackoffLimitExceeded", BACKOFF + ' … "main" exit code 2 (Error): bad args')]
    assert exit_code_of(old) == 137 and exit_code_of(new) == 2


@pytest.mark.parametrize(("conditions", "log", "kind", "evidence"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_failure_is_classified_with_the_line_that_shows_it(
    conditions: list[Condition], log: list[str], kind: str, evidence: str
) -> None:
    failure = classify(conditions, log)
    assert failure.kind == kind, failure
    assert evidence in failure.evidence, failure


def test_the_exit_code_comes_from_the_newest_condition_that_says_it() -> None:
    conditions = [
        Condition("running", "LocalAgent", None),
        Condition("failed", "LocalAgent", "Exit code 137. Last log lines:\nx"),
    ]
    assert exit_code_of(conditions) == 137
    assert classify(conditions, []).exit_code == 137
    assert exit_code_of([Condition("failed", "PodFailed", None)]) is None


def test_a_quoted_log_in_the_condition_is_judged_as_log_not_as_the_pod() -> None:
    # The local agent's failed condition quotes the last log lines: a "timed out" in them is not a deadline.
    message = "Exit code 1. Last log lines:\nrequests timed out once, retried\nValueError: bad"
    failure = classify(
        [Condition("failed", "LocalAgent", message)], ["Traceback (most recent call last):", "ValueError: bad"]
    )
    assert failure.kind == "code"


def test_exception_line_takes_the_last_traceback_and_ignores_indented_source() -> None:
    assert exception_line(lines(CHAINED)) == "RuntimeError: empty dataset split 'train'"
    assert exception_line(["no traceback here", "ValueError: not after a traceback"]) is None
    assert (
        exception_line(["Traceback (most recent call last):", "  raise KeyError('x')", "KeyError: 'x'"])
        == "KeyError: 'x'"
    )


def test_long_evidence_is_cut() -> None:
    failure = classify([], ["Traceback (most recent call last):", "ValueError: " + "x" * 1000])
    assert failure.kind == "code" and len(failure.evidence) <= 300 and failure.evidence.endswith("…")


# What the agent writes when Polyaxon's converter refuses a run kind (haupt 2.18's sync agent, verbatim shape).
CONVERTER_REFUSAL = Condition(
    "failed",
    "AgentLogger",
    "Agent failed during compilation with unknown exception.\n"
    "error: PolyaxonCompilerError('Converter Error. Specification with run kind: pytorchjob is not supported in "
    "this deployment version.')\n"
    "Traceback (most recent call last):\n"
    '  File "/venv/polyaxon/_runner/agent/sync_agent.py", line 255, in prepare_run_resource\n'
    "polyaxon.exceptions.PolyaxonCompilerError: Converter Error.\n",
)


def test_a_failure_with_no_log_lines_quotes_polyaxons_last_condition() -> None:
    failure = classify([Condition("queued", "SchedulerPrepare", "Run is queued"), CONVERTER_REFUSAL], [])
    assert failure.kind == "unsupported", failure
    assert failure.evidence == (
        "AgentLogger: Agent failed during compilation with unknown exception. error: PolyaxonCompilerError("
        "'Converter Error. Specification with run kind: pytorchjob is not supported in this deployment version.')"
    )
    assert "no log lines" not in failure.evidence and "Traceback" not in failure.evidence

    other = classify([Condition("failed", "PodFailed", "Pod sandbox changed, it will be killed and re-created.")], [])
    assert other.kind == "refused"
    assert other.evidence == "PodFailed: Pod sandbox changed, it will be killed and re-created."


def test_the_hint_points_at_an_attached_log_only_when_one_is_attached() -> None:
    params: dict[str, object] = {}
    unknown = classify([], ["done with errors"])
    alone = hint(unknown, params=params, presets=[], recipe="sft-tiny")
    assert "attached" not in alone and "log tail below" in alone
    assert "attached file" in hint(unknown, params=params, presets=[], recipe="sft-tiny", attached=True)

    refused = classify([CONVERTER_REFUSAL], [])
    said = hint(refused, params=params, presets=[], recipe="sft-tiny-ddp")
    assert "attached" not in said
    assert "training operator" in said and "`/finetune preflight recipe=sft-tiny-ddp`" in said
    text = failed_text(failure_record(refused, hint_text=said, retry="no", why="Not retried."), attempt_label="")
    assert "*Not runnable on this deployment*" in text and "is not supported in this deployment version" in text
