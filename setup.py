"""Build hook for pircd's compiled build (docs/compiled.md).

``pip install .`` compiles the modules listed under ``[tool.pircd] compiled`` in
pyproject.toml with mypyc (from the mypy project) into C extensions, which Python
imports in place of the ``.py`` files; the source is the same, only how CPython runs
it changes. Where that cannot be done (no C compiler, no Python headers, mypy not
installable or refusing the source) the same command installs plain Python and says
why on its output (``pip install -v`` shows it); ``pircd --version`` says which build
is installed.

``PIRCD_COMPILE`` chooses: unset or ``auto`` as above; ``1`` compiles or fails (CI, the
benchmarks); ``0`` installs plain Python without trying. An editable install
(``pip install -e .``) is plain Python unless ``PIRCD_COMPILE=1``: compiled modules
built beside the sources would hide every later edit of them.
"""

import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
MYPY = "mypy>=1.8"
ENV = "PIRCD_COMPILE"


def compiled_modules() -> list[str]:
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["pircd"]["compiled"]


def build_mode(environ: Mapping[str, str], argv: list[str]) -> str:
    """"off", "auto" or "required", from ``PIRCD_COMPILE`` and the setup command."""
    value = environ.get(ENV, "").strip().lower()
    if value in ("0", "off", "no", "false"):
        return "off"
    if value in ("1", "on", "yes", "true"):
        return "required"
    if value not in ("", "auto"):
        raise SystemExit(f"{ENV}={value!r}: expected 0, 1 or auto")
    if "develop" in argv or "editable_wheel" in argv:
        return "off"
    return "auto"


def _say(text: str) -> None:
    print(f"pircd: {text}", file=sys.stderr, flush=True)


def _first_line(exc: BaseException) -> str:
    text = (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class BuildExt(build_ext):
    """build_ext that, in "auto" mode, installs plain Python when a module fails to compile.

    mypyc's modules share one library, so a build with some of them missing would not
    import: on any failure every built file is removed and none is installed."""

    mode = "auto"

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # the compiler's and linker's errors, a missing header, a full disk
            if self.mode != "auto":
                raise
            for path in self.get_outputs():
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
            self.extensions = []
            self.distribution.ext_modules = []
            _say(f"the compiled build failed ({_first_line(exc)}); installing plain Python")


def extensions(mode: str, argv: list[str]) -> tuple[list, list[str]]:
    """(ext_modules, setup_requires) for this build."""
    if mode == "off":
        return [], []
    if "egg_info" in argv or "dist_info" in argv:  # pip asks for the build requirements first (it
        return [], [MYPY]  # installs mypy for the build itself): metadata only, nothing to compile yet
    try:
        from mypyc.build import mypycify
    except ImportError:
        if mode == "required":
            raise SystemExit(f"{ENV}=1 needs {MYPY} in the build environment") from None
        _say(f"{MYPY} is not installed here; installing plain Python")
        return [], []
    try:
        return mypycify(compiled_modules(), opt_level="3"), [MYPY]
    except (Exception, SystemExit) as exc:  # mypy rejected the source: it exits
        if mode == "required":
            raise
        _say(f"mypyc could not compile the source ({_first_line(exc)}); installing plain Python")
        return [], []


if __name__ == "__main__":
    BuildExt.mode = build_mode(os.environ, sys.argv)
    ext_modules, setup_requires = extensions(BuildExt.mode, sys.argv)
    setup(ext_modules=ext_modules, setup_requires=setup_requires, cmdclass={"build_ext": BuildExt})
