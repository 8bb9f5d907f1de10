"""corral: task-oriented LLM agents you can trust in production.

An agent is a pipeline of narrow layers joined by typed contracts:
intent -> route -> plan -> decide -> execute -> verify -> reply.
Everything below is the public API; anything else may change.

The names load on first use (PEP 562 ``__getattr__``): ``corral --version`` and a tool
module that imports ``corral.errors`` do not pay for SQLAlchemy or the layers' models.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.agent import Agent, load_agent
    from corral.config import AgentConfig, load_config, parse_config
    from corral.contracts import (
        EventType,
        HandoffPacket,
        IntentResult,
        Plan,
        RouteAction,
        RouteDecision,
        RunStatus,
        RunSummary,
        Step,
        StepStatus,
        ToolResult,
        ToolStatus,
        Verdict,
    )
    from corral.decision.builtin_gates import DEFAULT_GATES
    from corral.decision.gates import Gate, GateRun, Hold, Proposal, Refuse, Skip, Stop
    from corral.effects import Effects, FixedEffects, LiveEffects
    from corral.errors import CorralError, ErrorCode, ToolFailedError, TransientToolError
    from corral.events import Event
    from corral.models.base import Model
    from corral.models.scripted import ScriptedModel
    from corral.runtime.runtime import Runtime
    from corral.store.base import Store
    from corral.store.memory import MemoryStore
    from corral.store.registry import open_store
    from corral.store.sql import SqlStore
    from corral.tools.context import ToolContext
    from corral.tools.mcp.listing import McpListingCache
    from corral.tools.policy import (
        LOCAL_COMPUTE,
        NETWORK,
        NO_RETRY,
        RateLimit,
        RetryPolicy,
        ToolPolicy,
    )
    from corral.tools.sensitive import Sensitive
    from corral.tools.spec import ToolSpec, tool
    from corral.verify.verifiers import DEFAULT_VERIFIERS, StepOutcome, Verifier, VerifyRun

__version__ = "0.1.0"
"""The one version source: pyproject.toml reads it when building, ``corral --version`` here."""

__all__ = [
    "DEFAULT_GATES",
    "DEFAULT_VERIFIERS",
    "LOCAL_COMPUTE",
    "NETWORK",
    "NO_RETRY",
    "Agent",
    "AgentConfig",
    "CorralError",
    "Effects",
    "ErrorCode",
    "Event",
    "EventType",
    "FixedEffects",
    "Gate",
    "GateRun",
    "HandoffPacket",
    "Hold",
    "IntentResult",
    "LiveEffects",
    "McpListingCache",
    "MemoryStore",
    "Model",
    "Plan",
    "Proposal",
    "RateLimit",
    "Refuse",
    "RetryPolicy",
    "RouteAction",
    "RouteDecision",
    "RunStatus",
    "RunSummary",
    "Runtime",
    "ScriptedModel",
    "Sensitive",
    "Skip",
    "SqlStore",
    "Step",
    "StepOutcome",
    "StepStatus",
    "Stop",
    "Store",
    "ToolContext",
    "ToolFailedError",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "ToolStatus",
    "TransientToolError",
    "Verdict",
    "Verifier",
    "VerifyRun",
    "__version__",
    "load_agent",
    "load_config",
    "open_store",
    "parse_config",
    "tool",
]

_HOMES: dict[str, str] = {
    "Agent": "corral.agent",
    "load_agent": "corral.agent",
    "AgentConfig": "corral.config",
    "load_config": "corral.config",
    "parse_config": "corral.config",
    "Event": "corral.events",
    "DEFAULT_GATES": "corral.decision.builtin_gates",
    "Gate": "corral.decision.gates",
    "GateRun": "corral.decision.gates",
    "Hold": "corral.decision.gates",
    "Proposal": "corral.decision.gates",
    "Refuse": "corral.decision.gates",
    "Skip": "corral.decision.gates",
    "Stop": "corral.decision.gates",
    "DEFAULT_VERIFIERS": "corral.verify.verifiers",
    "StepOutcome": "corral.verify.verifiers",
    "Verifier": "corral.verify.verifiers",
    "VerifyRun": "corral.verify.verifiers",
    "EventType": "corral.contracts",
    "HandoffPacket": "corral.contracts",
    "IntentResult": "corral.contracts",
    "Plan": "corral.contracts",
    "RouteAction": "corral.contracts",
    "RouteDecision": "corral.contracts",
    "RunStatus": "corral.contracts",
    "RunSummary": "corral.contracts",
    "Step": "corral.contracts",
    "StepStatus": "corral.contracts",
    "ToolResult": "corral.contracts",
    "ToolStatus": "corral.contracts",
    "Verdict": "corral.contracts",
    "CorralError": "corral.errors",
    "ErrorCode": "corral.errors",
    "ToolFailedError": "corral.errors",
    "TransientToolError": "corral.errors",
    "Effects": "corral.effects",
    "FixedEffects": "corral.effects",
    "LiveEffects": "corral.effects",
    "Model": "corral.models.base",
    "ScriptedModel": "corral.models.scripted",
    "Runtime": "corral.runtime.runtime",
    "Store": "corral.store.base",
    "MemoryStore": "corral.store.memory",
    "open_store": "corral.store.registry",
    "SqlStore": "corral.store.sql",
    "ToolContext": "corral.tools.context",
    "LOCAL_COMPUTE": "corral.tools.policy",
    "NETWORK": "corral.tools.policy",
    "NO_RETRY": "corral.tools.policy",
    "RetryPolicy": "corral.tools.policy",
    "ToolPolicy": "corral.tools.policy",
    "Sensitive": "corral.tools.sensitive",
    "ToolSpec": "corral.tools.spec",
    "tool": "corral.tools.spec",
    "McpListingCache": "corral.tools.mcp.listing",
    "RateLimit": "corral.tools.policy",
}
"""Where each public name lives: ``__getattr__`` imports it from there on first use."""

if not TYPE_CHECKING:  # type checkers read the imports above, and so flag an unknown name

    def __getattr__(name: str) -> Any:
        """Import a public name from its module on first use, then keep it here."""
        home = _HOMES.get(name)
        if home is None:
            # ``import corral; corral.errors.ErrorCode``: a submodule, as eager imports gave
            if not name.startswith("_") and find_spec(f"corral.{name}") is not None:
                return import_module(f"corral.{name}")
            raise AttributeError(f"module 'corral' has no attribute {name!r}")
        value = getattr(import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        """The module's names, the public ones not loaded yet included."""
        return sorted({*globals(), *__all__})
