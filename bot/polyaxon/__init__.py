"""Polyaxon boundary: the only package that imports polyaxon."""

from bot.polyaxon.gateway import (
    DONE_STATUSES,
    Artifact,
    GatewayError,
    LogLine,
    LogTail,
    MetricPoint,
    ModelVersion,
    PolyaxonGateway,
    RunInfo,
    RunNotFoundError,
    StatusCondition,
)
from bot.polyaxon.spec import OperationSpecError, compile_operation

__all__ = [
    "DONE_STATUSES",
    "Artifact",
    "GatewayError",
    "LogLine",
    "LogTail",
    "MetricPoint",
    "ModelVersion",
    "OperationSpecError",
    "PolyaxonGateway",
    "RunInfo",
    "RunNotFoundError",
    "StatusCondition",
    "compile_operation",
]
