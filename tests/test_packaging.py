"""Packaging as a user meets it: one version, a light start, examples in the wheel, init."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import corral
from corral.observe.logs import LEVELS

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "sqlalchemy",
    "pydantic",
    "numpy",
    "sklearn",
    "openai",
    "httpx",
    "mcp",
    "dbos",
    "corral.store",
    "corral.runtime",
)
"""What a start that only prints must not import: the store, the layers' models, the ML stack."""


def child_env(**extra: str) -> dict[str, str]:
    """This environment without coverage's hook: a child that loads a wheel is not measured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    return {**env, "COLUMNS": "200", **extra}


def python(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS``; given variables, they replace this one's and coverage stays out."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=child_env(**env) if env else {**os.environ, "COLUMNS": "200"},
        timeout=180,
        cwd=cwd,
    )


def test_version_is_the_package_version() -> None:
    done = python("-m", "corral", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"corral {corral.__version__}\n"
    # pyproject reads the same attribute: there is no second version to forget
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "corral.__version__"}


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_do_not_load_the_layers(flag: str) -> None:
    script = (
        "import sys\n"
        "from corral.cli import main\n"
        f"sys.argv = ['corral', {flag!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = python("-c", script)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout, done.stdout[-500:]
    assert ("Usage" in done.stdout) is (flag == "--help")


def test_the_console_script_answers_version_without_the_cli() -> None:
    """``corral --version`` (the script's ``corral.launch``) loads no typer, rich or command:
    the CLI alone took ~0.25 s of a 0.3 s start. Anything else still reaches the CLI."""
    script = (
        "import sys\n"
        "from corral.launch import main\n"
        "sys.argv = ['corral', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    print('EXIT', exc.code)\n"
        "print('CLI', [m for m in ('typer', 'rich', 'corral.cli') if m in sys.modules])\n"
    )
    fast = python("-c", script, "--version")
    assert fast.returncode == 0, fast.stderr
    assert fast.stdout == f"corral {corral.__version__}\nEXIT 0\nCLI []\n"
    full = python("-c", script, "--help")
    assert full.returncode == 0, full.stderr
    assert "Usage" in full.stdout and "CLI ['typer', 'rich', 'corral.cli']" in full.stdout
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"] == {"corral": "corral.launch:main"}


def test_a_command_still_loads_what_it_needs(tmp_path: Path) -> None:
    done = python("-m", "corral", "runs", "--json", "--home", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_traces_help_lists_the_log_levels() -> None:
    done = python("-m", "corral", "traces", "--help")
    assert done.returncode == 0, done.stderr
    for level in LEVELS:
        assert level in done.stdout


def test_public_names_load_on_first_use() -> None:
    script = (
        "import sys, corral\n"
        "before = 'sqlalchemy' in sys.modules\n"
        "store = corral.SqlStore\n"
        "print(before, 'sqlalchemy' in sys.modules, store.__module__)\n"
    )
    done = python("-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "corral.store.sql"]


def test_every_public_name_resolves() -> None:
    assert set(corral._HOMES) | {"__version__"} == set(corral.__all__)
    for name in corral.__all__:
        assert getattr(corral, name) is not None
    assert set(corral.__all__) <= set(dir(corral))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = corral.Nope  # type: ignore[attr-defined]
    namespace: dict[str, object] = {}
    exec("from corral import *", namespace)
    assert namespace["Runtime"] is corral.Runtime


def test_every_module_imports_first() -> None:
    """With ``import corral`` lazy, no module may rely on another being imported before it."""
    script = (
        "import importlib, pkgutil, sys\n"
        "import corral\n"
        "names = [m.name for m in pkgutil.walk_packages(corral.__path__, 'corral.')]\n"
        "failed = []\n"
        "for name in names:\n"
        "    if name == 'corral.__main__':\n"
        "        continue\n"
        "    for loaded in [m for m in sys.modules if m.startswith('corral.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as exc:\n"
        "        failed.append(f'{name}: {exc}')\n"
        "print(len(names), failed)\n"
    )
    done = python("-c", script)
    assert done.returncode == 0, done.stderr
    count, failed = done.stdout.split(" ", 1)
    assert int(count) > 50
    assert failed.strip() == "[]", failed


def init(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return python("-m", "corral", "init", *args, cwd=cwd, **env)


def test_init_copies_an_example_that_then_runs(tmp_path: Path) -> None:
    target = tmp_path / "desk"
    done = init(str(target), "--example", "aftersales")
    assert done.returncode == 0, done.stderr
    for name in ("agent.yaml", "tools.py", "eval.yaml", "data/business.sql"):
        assert (target / name).is_file(), name
    assert not (target / "__pycache__").exists()
    ran = python(
        "-m",
        "corral",
        "run",
        str(target),
        "Hello! Nice weather today, isn't it?",
        "--json",
        "--home",
        str(tmp_path / "home"),
    )
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert summary["status"] == "finished"


def test_init_never_overwrites_and_names_the_examples(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "agent.yaml").write_text("mine", encoding="utf-8")
    done = init(str(tmp_path / "taken"))
    assert done.returncode == 2
    assert "INVALID_INPUT" in done.stderr
    assert (tmp_path / "taken" / "agent.yaml").read_text(encoding="utf-8") == "mine"
    unknown = init(str(tmp_path / "new"), "--example", "nope")
    assert unknown.returncode == 2
    assert "CONFIG_INVALID" in unknown.stderr
    assert "aftersales, ops, orders, triage" in unknown.stderr
    assert not (tmp_path / "new").exists()


def test_demo_and_init_work_from_the_built_wheel(tmp_path: Path) -> None:
    """Build the wheel offline from a clean copy, unpack it, and run it with no checkout."""
    setuptools = metadata.version("setuptools")
    assert int(setuptools.split(".")[0]) >= 77, (
        f"setuptools {setuptools} cannot build corral (license = 'Apache-2.0' needs >= 77): "
        "install the dev extra again (bash scripts/venv.sh dev)"
    )
    source = tmp_path / "source"
    source.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".data", "*.db*")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    for folder in ("src", "examples"):
        shutil.copytree(ROOT / folder, source / folder, ignore=junk)
    wheels = tmp_path / "wheels"
    built = python(
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        str(wheels),
        str(source),
        cwd=tmp_path,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("corral-*.whl")
    assert wheel.name.startswith(f"corral-{corral.__version__}-")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    assert "corral/examples/aftersales/agent.yaml" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # the dashboard's files (pages, ECharts and its licences) are package data: /ui works
    dashboard = ROOT / "src" / "corral" / "server" / "ui"
    shipped = {p.relative_to(ROOT / "src").as_posix() for p in dashboard.rglob("*") if p.is_file()}
    assert "corral/server/ui/vendor/echarts.min.js" in shipped
    assert shipped <= set(names), sorted(shipped - set(names))
    # the store's migrations are package data too: `corral db upgrade` runs them
    migrations = ROOT / "src" / "corral" / "store" / "migrations"
    scripts = {
        p.relative_to(ROOT / "src").as_posix()
        for p in migrations.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert "corral/store/migrations/env.py" in scripts
    assert "corral/store/migrations/versions/r0001_baseline.py" in scripts
    assert scripts <= set(names), sorted(scripts - set(names))

    # the wheel alone: its own folder on the path, run from outside the checkout
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = python(
        "-c",
        "import corral; from corral.cli.examples import examples_root; "
        "print(corral.__file__); print(examples_root())",
        cwd=outside,
        PYTHONPATH=str(site),
    )
    assert where.returncode == 0, where.stderr
    module, examples = where.stdout.split()
    assert Path(module).is_relative_to(site) and Path(examples).is_relative_to(site)

    demo = python(
        "-m",
        "corral",
        "demo",
        "--json",
        "--home",
        str(tmp_path / "home"),
        cwd=outside,
        PYTHONPATH=str(site),
    )
    assert demo.returncode == 0, demo.stderr
    statuses = [case["status"] for case in json.loads(demo.stdout)["cases"]]
    assert statuses == [
        "finished",
        "finished",
        "finished",
        "handed_off",
        "finished",
        "awaiting_user",
    ]
    # the wheel's migrations upgrade a store made before them (Alembic reads its folder)
    old_home = tmp_path / "old"
    old_home.mkdir()
    dump = ROOT / "tests" / "fixtures" / "home_v0" / "corral.sql"
    with sqlite3.connect(old_home / "corral.db") as conn:
        conn.executescript(dump.read_text(encoding="utf-8"))
    upgraded = python(
        "-m", "corral", "db", "upgrade", "--json", "--home", str(old_home),
        cwd=outside, PYTHONPATH=str(site),
    )  # fmt: skip
    assert upgraded.returncode == 0, upgraded.stderr
    assert json.loads(upgraded.stdout)["state"] == "current"
    copied = init(str(outside / "orders"), "--example", "orders", cwd=outside, PYTHONPATH=str(site))
    assert copied.returncode == 0, copied.stderr
    assert (outside / "orders" / "data" / "orders.sql").is_file()
