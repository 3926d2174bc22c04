"""Condition sequences as clusters write them, replayed through the real local API server by Polyaxon's own client
standing in for the cluster (no agent runs these runs), with the card and thread asserted: one card, the final
state, the class and hint, nothing told twice, no waiting post once the run has moved on or ended.

Each transcript's words are the operator's and Kubernetes' (`docs/local-polyaxon.md` has the sources). The stand-in
waits after each condition until the bot has seen it, so every step meets the watcher as a cluster's would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from storage import repos
from storage.models import Run
from tests.e2e.conftest import CHANNEL, LiveBot, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.cluster import ClusterStandIn, Said
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]

BACKOFF = "Job has reached the specified backoff limit"
POD_STARTING = Said("Warning", "ContainersNotReady", "containers with unready status: [polyaxon-main polyaxon-sidecar]")
STARTING = Said("Starting", "OperatorController", "Operation is starting")
RUNNING = Said("Running", "OperatorController", "Operation is running")
TRAINING = (
    "{'loss': 2.4121, 'grad_norm': 1.02, 'learning_rate': 0.001, 'epoch': 0.1}",
    "{'loss': 2.1034, 'epoch': 0.2}",
)
NO_NODE = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption "
    "victims found for incoming pod.."
)
PULL = 'Back-off pulling image "ghcr.io/acme/trainer@sha256:0d5b6c1e"'
# Routine steps: never in a thread, as a reason to wait or otherwise.
ROUTINE_WORDS = ("OperatorController", "Operation is starting", "Operation is running", "containers with unready")


@dataclass(frozen=True)
class Step:
    """A condition the cluster writes, and what shows that the bot has seen it (the run's status by default)."""

    said: Said | None
    status: str | None = None  # the status the bot records once it has seen this step
    told: str | None = None  # words the thread holds once the bot has told this step
    stop_from_ui: bool = False


@dataclass(frozen=True)
class Transcript:
    """A cluster's condition sequence for one run and what the bot must say about it."""

    steps: tuple[Step, ...]
    final: str
    kind: str | None = None  # the failure's class
    thread_has: tuple[str, ...] = ()
    thread_lacks: tuple[str, ...] = ()


def ran_then(said: Said, status: str = "failed") -> tuple[Step, ...]:
    """A run that started and ran, then what the cluster said to end it."""
    return Step(STARTING, "starting"), Step(RUNNING, "running"), Step(said, status)


TRANSCRIPTS = {
    "image pull back-off, then the Job's deadline": Transcript(
        steps=(
            Step(STARTING, "starting"),
            Step(POD_STARTING, "starting"),
            Step(Said("Warning", "ImagePullBackOff", PULL), "warning", told="ImagePullBackOff"),
            Step(Said("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"), "failed"),
        ),
        final="failed",
        kind="image",
        thread_has=("*Image error*", "ImagePullBackOff", "then DeadlineExceeded", "pinned digest"),
        thread_lacks=("Timed out", "raise the limit", "Waiting (failed)"),
    ),
    "unschedulable for a while, then scheduled, then succeeded": Transcript(
        steps=(
            Step(STARTING, "starting"),
            Step(Said("Warning", "ContainersNotReady", NO_NODE), "warning", told="0/3 nodes are available"),
            Step(POD_STARTING, "starting"),
            Step(RUNNING, "running"),
            Step(Said("Succeeded", "OperatorController", "Operation has succeeded"), "succeeded"),
        ),
        final="succeeded",
        thread_has=("Insufficient nvidia.com/gpu", ":white_check_mark: *succeeded*"),
    ),
    "killed for memory through the backoff limit, its log as termination message": Transcript(
        steps=ran_then(
            Said(
                "Failed",
                "BackoffLimitExceeded",
                f"{BACKOFF} (Pod: <reason: OOMKilledExitCode 137, message {TRAINING[0]}\n{TRAINING[1]})",
                logs=TRAINING,
            )
        ),
        final="failed",
        kind="oom_host",
        thread_has=("*Out of memory (host)*", "OOMKilledExitCode 137", "more RAM"),
    ),
    "killed for memory through the backoff limit, no termination message (a newer operator)": Transcript(
        steps=ran_then(
            Said(
                "Failed",
                "BackoffLimitExceeded",
                f'{BACKOFF} after 1 failed attempt(s): Main container "polyaxon-main" in pod '
                '"plx-operation-x1" exit code 137 (OOMKilled): ',
                logs=TRAINING,
            )
        ),
        final="failed",
        kind="oom_host",
        thread_has=("*Out of memory (host)*", "exit code 137 (OOMKilled)"),
        thread_lacks=("Ended before it logged",),
    ),
    "killed for memory through the backoff limit, no termination message (an older operator)": Transcript(
        steps=ran_then(Said("Failed", "BackoffLimitExceeded", BACKOFF, logs=TRAINING)),
        final="failed",
        kind="unknown",
        thread_has=("with no container reason", "terminationMessagePolicy: FallbackToLogsOnError"),
        thread_lacks=("Ended before it logged",),
    ),
    "preempted, by the Job's pod failure policy on DisruptionTarget": Transcript(
        steps=ran_then(
            Said(
                "Failed",
                "PodFailurePolicy",
                "Pod default/plx-operation-x1 has condition DisruptionTarget matching FailJob rule at index 0",
                logs=TRAINING,
            )
        ),
        final="failed",
        kind="preempted",
        thread_has=("*Preempted*", "DisruptionTarget", "resume from the last checkpoint"),
    ),
    "evicted for disk pressure": Transcript(
        steps=ran_then(
            Said(
                "Failed",
                "BackoffLimitExceeded",
                f"{BACKOFF} (Pod: <reason: PodFailed, message The node was low on resource: ephemeral-storage. "
                "Threshold quantity: 10057513974, available: 9670764Ki. )",
                logs=TRAINING,
            )
        ),
        final="failed",
        kind="preempted",
        thread_has=("ephemeral-storage", "evicted"),
    ),
    "a PyTorchJob whose worker replica failed": Transcript(
        steps=ran_then(
            Said(
                "Failed",
                "PyTorchJobFailed",
                "PyTorchJob plx-operation-x1 is failed because 1 Worker replica(s) failed.",
                logs=(
                    *TRAINING,
                    "[rank1]: Traceback (most recent call last):",
                    '[rank1]:   File "/app/trainer/data.py", line 88, in rows',
                    "[rank1]: KeyError: 'messages'",
                ),
            )
        ),
        final="failed",
        kind="code",
        thread_has=("*Code error*", "KeyError: 'messages'"),
    ),
    "a failed attempt Kubernetes retries, then succeeded": Transcript(
        steps=(
            Step(STARTING, "starting"),
            Step(RUNNING, "running"),
            Step(Said("Warning", "OperatorController", "Underlaying job has an issue"), "warning"),
            Step(RUNNING, "running"),
            Step(Said("Succeeded", "OperatorController", "Operation has succeeded"), "succeeded"),
        ),
        final="succeeded",
        thread_has=("Underlaying job has an issue", ":white_check_mark: *succeeded*"),
    ),
    "upstream failed (Polyaxon's scheduler)": Transcript(
        steps=(
            Step(
                Said("upstream_failed", "SchedulerNotifyDone", "Run could not be started, upstream error."),
                "upstream_failed",
            ),
        ),
        final="upstream_failed",
        thread_has=("*upstream_failed*", "Run could not be started, upstream error."),
    ),
    "skipped (Polyaxon's scheduler)": Transcript(
        steps=(
            Step(Said("skipped", "ConditionsCheckFailed", "The 'conditions' field was evaluated to False."), "skipped"),
        ),
        final="skipped",
        thread_has=("*skipped*", "evaluated to False"),
    ),
    "stopped from Polyaxon's UI": Transcript(
        steps=(
            Step(STARTING, "starting"),
            Step(RUNNING, "running"),
            Step(None, "stopping", stop_from_ui=True),
            Step(Said("Stopped", "OperatorFinalizer", "Operation stopped in finalizer"), "stopped"),
        ),
        final="stopped",
        thread_has=("User requested to stop the run.", ":octagonal_sign: *stopped*"),
    ),
    "succeeded with no outputs": Transcript(
        steps=ran_then(Said("Succeeded", "OperatorController", "Operation has succeeded"), "succeeded"),
        final="succeeded",
        thread_has=(":white_check_mark: *succeeded*",),
    ),
}


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPolyaxonStack]:
    """The real API server alone: no agent executes these runs; the cluster stand-in speaks for them."""
    with LocalPolyaxonStack(tmp_path_factory.mktemp("cluster") / "store", agent=False) as stack:
        yield stack


@pytest.fixture(scope="module")
def bot(cluster_stack: LocalPolyaxonStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBot]:
    with start_live_bot(cluster_stack, tmp_path_factory.mktemp("transcripts")) as live:
        yield live


@pytest.fixture(scope="module")
def cluster(bot: LiveBot, cluster_stack: LocalPolyaxonStack) -> Iterator[ClusterStandIn]:
    stand_in = ClusterStandIn(cluster_stack.host, cluster_stack.store, bot.runtime.settings.polyaxon.project)
    yield stand_in
    stand_in.close()


def _seen(bot: LiveBot, name: str, step: Step) -> Callable[[], Run | None]:
    def seen() -> Run | None:
        run = bot.run_named(name)
        if step.status is not None and run.status != step.status:
            return None
        with bot.runtime.services.sessions() as s:
            if not all(e.posted_ts for e in repos.list_status_events(s, run_id=run.id or 0)):
                return None
        if step.told is not None and not any(step.told in text for text in bot.thread(run)):
            return None
        return run

    return seen


@pytest.mark.parametrize("transcript", list(TRANSCRIPTS.values()), ids=list(TRANSCRIPTS))
def test_a_cluster_s_transcript_is_told_right(bot: LiveBot, cluster: ClusterStandIn, transcript: Transcript) -> None:
    cards_before = len(bot.standin.messages(CHANNEL))
    name = run_name_in(bot.command("run recipe=quickstart epochs=1"))
    run = wait_for(lambda: (r := bot.run_named(name)).polyaxon_uuid and r, timeout=60)
    uuid = str(run.polyaxon_uuid)
    cluster.take(uuid)  # haupt writes `scheduled: AgentController` as it hands the run over
    bot.wait_status(name, {"scheduled"}, timeout=60)
    for step in transcript.steps:
        if step.stop_from_ui:
            cluster.stop_from_ui(uuid)
        if step.said is not None:
            cluster.say(uuid, step.said)
        assert wait_for(_seen(bot, name, step), timeout=60, interval=0.2), (step, bot.thread(bot.run_named(name)))
    done = bot.wait_status(name, {transcript.final}, timeout=60)
    bot.runtime.watcher.tick()  # type: ignore[union-attr] - one more tick: nothing more to say
    thread = bot.thread(done)
    told = "\n".join(thread)
    print("\n".join(f"  | {text}" for text in thread))  # what the channel reads, shown with -s

    # One card, showing the final state; every post once; no routine step, no waiting post after the run moved on.
    assert len(bot.standin.messages(CHANNEL)) == cards_before + 1
    bot.wait_card(done, transcript.final)
    assert len(thread) == len(set(thread)), thread
    for words in ROUTINE_WORDS:
        assert words not in told, (words, thread)
    ended = next(i for i, text in enumerate(thread) if f"*{transcript.final}*" in text)
    assert not [t for t in thread[ended:] if t.startswith(":hourglass:")], thread
    for words in transcript.thread_has:
        assert words in told, (words, thread)
    for words in transcript.thread_lacks:
        assert words not in told, (words, thread)
    if transcript.kind is not None:
        assert done.failure is not None and done.failure["kind"] == transcript.kind, done.failure
        bot.wait_card(done, str(done.failure["title"]))
    # Each reason to wait was told once, in one post before the end (the failure may quote it again as its cause).
    for step in transcript.steps:
        if step.told is not None:
            assert sum(step.told in text for text in thread[:ended]) == 1, (step.told, thread)
