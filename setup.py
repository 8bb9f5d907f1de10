"""Build hook: the wheel carries the example agents as ``corral/examples/``.

The examples stay at the top of the repository, where the tests, the README, CI and the
benchmarks use them; a build copies them into the package, so ``corral demo`` and
``corral init`` work from an installed wheel. An editable install reads them in place.
Everything else about the build is declared in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

EXAMPLES = Path(__file__).resolve().parent / "examples"
SKIP = shutil.ignore_patterns("__pycache__", "*.py[co]", ".data", "*.db", "*.db-*")


class BuildWithExamples(build_py):
    """``build_py`` that also copies ``examples/`` into the built package."""

    def run(self) -> None:
        """Build the package, then add the examples beside its modules."""
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / "corral" / "examples"
            shutil.copytree(EXAMPLES, target, ignore=SKIP, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithExamples})
