"""What an MCP answer becomes: a tool result, or a failure with a stable code.

- ``isError``: the tool ran and reported a failure: ``TOOL_FAILED``. It is taken to mean
  the tool did not do its work, as a refusal by the server would (for a write, the step
  fails instead of being unknown), so a server must not answer ``isError`` after acting.
- A tool with an ``outputSchema``: its ``structuredContent``, kept to the declared fields.
- A tool without one: the text blocks joined, parsed as JSON when they are JSON and kept
  as text otherwise, as the single field ``value`` (like a function tool returning
  ``str``). A non-JSON answer is thus a result, never a crash. Images, audio and resource
  blocks never enter the run; an answer with no text at all is ``TOOL_OUTPUT_INVALID``.
- Text over ``MAX_TEXT_CHARS`` is refused before it is parsed or stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from corral.errors import ToolFailedError, ToolOutputInvalidError
from corral.json_values import loads_finite
from corral.tools.transport import redact

if TYPE_CHECKING:
    from mcp.types import CallToolResult

MAX_TEXT_CHARS = 100_000
"""The longest text answer accepted from a server: more is a broken or hostile answer."""


def answer_text(result: CallToolResult) -> str | None:
    """The text blocks of an answer, joined; ``None`` when it has none."""
    from mcp.types import TextContent

    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return "\n".join(texts) if texts else None


def result_value(
    tool: str, result: CallToolResult, structured: bool, secrets: Sequence[str] = ()
) -> Any:
    """What ``tool`` returned, as its ``ToolSpec`` declares it; raises corral errors.

    ``secrets`` are redacted from the error a server reports (the caller redacts results).
    """
    text = answer_text(result)
    if text is not None and len(text) > MAX_TEXT_CHARS:
        raise ToolOutputInvalidError(
            f"MCP tool {tool!r} answered {len(text)} characters, over {MAX_TEXT_CHARS}"
        )
    if result.is_error:
        shown = redact((text or "no message").strip(), secrets)[:200]
        raise ToolFailedError(f"MCP tool {tool!r} reported an error: {shown}")
    if result.structured_content is not None:
        return result.structured_content
    if structured:
        raise ToolOutputInvalidError(
            f"MCP tool {tool!r} declares an output schema but answered no structured content"
        )
    if text is None:
        raise ToolOutputInvalidError(f"MCP tool {tool!r} answered no text")
    try:  # NaN and Infinity are no JSON: such an answer is text, kept as it came
        return loads_finite(text)
    except ValueError:
        return text
    except RecursionError:  # a few KB of "[[[[..." reach the parser's limit
        raise ToolOutputInvalidError(f"MCP tool {tool!r} answered JSON nested too deep") from None
