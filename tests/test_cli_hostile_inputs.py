"""Command lines a user gets wrong: a clean ``CODE: message`` and exit 2, never a traceback.

Each was reproduced on main by a hostile review of the CLI (a traceback and exit 1, or a
wrong code):

- ``corral intent train data.csv --out FOLDER`` trained, then failed to save with
  ``IsADirectoryError``; ``--out /proc/version`` with ``FileNotFoundError``;
- ``--store 'postgresql://u@host:notaport/db'`` and ``'postgresql://u:pw@[::1/db'`` ended
  in ``ValueError`` from the URL parser, on every command that takes ``--store``;
- ``corral serve --host not..a..host`` ended in ``UnicodeError`` (IDNA);
- a zero-byte ``corral.db`` (SQLite's empty database) was ``STORE_CORRUPT`` to ``corral
  runs`` ("restore from a backup") while ``corral db current`` called it empty.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import corral_cli

CORPUS = "text,label\n" + "".join(
    f"{text},{label}\n"
    for label, texts in {
        "greet": ["hello", "hi there", "hey", "good morning", "hello again", "hi friend"],
        "leave": ["bye", "see you", "goodbye", "farewell", "see you soon", "bye now"],
    }.items()
    for text in texts
)


def assert_clean_refusal(done: subprocess.CompletedProcess[str], code: str, *words: str) -> None:
    """Exit 2, the stable code and ``words`` in one message, and no traceback."""
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert code in said, said
    assert "Traceback" not in said and "Error:" not in said.replace(f"{code}:", ""), said
    for word in words:
        assert word in said, said


def test_intent_train_out_that_is_a_folder_is_refused_before_training(tmp_path: Path) -> None:
    data = tmp_path / "t.csv"
    data.write_text(CORPUS, encoding="utf-8")
    done = corral_cli(
        tmp_path / "home", "intent", "train", str(data), "--out", str(tmp_path), ok=False
    )
    assert_clean_refusal(done, "CONFIG_INVALID", "--out", "is a folder")
    assert not (tmp_path / "home" / "models").exists()


def test_intent_train_out_in_a_folder_not_made_yet_makes_it(tmp_path: Path) -> None:
    """As before the check above (a review of it found it refusing this): folders are made."""
    data = tmp_path / "t.csv"
    data.write_text(CORPUS, encoding="utf-8")
    out = tmp_path / "build" / "models" / "intent.pkl"
    corral_cli(tmp_path / "home", "intent", "train", str(data), "--out", str(out))
    assert out.is_file()


def test_intent_train_out_that_cannot_be_written_is_a_clean_error(tmp_path: Path) -> None:
    data = tmp_path / "t.csv"
    data.write_text(CORPUS, encoding="utf-8")
    done = corral_cli(
        tmp_path / "home", "intent", "train", str(data), "--out", "/proc/version", ok=False
    )
    assert_clean_refusal(done, "CONFIG_INVALID", "--out: cannot write /proc/version")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@host:notaport/db",
        "postgresql://u:secret-pw@[::1/db",
        "postgresql:u:secret-pw@h/db",  # no //: SQLAlchemy's ArgumentError, not a ValueError
        "postgresql://u:secret-pw@h:99999/db",
    ],
)
def test_a_store_url_that_cannot_be_parsed_is_config_invalid(tmp_path: Path, url: str) -> None:
    done = corral_cli(tmp_path / "home", "runs", "--store", url, ok=False)
    assert_clean_refusal(done, "CONFIG_INVALID", "store URL cannot be read")
    assert "secret-pw" not in done.stdout + done.stderr


def test_a_store_url_of_another_scheme_is_named_by_its_scheme_alone(tmp_path: Path) -> None:
    done = corral_cli(tmp_path / "home", "runs", "--store", "postgres://u:secret-pw@h/db", ok=False)
    assert_clean_refusal(done, "CONFIG_INVALID", "'postgres' URL")
    assert "secret-pw" not in done.stdout + done.stderr


def test_intent_train_out_under_a_file_is_refused_before_training(tmp_path: Path) -> None:
    data = tmp_path / "t.csv"
    data.write_text(CORPUS, encoding="utf-8")
    out = data / "model.pkl"  # under a file
    done = corral_cli(tmp_path / "home", "intent", "train", str(data), "--out", str(out), ok=False)
    assert_clean_refusal(done, "CONFIG_INVALID", "is a file, not a folder")
    assert not (tmp_path / "home" / "models").exists()


def test_a_password_that_looks_like_a_port_is_never_printed(tmp_path: Path) -> None:
    """A review found the first check (``urlsplit``) printing "S3cretPassw0rd" as a port it
    could not read, and refusing URLs SQLAlchemy reads. Read by SQLAlchemy's parser, this one
    is a URL; the store at it cannot be reached (nothing listens on port 1)."""
    url = "postgresql://admin:S3cretPassw0rd#1@127.0.0.1:1/prod"
    done = corral_cli(tmp_path / "home", "runs", "--store", url, ok=False, timeout=60)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "S3cretPassw0rd" not in said
    assert "CONFIG_INVALID" not in said, said  # a URL: not refused as one


def test_serve_on_a_host_name_that_is_no_name_is_config_invalid(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    done = corral_cli(
        tmp_path / "home",
        "serve",
        str(root / "examples" / "orders"),
        "--host",
        "not..a..host",
        "--port",
        "0",
        ok=False,
        timeout=60,
    )
    assert_clean_refusal(done, "CONFIG_INVALID", "cannot listen on not..a..host", "--host")


def test_a_zero_byte_database_lists_no_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "corral.db").write_bytes(b"")
    done = corral_cli(home, "runs", "--json")
    assert done.stdout.strip() in ("[]", '{"runs": []}', '{"runs":[]}'), done.stdout
    assert (home / "corral.db").read_bytes() == b""  # a read leaves it as it was
