"""Which build is under test: plain Python, or the compiled build; and how setup.py chooses.

``pip install .`` compiles the modules named in pyproject.toml (``[tool.pircd] compiled``)
where it can, and installs them as plain Python where it cannot (setup.py). The suite runs
on the checkout's source, plain ``.py`` files; CI runs it once more on a copy with the
compiled libraries of the wheel that ``PIRCD_COMPILE=1 pip wheel .`` builds and sets
``PIRCD_EXPECT_COMPILED=1`` there, so that a build that silently fell back to Python cannot
pass as compiled, and a stale compiled module left beside an edited source cannot shadow it
here.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import ircd

ROOT = Path(__file__).resolve().parent.parent
EXPECT_COMPILED = os.environ.get("PIRCD_EXPECT_COMPILED", "") not in ("", "0")


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
    path = Path(importlib.import_module(name).__file__ or "")
    assert path.suffix == (".so" if EXPECT_COMPILED else ".py"), path


def test_the_server_says_which_build_runs():
    expected = "compiled" if EXPECT_COMPILED else "pure"
    assert ircd.build() == expected
    done = subprocess.run([sys.executable, "-m", "ircd", "--version"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"pircd, version {ircd.__version__} ({expected} build)\n"


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


def _setup_module():
    """setup.py as a module: its functions, without running setup() (that needs __main__)."""
    spec = importlib.util.spec_from_file_location("pircd_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("value", "argv", "mode"), [
    (None, ["setup.py", "bdist_wheel"], "auto"),
    ("auto", ["setup.py", "bdist_wheel"], "auto"),
    ("", ["setup.py", "build_ext", "--inplace"], "auto"),
    ("0", ["setup.py", "bdist_wheel"], "off"),
    ("1", ["setup.py", "bdist_wheel"], "required"),
    (None, ["setup.py", "editable_wheel", "--dist-dir", "d"], "off"),  # pip install -e .
    (None, ["setup.py", "develop"], "off"),
    ("1", ["setup.py", "editable_wheel"], "required"),
])
def test_pip_install_compiles_unless_told_otherwise_or_editable(value, argv, mode):
    setup = _setup_module()
    environ = {} if value is None else {"PIRCD_COMPILE": value}
    assert setup.build_mode(environ, argv) == mode


@pytest.mark.parametrize(("mode", "argv", "requires"), [
    ("auto", ["setup.py", "egg_info"], ["mypy>=1.8"]),  # pip's question for the build requirements
    ("required", ["setup.py", "dist_info", "--output-dir", "d"], ["mypy>=1.8"]),
    ("off", ["setup.py", "egg_info"], []),
    ("off", ["setup.py", "bdist_wheel"], []),
])
def test_the_metadata_steps_ask_for_mypy_and_compile_nothing(mode, argv, requires):
    setup = _setup_module()
    assert setup.extensions(mode, argv) == ([], requires)


def test_an_unknown_compile_setting_is_refused():
    setup = _setup_module()
    with pytest.raises(SystemExit, match="PIRCD_COMPILE='maybe': expected 0, 1 or auto"):
        setup.build_mode({"PIRCD_COMPILE": "maybe"}, ["setup.py", "bdist_wheel"])


def _broken_build(setup, tmp_path, mode):
    """setup.py's build_ext on one good and one broken C extension, with a real compiler."""
    from setuptools import Distribution, Extension

    (tmp_path / "good.c").write_text(
        "#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"good\"};\n"
        "PyMODINIT_FUNC PyInit_good(void) { return PyModule_Create(&m); }\n")
    (tmp_path / "zbroken.c").write_text("this is not C;\n")
    dist = Distribution({"name": "t", "ext_modules": [Extension("good", [str(tmp_path / "good.c")]),
                                                       Extension("zbroken", [str(tmp_path / "zbroken.c")])]})
    command = setup.BuildExt(dist)
    command.mode = mode
    command.build_lib = str(tmp_path / "lib")
    command.build_temp = str(tmp_path / "temp")
    command.ensure_finalized()
    return command


def test_a_failed_compile_installs_plain_python_with_nothing_half_built(tmp_path, capfd):
    setup = _setup_module()
    command = _broken_build(setup, tmp_path, "auto")
    command.run()
    assert command.extensions == [] and command.get_outputs() == []
    assert list((tmp_path / "temp").rglob("good.o"))  # good was compiled (and linked) first
    assert list((tmp_path / "lib").glob("*.so")) == []  # and its library removed
    assert "the compiled build failed (" in capfd.readouterr().err


def test_a_failed_compile_fails_the_install_when_compiling_is_required(tmp_path):
    setup = _setup_module()
    command = _broken_build(setup, tmp_path, "required")
    from setuptools.errors import CompileError

    with pytest.raises(CompileError, match="failed with exit code 1"):
        command.run()
