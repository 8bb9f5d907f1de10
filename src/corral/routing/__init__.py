"""Routing: what to do with an understood message, by the intent's policy in config.

Run a plan, reply at once, ask a clarifying question, or hand off to a person; and which
tools the intent may use.
"""
