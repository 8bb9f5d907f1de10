"""The mcp_notes test agent has no Python tools: ``setup`` only places the server's files
in the agent's data folder, and ``${NOTES_DB}`` and the others in agent.yaml read them."""

from __future__ import annotations

from pathlib import Path


def setup(data_dir: Path) -> dict[str, str]:
    data_dir.mkdir(parents=True, exist_ok=True)
    return {
        "NOTES_DB": str(data_dir / "notes.sqlite3"),
        "NOTES_PIDS": str(data_dir / "pids.txt"),
        "NOTES_CRASH_FLAG": str(data_dir / "crash.flag"),
    }
