"""Replies from templates: text for the user comes from a template, never a raw payload.

Placeholders are ``{name}`` or a dotted path such as ``{args.order_id}`` (a confirmation
shows the bound arguments that way); a name that has no value raises
``TemplateInvalidError``, so a reply never claims a fact that no successful tool (or the
user) provided. Lists render as ``a, b`` (``a、b`` in Chinese), mappings as ``k: v``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from corral.clipping import clip
from corral.config import TemplateText
from corral.contracts import Language
from corral.errors import TemplateInvalidError
from corral.tools.sensitive import REDACTED

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")

DEFAULT_TEMPLATES: dict[str, TemplateText] = {
    "clarify": TemplateText(
        zh="抱歉，我没太明白您的意思。您是想咨询、报修、申请换新，还是有其他问题？",
        en="Sorry, I did not quite get that. Could you tell me a bit more about what you need?",
    ),
    "handoff": TemplateText(
        zh="这个问题我已经转给人工客服，他们会尽快联系您。",
        en="I have passed this to a colleague, who will get back to you shortly.",
    ),
    "failed": TemplateText(
        zh="抱歉，这次没能处理成功，已经转给人工客服跟进。",
        en="Sorry, I could not complete this; a colleague will follow up.",
    ),
    "cancelled": TemplateText(
        # not "已取消" / "cancelled": said to a declined cancellation, it read as done
        zh="好的，这次先不办了，没有做任何改动。",
        en="OK, I have left it as it was. Nothing was changed.",
    ),
    "cancelled_after_changes": TemplateText(
        zh="好的，后面的步骤已取消。已经完成的：{done}；没有执行：{not_done}。",
        en="OK, I stopped there. Already done: {done}. Not done: {not_done}.",
    ),
    "confirm": TemplateText(
        zh="接下来要执行「{call}」，确认继续吗？", en="Next I will run {call}. Shall I go ahead?"
    ),
    "ask": TemplateText(zh="请提供{slot}。", en="Could you give me the {slot}?"),
    "ask_which": TemplateText(
        zh="您说的{slot}是哪一个：{candidates}？",
        en="Which {slot} do you mean: {candidates}?",
    ),
    "ask_which_again": TemplateText(
        zh="一次只能办一个{slot}：{candidates}，请回复其中一个，另一个可以办完再发我。",
        en="I can only take one {slot} at a time: {candidates}. Please reply with one of "
        "them; you can send me another after it.",
    ),
    "confirm_plan": TemplateText(
        zh="这个任务共 {count} 步：{steps}。确认全部执行吗？",
        en="This takes {count} steps: {steps}. Shall I go ahead?",
    ),
    "done": TemplateText(zh="已处理完成。", en="Done."),
    "others_named": TemplateText(
        zh="这次只查了{slot} {used}；您还提到了 {others}，要查的话请单独再发一下。",
        en="This answer covers {slot} {used} only; you also mentioned {others}. "
        "To check another one, send it on its own.",
    ),
    "not_understood": TemplateText(
        zh="不好意思，没太明白您的意思。", en="Sorry, I did not quite get that."
    ),
    "still_asked": TemplateText(
        zh="另外，您之前的问题还在等您回复：{question}",
        en="Also, your earlier request is still waiting for your answer: {question}",
    ),
    "still_to_confirm": TemplateText(
        zh="另外，您之前的请求还在等您确认：{question}（要办的话请回复「确认」）",
        en="Also, your earlier request is still waiting for your go-ahead: {question} "
        '(to go ahead, reply "confirm")',
    ),
    "already_waiting": TemplateText(
        zh="这个请求还在等您确认，还没有办理。",
        en="That request is still waiting for your go-ahead; nothing has been done yet.",
    ),
    "waiting_prompt": TemplateText(
        zh="{question}（要办的话请回复「确认」）",
        en='{question} (to go ahead, reply "confirm")',
    ),
    "outcome_unknown": TemplateText(
        zh="抱歉，系统暂时无法确认这项操作是否已经生效。已转给人工客服核实，他们会尽快联系您，"
        "请先不要重复提交。",
        en="Sorry, I could not confirm whether this went through. A colleague will check "
        "and get back to you; please do not submit it again in the meantime.",
    ),
    "partial": TemplateText(
        zh="已完成：{done}。未能完成：{not_done}，需要的话可以稍后再试或联系人工客服。",
        en="Done: {done}. Not done: {not_done}; you can try that again later or ask a colleague.",
    ),
}


def _lookup(values: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted path (``args.order_id``); ``None`` when any part is missing."""
    value: Any = values
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def display(value: Any, language: Language) -> str:
    """A value as a person reads it: lists joined, mappings as ``key: value``.

    A whole float reads as the whole number it is (``599.0`` is ``599``): money and
    quantities come back from JSON and SQL as floats, and "599.0 元" reads as a bug.
    """
    if type(value) is float and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    separator = "、" if language == "zh" else ", "
    if isinstance(value, list | tuple | set | frozenset):
        return separator.join(display(v, language) for v in value)
    if isinstance(value, Mapping):
        return separator.join(f"{k}: {display(v, language)}" for k, v in value.items())
    return str(value)


CALL_CHARS = 300
"""The most characters of a call that a confirmation shows (a long text argument is cut)."""


def masked_args(args: Mapping[str, Any], hidden: Collection[str]) -> dict[str, Any]:
    """``args`` with each one named in ``hidden`` as ``[REDACTED]``: what a prompt may show."""
    return {name: REDACTED if name in hidden else value for name, value in args.items()}


def call_text(
    tool: str, args: Mapping[str, Any], language: Language, hidden: Collection[str] = ()
) -> str:
    """A call as a person approves it: the tool, and each argument (``{call}``).

    ``refund (order_id: OD1, amount: 599)``: the default ``confirm`` prompt shows it, so
    that a write a model planned is never approved without its arguments being seen. An
    argument named in ``hidden`` (``Sensitive``, ``redaction.fields``) shows as
    ``[REDACTED]``: the prompt is a reply, logged as one.
    """
    if not args:
        return tool
    shown = clip(display(masked_args(args, hidden), language), CALL_CHARS)
    return f"{tool}（{shown}）" if language == "zh" else f"{tool} ({shown})"


def placeholders(text: str) -> list[str]:
    """The names a template uses."""
    return _PLACEHOLDER.findall(text)


class ReplyRenderer:
    """Renders the agent's templates (falling back to corral's defaults) in one language."""

    def __init__(self, templates: Mapping[str, TemplateText]) -> None:
        self._templates = {**DEFAULT_TEMPLATES, **templates}
        self._uses = {
            name: frozenset(placeholders(t.zh) + placeholders(t.en))
            for name, t in self._templates.items()
        }
        """Template -> the placeholders it uses, found once (most replies use none)."""

    def own_text(self, name: str, language: Language) -> str:
        """The built-in text of a template the agent may have replaced (``handoff``...).

        What a run that must hand off says when the agent's text names a value the run
        does not have yet: the safety net never fails for want of a value.
        """
        template = DEFAULT_TEMPLATES.get(name, DEFAULT_TEMPLATES["handoff"])
        return template.zh if language == "zh" else template.en

    def has(self, name: str) -> bool:
        """Whether a template of that name exists."""
        return name in self._templates

    def uses(self, name: str) -> frozenset[str]:
        """The placeholders a template uses, in either language (empty when it is unknown)."""
        return self._uses.get(name, frozenset())

    def render(self, name: str, values: Mapping[str, Any], language: Language) -> str:
        """Fill the named template; raises ``TemplateInvalidError`` for a missing value."""
        try:
            template = self._templates[name]
        except KeyError:
            raise TemplateInvalidError(f"no template named {name!r}") from None
        text = template.zh if language == "zh" else template.en
        if not self._uses[name]:
            return text

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            value = _lookup(values, key)
            if value is None or value == "" or value == [] or value == {}:
                raise TemplateInvalidError(
                    f"template {name!r} needs {key!r}, which no successful step provided"
                )
            return display(value, language)

        return _PLACEHOLDER.sub(fill, text)
