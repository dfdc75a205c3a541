"""The shape of the core (docs/architecture.md): layers, no import cycles, small modules.

The import graph of ``ircd/`` is read from the source with ``ast``: every ``import`` and
``from ... import`` counts, at module level and inside functions alike. Imports under
``if TYPE_CHECKING:`` never run, and they count all the same where layers are concerned:

* the layer rule counts every import: a lower layer does not even name a higher one's
  types (it says what it needs with a ``Protocol``, as ``Client`` does of its ``Outlet``);
* the package cycle rule counts every import but one kind: naming the type of the
  composition root, ``ircd.server.Server`` (handlers are given ``ctx.server``). The root
  builds everything else and nothing imports it to run;
* between two modules of one package, only imports that run count: records that refer
  to each other (``Client.channels``, ``Channel.members``) name each other's types.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "ircd"

# Modules allowed past the size limit, with the reason.
LONG_MODULES = {
    "ircd.api": "the extension API: the one documented surface ext/ imports (tests/test_ext_boundary.py); "
    "splitting it would change what extensions import",
}
MAX_LINES = 500

# What the lower layers may not import, not even for types.
FORBIDDEN = {
    "ircd.state": ("ircd.delivery", "ircd.commands", "ircd.dispatch", "ircd.server", "ircd.net", "ircd.api",
                   "ircd.app", "ircd.sessions", "ircd.accounts", "ircd.accountops"),
    "ircd.delivery": ("ircd.commands", "ircd.dispatch", "ircd.server", "ircd.net", "ircd.api", "ircd.app",
                      "ircd.sessions", "ircd.accounts", "ircd.accountops"),
}
ROOT_MODULE = "ircd.server"


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of ``ircd`` that importing ``name`` loads (a name inside a module: that module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_only_nodes(tree: ast.Module) -> set[int]:
    nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                nodes.update(id(n) for n in ast.walk(child))
    return nodes


def _imports(module: str) -> list[tuple[str, bool]]:
    """(imported ircd module, type only) for every import in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = _type_only_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            # ``from ircd import caps`` imports the module ircd.caps
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            target = _resolve(name) if name.startswith("ircd") else None
            if target is not None and target != module:
                found.append((target, id(node) in type_only))
    return found


def _package(module: str) -> str:
    """The node of the package graph: ircd.<package> for a subpackage's module, else the module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[module].name == "__init__.py" else module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_state_and_delivery_import_no_higher_layer():
    """The network's state and local delivery sit below the commands: they never import a
    command, the dispatcher, the server or a transport, not even for a type."""
    wrong = []
    for module in sorted(MODULES):
        for layer, forbidden in FORBIDDEN.items():
            if not _within(module, layer):
                continue
            for target, _ in _imports(module):
                if any(_within(target, f) for f in forbidden):
                    wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_import_cycle_among_the_packages():
    """Packages (state, delivery, commands, net, store, proto, sasl) and the top-level modules
    form no cycle: every import runs one way."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        source = _package(module)
        graph.setdefault(source, set())
        for target, type_only in _imports(module):
            if type_only and target == ROOT_MODULE:
                continue
            dest = _package(target)
            if dest != source:
                graph[source].add(dest)
    assert _cycles(graph) == []


def test_no_import_cycle_between_modules():
    """Inside a package too, modules that run import each other one way."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        graph[module] = {t for t, type_only in _imports(module) if not type_only}
    assert _cycles(graph) == []


def test_modules_are_small():
    """No module of the core passes ~500 lines (the listed exceptions say why)."""
    long = {
        module: len(path.read_text(encoding="utf-8").splitlines())
        for module, path in MODULES.items()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    }
    assert sorted(set(long) - set(LONG_MODULES)) == []
    assert sorted(set(LONG_MODULES) - set(long)) == []  # an exception that no longer applies goes


def test_the_graph_sees_the_imports_it_must():
    """The reader itself: a function-level import and a type-only one are both found."""
    server = dict(_imports("ircd.server"))
    assert "ircd.state.local" in server or "ircd.state" in server
    assert ("ircd.server", True) in _imports("ircd.dispatch")
    assert any(t == "ircd.commands" for t, _ in _imports("ircd.server"))  # inside __init__
