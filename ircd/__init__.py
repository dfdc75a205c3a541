"""pircd: a pure-Python IRC server with the PIRCAN agent-network layer."""

__version__ = "0.1.0"


def build() -> str:
    """Which build of pircd runs: "compiled" when its per-line modules are the C extensions that
    ``pip install .`` builds with mypyc where it can (docs/compiled.md), else "pure"."""
    from importlib.util import find_spec

    spec = find_spec("ircd.server")
    origin = spec.origin if spec is not None else None
    return "pure" if origin is None or origin.endswith(".py") else "compiled"
