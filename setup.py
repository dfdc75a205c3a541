"""Build hook for pircd's optional compiled build (docs/compiled.md).

``pip install .`` installs plain Python and needs nothing from this file.
With ``PIRCD_COMPILE=1`` set, the modules listed under ``[tool.pircd] compiled``
in pyproject.toml are also compiled with mypyc (from the mypy project) into C
extensions that Python imports in place of the ``.py`` files. The source is
the same; only how CPython runs it changes.
"""

import os
import sys
import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
MYPY = "mypy>=1.8"


def compiled_modules() -> list[str]:
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["pircd"]["compiled"]


def _wanted() -> bool:
    return os.environ.get("PIRCD_COMPILE", "") not in ("", "0")


def _extensions() -> tuple[list, list[str]]:
    """(ext_modules, setup_requires) for this build."""
    if not _wanted():
        return [], []
    try:
        from mypyc.build import mypycify
    except ImportError:
        if "egg_info" in sys.argv:  # pip asks for the build requirements first: it installs mypy
            return [], [MYPY]
        raise SystemExit(f"PIRCD_COMPILE=1 needs {MYPY} in the build environment") from None
    return mypycify(compiled_modules(), opt_level="3"), [MYPY]


ext_modules, setup_requires = _extensions()
setup(ext_modules=ext_modules, setup_requires=setup_requires)
