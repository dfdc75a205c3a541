"""Which build is under test: plain Python, or the optional compiled build.

The modules named in pyproject.toml (``[tool.pircd] compiled``) are plain
``.py`` files in the default build. CI runs the whole suite a second time on a
copy built with ``PIRCD_COMPILE=1`` and sets ``PIRCD_EXPECT_COMPILED=1`` there,
so that a build that silently fell back to Python cannot pass as compiled, and
a stale compiled module left beside an edited source cannot shadow it here.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _compiled_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [path.removesuffix(".py").replace("/", ".") for path in config["tool"]["pircd"]["compiled"]]


def test_the_compiled_list_names_existing_modules():
    names = _compiled_modules()
    assert "ircd.server" in names and "ircd.net.connection" in names
    for name in names:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


@pytest.mark.parametrize("name", _compiled_modules())
def test_modules_are_built_as_expected(name):
    expect_compiled = os.environ.get("PIRCD_EXPECT_COMPILED", "") not in ("", "0")
    path = Path(importlib.import_module(name).__file__ or "")
    assert path.suffix == (".so" if expect_compiled else ".py"), path


def test_each_module_imports_first_in_a_fresh_interpreter():
    """A compiled class typed with another module's native class needs that module imported first
    (docs/compiled.md); importing each listed module alone, first, shows that it does so itself."""
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    for name in _compiled_modules():
        done = subprocess.run([sys.executable, "-c", code, name], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, (name, done.returncode, done.stderr[-2000:])


def test_handlers_of_compiled_modules_keep_their_help():
    """A compiled function has no docstring; the verbs of compiled modules pass their help text."""
    from ircd.dispatch import CORE_COMMANDS

    specs = {spec.verb: spec for spec in CORE_COMMANDS}
    assert specs["PRIVMSG"].syntax == "PRIVMSG <target>{,<target>} :<text>"
    assert specs["TAGMSG"].help.startswith("Sends only message tags")
    assert specs["NICK"].syntax == "NICK <nickname>"
    assert specs["PONG"].help == "Answers a PING from the server."
    assert specs["JOIN"].syntax == "JOIN <channel>{,<channel>} [<key>{,<key>}]"
    assert specs["KICK"].help.startswith("Removes members from a channel.")
