"""Seeing what a run did, without changing it: logs, the run tree, and redaction.

Everything here reads the events a run recorded (or its folded state) and renders them
for a person: the JSONL log, the terminal tree, model-call briefs. Personal data and
secrets are redacted on the way out; the store keeps the real values. Nothing in this
package drives a run: the runtime imports it, never the other way round.
"""
