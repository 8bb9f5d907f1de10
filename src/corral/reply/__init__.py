"""The reply layer: answers from templates over verified facts."""

from corral.reply.render import DEFAULT_TEMPLATES, ReplyRenderer

__all__ = ["DEFAULT_TEMPLATES", "ReplyRenderer"]
