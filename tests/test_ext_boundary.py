"""The extension boundary, checked on the source with ``ast``.

ARCHITECTURE.md: "``ext/`` imports only ``ircd.api`` and ``ircd.proto``; a test enforces it."
And the other way round: the core never imports an extension; only the loaders
(``ircd.api.load_extensions`` and the CLI's extension commands) reach ``ext``,
by name, through ``importlib``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_IRCD = ("ircd.api", "ircd.proto")
LOADERS = {"ircd/api.py", "ircd/cli.py"}


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _dynamic_import_target(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module(...)`` / ``__import__(...)``, as far as it is literal."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):  # f"ext.{name}": its literal head
        head = arg.values[0] if arg.values else None
        return head.value if isinstance(head, ast.Constant) else "<dynamic>"
    return "<dynamic>"


def imported_modules(source: str) -> list[tuple[int, str, bool]]:
    """(line, module, dynamic) for every import in ``source``; ``from a import b`` yields ``a.b``."""
    found: list[tuple[int, str, bool]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, False) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the same package
                continue
            module = node.module or ""
            found.extend((node.lineno, f"{module}.{alias.name}", False) for alias in node.names)
        elif isinstance(node, ast.Call):
            target = _dynamic_import_target(node)
            if target is not None:
                found.append((node.lineno, target, True))
    return found


def _is_ircd(module: str) -> bool:
    return module == "ircd" or module.startswith("ircd.")


def _allowed_for_ext(module: str) -> bool:
    return any(module == allowed or module.startswith(allowed + ".") for allowed in ALLOWED_IRCD)


def _is_ext(module: str) -> bool:
    return module == "ext" or module.startswith("ext.")


def ext_violations(path: Path, source: str) -> list[str]:
    return [
        f"{path}:{line} imports {module}"
        for line, module, _ in imported_modules(source)
        if _is_ircd(module) and not _allowed_for_ext(module)
    ]


def core_violations(relpath: str, source: str) -> list[str]:
    bad = []
    for line, module, dynamic in imported_modules(source):
        if not _is_ext(module) and module != "<dynamic>":
            continue
        if module == "<dynamic>":
            continue  # importlib of a computed name that is not visibly ext (the core's own commands)
        if not dynamic or relpath not in LOADERS:
            bad.append(f"{relpath}:{line} imports {module}" + (" (dynamically)" if dynamic else ""))
    return bad


def test_the_walk_finds_the_sources():
    ext_files = [p.relative_to(ROOT).as_posix() for p in _sources("ext")]
    assert "ext/pircan/__init__.py" in ext_files and "ext/pircan/irc/messages.py" in ext_files
    assert len(_sources("ircd")) > 20


@pytest.mark.parametrize("path", _sources("ext"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_ext_imports_only_the_api_and_proto(path):
    assert ext_violations(path, path.read_text(encoding="utf-8")) == []


def test_the_core_never_imports_an_extension():
    bad = []
    for path in _sources("ircd"):
        bad += core_violations(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
    assert bad == []


def test_the_loaders_use_importlib():
    """The extension loader exists and goes through importlib (so the check above is not vacuous)."""
    api = (ROOT / "ircd" / "api.py").read_text(encoding="utf-8")
    assert any(dyn and module.startswith("ext.") for _, module, dyn in imported_modules(api))


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from ircd.api import Client\nfrom ircd.proto.lines import Message\nimport ircd.proto\n", []),
        ("from ircd import api, proto\nfrom . import store\nimport click\n", []),
        ("from ircd.server import Server\n", ["x.py:1 imports ircd.server.Server"]),
        ("import ircd.store\n", ["x.py:1 imports ircd.store"]),
        ("from ircd import server\n", ["x.py:1 imports ircd.server"]),
        ("import ircd\n", ["x.py:1 imports ircd"]),
        ("from ircd.apiary import x\n", ["x.py:1 imports ircd.apiary.x"]),
        ("import importlib\nimportlib.import_module('ircd.channel')\n", ["x.py:2 imports ircd.channel"]),
        ("def f():\n    from ircd.delivery.replies import ReplyBuffer\n", ["x.py:2 imports ircd.delivery.replies.ReplyBuffer"]),
    ],
)
def test_the_ext_checker_itself(source, expected):
    assert ext_violations(Path("x.py"), source) == expected


@pytest.mark.parametrize(
    "relpath, source, expected",
    [
        ("ircd/api.py", "import importlib\nimportlib.import_module(f'ext.{name}')\n", []),
        ("ircd/server.py", "import importlib\nimportlib.import_module(f'ext.{name}')\n",
         ["ircd/server.py:2 imports ext. (dynamically)"]),
        ("ircd/api.py", "from ext.pircan import rules\n", ["ircd/api.py:1 imports ext.pircan.rules"]),
        ("ircd/cli.py", "import ext\n", ["ircd/cli.py:1 imports ext"]),
        ("ircd/commands/__init__.py", "import importlib\nimportlib.import_module(f'ircd.commands.{n}')\n", []),
        ("ircd/x.py", "import extra\nfrom extension import y\n", []),
    ],
)
def test_the_core_checker_itself(relpath, source, expected):
    assert core_violations(relpath, source) == expected
