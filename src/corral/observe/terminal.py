r"""Make untrusted text safe to print: control and escape characters become visible.

Messages and tool output come from users and systems corral does not control. Printed
raw, ``\x1b[2J`` clears the screen and ``\u202e`` reverses what follows; shown as
escapes, they are evidence instead of actions.
"""

from __future__ import annotations

import re
import unicodedata

_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: object) -> str:
    r"""``value`` as text with every control, format or bidi character shown as an escape.

    Newlines and tabs are kept; lone surrogates are shown as ``\udcxx`` escapes too, and
    so is any other format character (tag characters that spell hidden text, a soft
    hyphen), found by its category rather than listed.
    """
    text = value if isinstance(value, str) else str(value)
    text = _INVISIBLE.sub(_escape, text)
    if not text.isascii() and any(unicodedata.category(c) in _HIDDEN for c in text):
        text = "".join(_shown(c) if unicodedata.category(c) in _HIDDEN else c for c in text)
    return text


_HIDDEN = frozenset({"Cf", "Cs"})


def _shown(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def indented(value: object, indent: int) -> str:
    """``value`` (``visible``) with every later line of it indented by ``indent`` spaces.

    Printed after a label (``user: ``), a user's text with a newline then ``reason: ...``
    must not read as a line of corral's own: each of its lines starts past the label.
    """
    return visible(value).replace("\n", "\n" + " " * indent)
