"""The local Polyaxon stack's own tests use the shared session stack and gateway fixtures."""

from tests.fixtures import polyaxon as plx

polyaxon_stack = plx.polyaxon_stack
gateway = plx.gateway
