"""Settings shared by the local Polyaxon supervisor and its process agent (no Polyaxon imports here)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ARTIFACTS_STORE_NAME = "artifacts_store"
MODEL_CACHE_CONNECTION = "model-cache"

# The agent reads its settings from this variable (a JSON AgentSettings) so the supervisor never
# has to pass a long command line; Polyaxon's own variables are set next to it.
AGENT_SETTINGS_ENV = "FINETUNE_LOCAL_AGENT_SETTINGS"

# Variables a job takes from the agent's environment (everything else is dropped, as a pod does not inherit its
# node's environment); the supervisor hands the agent the same ones from its own.
JOB_PASSTHROUGH_NAMES = frozenset({"LANG", "LC_ALL", "TZ", "TERM", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"})
JOB_PASSTHROUGH_PREFIXES = ("HF_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH_", "PYTORCH_", "LC_")


def job_passthrough(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a job inherits (model caches, offline switches, thread counts, locale)."""
    return {
        name: value
        for name, value in environ.items()
        if name in JOB_PASSTHROUGH_NAMES or name.startswith(JOB_PASSTHROUGH_PREFIXES)
    }


# What the agent's fork servers import before forking Python jobs (`steps.forked`): the libraries a trainer job
# imports first; `module:attr` makes a lazy package import the submodule behind attr.
DEFAULT_PRELOAD = (
    "torch",
    "transformers:Trainer",
    "datasets",
    "peft",
    "trl:SFTTrainer,SFTConfig,ModelConfig,DPOTrainer,DPOConfig,GRPOTrainer,GRPOConfig",
)


@dataclass(frozen=True)
class LocalConnection:
    """A Polyaxon host-path connection: on this host the mount path is the folder itself."""

    name: str
    host_path: Path

    def to_polyaxon(self) -> dict[str, object]:
        """The connection as Polyaxon's agent config expects it (`POLYAXON_AGENT_CONNECTIONS`)."""
        path = str(self.host_path)
        return {"name": self.name, "kind": "host_path", "schema": {"hostPath": path, "mountPath": path}}


@dataclass(frozen=True)
class StackLayout:
    """Where everything of one local stack lives, all under one store folder."""

    store: Path

    @property
    def local(self) -> Path:
        """Folder for the stack's own state (hidden inside the store, next to the run folders)."""
        return self.store / ".local"

    @property
    def context_root(self) -> Path:
        """`POLYAXON_CONTEXT_ROOT` shared by server, agent and jobs."""
        return self.local / "context"

    @property
    def jobs(self) -> Path:
        """One JSON file per live job (its process group), so nothing outlives the stack."""
        return self.local / "jobs"

    @property
    def homes(self) -> Path:
        """A clean `HOME` per run."""
        return self.local / "homes"

    @property
    def shims(self) -> Path:
        """`python` / `python3` wrappers put first on a job's `PATH`."""
        return self.local / "bin"

    @property
    def logs(self) -> Path:
        """Server and agent logs."""
        return self.local / "logs"

    @property
    def server_home(self) -> Path:
        """`HOME` of the server process (haupt writes a home config there)."""
        return self.local / "server-home"

    @property
    def hf_home(self) -> Path:
        """`HF_HOME` of every job that does not set one: the stack's Hugging Face cache, shared as a node's is."""
        return self.local / "hf-home"

    @property
    def model_cache(self) -> Path:
        """Default folder behind the `model-cache` connection."""
        return self.local / "model-cache"


def default_connections(layout: StackLayout) -> list[LocalConnection]:
    """Connections declared when none are given: the `model-cache` folder."""
    return [LocalConnection(MODEL_CACHE_CONNECTION, layout.model_cache)]


def artifacts_store_connection(layout: StackLayout) -> LocalConnection:
    """The artifacts store: the store folder itself, as the sandbox server uses it."""
    return LocalConnection(ARTIFACTS_STORE_NAME, layout.store)


@dataclass(frozen=True)
class AgentSettings:
    """Everything the agent process needs, passed as JSON in one environment variable."""

    host: str
    store: str
    python: str
    workdir: str
    owner: str = "default"
    stop_grace_s: float = 10.0
    sync_interval_s: float = 3.0
    max_interval: int = 3
    extra_env: dict[str, str] = field(default_factory=dict)
    preload: list[str] = field(default_factory=list)  # empty: no fork servers, every job starts fresh

    def to_json(self) -> str:
        """Serialise for the environment."""
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> AgentSettings:
        """Parse what `to_json` wrote."""
        return cls(**json.loads(text))

    @property
    def layout(self) -> StackLayout:
        """The folders of this stack."""
        return StackLayout(Path(self.store))
