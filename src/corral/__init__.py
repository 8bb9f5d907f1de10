"""corral: task-oriented LLM agents you can trust in production.

An agent is a pipeline of narrow layers joined by typed contracts:
intent -> route -> plan -> decide -> execute -> verify -> reply.
Everything below is the public API; anything else may change.
"""

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
from corral.errors import CorralError, ErrorCode, ToolFailedError, TransientToolError
from corral.events import Event
from corral.models.base import Model
from corral.models.scripted import ScriptedModel
from corral.runtime.effects import Effects, LiveEffects
from corral.runtime.runtime import Runtime
from corral.store.base import Store
from corral.store.memory import MemoryStore
from corral.store.registry import open_store
from corral.store.sql import SqlStore
from corral.testing.effects import FixedEffects
from corral.tools.context import ToolContext
from corral.tools.policy import LOCAL_COMPUTE, NETWORK, NO_RETRY, RetryPolicy, ToolPolicy
from corral.tools.sensitive import Sensitive
from corral.tools.spec import ToolSpec, tool

__version__ = "0.1.0"

__all__ = [
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
    "HandoffPacket",
    "IntentResult",
    "LiveEffects",
    "MemoryStore",
    "Model",
    "Plan",
    "RetryPolicy",
    "RouteAction",
    "RouteDecision",
    "RunStatus",
    "RunSummary",
    "Runtime",
    "ScriptedModel",
    "Sensitive",
    "SqlStore",
    "Step",
    "StepStatus",
    "Store",
    "ToolContext",
    "ToolFailedError",
    "ToolPolicy",
    "ToolResult",
    "ToolSpec",
    "ToolStatus",
    "TransientToolError",
    "Verdict",
    "__version__",
    "load_agent",
    "load_config",
    "open_store",
    "parse_config",
    "tool",
]
