"""Polyaxon boundary: the only package that imports polyaxon."""

from bot.polyaxon.gateway import PolyaxonGateway
from bot.polyaxon.spec import OperationSpecError, check_operation, compile_operation
from bot.polyaxon.types import (
    DONE_STATUSES,
    Artifact,
    ArtifactFile,
    ArtifactNotFoundError,
    GatewayError,
    LogLine,
    LogTail,
    MetricPoint,
    ModelVersion,
    PolyaxonUnreachableError,
    ProjectMissingError,
    RemoteView,
    RunGoneError,
    RunInfo,
    RunNotFoundError,
    StatusCondition,
)

__all__ = [
    "DONE_STATUSES",
    "Artifact",
    "ArtifactFile",
    "ArtifactNotFoundError",
    "GatewayError",
    "LogLine",
    "LogTail",
    "MetricPoint",
    "ModelVersion",
    "OperationSpecError",
    "PolyaxonGateway",
    "PolyaxonUnreachableError",
    "ProjectMissingError",
    "RemoteView",
    "RunGoneError",
    "RunInfo",
    "RunNotFoundError",
    "StatusCondition",
    "check_operation",
    "compile_operation",
]
