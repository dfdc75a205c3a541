"""The documentation cannot drift from the code.

* Every key of every config model (the core's ``ircd/config.py`` and the model
  each extension under ``ext/`` hands to ``api.config``) has a row in
  ``docs/configuration.md`` whose default is the model's default, and is
  shown (set or commented out) in ``conf/pircd.toml``, which loads to exactly
  the defaults it claims to show.
* Every verb of the command table (core and extensions), every capability the
  server can offer and every ISUPPORT token it sends is named in
  ``docs/commands.md``.
"""

from __future__ import annotations

import pkgutil
import re
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import ext
from ircd.api import ExtensionAPI, load_extensions
from ircd.config import Config, from_dict
from ircd.server import Server

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DOC = ROOT / "docs" / "configuration.md"
COMMANDS_DOC = ROOT / "docs" / "commands.md"
DEFAULT_CONF = ROOT / "conf" / "pircd.toml"

# Core sections whose value is a list of tables rather than one table.
_LIST_SECTIONS = {"opers"}


def _extension_models() -> dict[str, type[BaseModel]]:
    """The config model of every extension package, as each one asks for it in setup()."""
    names = [m.name for m in pkgutil.iter_modules(ext.__path__) if m.ispkg]
    models: dict[str, type[BaseModel]] = {}
    original = ExtensionAPI.config

    def recording(self: ExtensionAPI, model: type[BaseModel], section: str | None = None) -> Any:
        models[section or self.name] = model
        return original(self, model, section)

    config = from_dict({"server": {"extensions": names}})
    ExtensionAPI.config = recording  # type: ignore[method-assign]
    try:
        load_extensions(Server(config))
    finally:
        ExtensionAPI.config = original  # type: ignore[method-assign]
    return models


def _core_models() -> dict[str, type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {}
    for name, field in Config.model_fields.items():
        if name == "extensions":  # the raw extension tables, described by the extensions' own models
            continue
        annotation = field.annotation
        if name in _LIST_SECTIONS:
            annotation = annotation.__args__[0]  # type: ignore[union-attr]
        if isinstance(annotation, types.UnionType):  # a table that may be absent ([cluster])
            annotation = next(a for a in annotation.__args__ if a is not type(None))
        models[name] = annotation  # type: ignore[assignment]
    return models


def _all_models() -> dict[str, type[BaseModel]]:
    return {**_core_models(), **_extension_models()}


def _all_keys() -> list[tuple[str, str, Any]]:
    """(section, key, default) for every configuration key."""
    keys = []
    for section, model in _all_models().items():
        for key, field in model.model_fields.items():
            default = None if field.is_required() else field.get_default(call_default_factory=True)
            keys.append((section, key, default))
    return keys


def _doc_rows() -> dict[str, list[str]]:
    """``section.key`` -> the cells of its row in a configuration.md table."""
    rows: dict[str, list[str]] = {}
    for line in CONFIG_DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\|\s*`([a-z_]+\.[a-z0-9_]+)`\s*\|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def _doc_default(cell: str) -> Any:
    """A default cell: a TOML value in backticks, or "required" / "unset"."""
    text = cell.strip()
    if text in ("required", "unset"):
        return None
    assert text.startswith("`") and text.endswith("`"), f"default {cell!r} is not a `toml value`"
    return tomllib.loads("v = " + text[1:-1])["v"]


def test_every_config_key_is_in_configuration_md_with_its_default():
    rows = _doc_rows()
    missing = [f"{s}.{k}" for s, k, _ in _all_keys() if f"{s}.{k}" not in rows]
    assert not missing, f"docs/configuration.md has no row for: {', '.join(missing)}"
    wrong = []
    for section, key, default in _all_keys():
        cells = rows[f"{section}.{key}"]
        # columns: key | type | default | example | meaning
        assert len(cells) >= 4, f"row {section}.{key} needs type, default, example and meaning"
        if _doc_default(cells[1]) != default:
            wrong.append(f"{section}.{key}: doc says {cells[1]}, model says {default!r}")
    assert not wrong, "docs/configuration.md defaults differ from the models:\n" + "\n".join(wrong)


def _toml_keys() -> dict[str, set[str]]:
    """Section -> keys shown in conf/pircd.toml, set or commented out."""
    shown: dict[str, set[str]] = {}
    section = ""
    for line in DEFAULT_CONF.read_text(encoding="utf-8").splitlines():
        header = re.match(r"^#?\s*\[\[?([a-z_]+)\]\]?\s*$", line)
        if header:
            section = header.group(1)
            continue
        key = re.match(r"^#?\s*([a-z_][a-z0-9_]*)\s*=", line)
        if key and section:
            shown.setdefault(section, set()).add(key.group(1))
    return shown


def test_every_config_key_is_shown_in_conf_pircd_toml():
    shown = _toml_keys()
    missing = [f"{s}.{k}" for s, k, _ in _all_keys() if k not in shown.get(s, set())]
    assert not missing, f"conf/pircd.toml does not show: {', '.join(missing)}"


def test_conf_pircd_toml_holds_the_defaults():
    """Its header promises every key with its default value: loading it changes nothing."""
    data = tomllib.loads(DEFAULT_CONF.read_text(encoding="utf-8"))
    config = from_dict(data)
    assert config.model_dump(exclude={"extensions"}) == Config().model_dump(exclude={"extensions"})
    for name, model in _extension_models().items():
        assert model.model_validate(config.extension_section(name)) == model(), f"[{name}] is not the defaults"


# docs/commands.md ----------------------------------------------------------------------------


def _full_server() -> Server:
    """A server offering everything: the store attached (not opened), registration on, every extension."""
    from ircd.app import build_server

    names = [m.name for m in pkgutil.iter_modules(ext.__path__) if m.ispkg]
    return build_server(from_dict({"server": {"extensions": names}, "accounts": {"registration": True}}))


@pytest.fixture(scope="module")
def commands_doc() -> str:
    return COMMANDS_DOC.read_text(encoding="utf-8")


def test_every_verb_is_in_commands_md(commands_doc):
    server = Server(Config())
    load_extensions(server)
    verbs = set(server.commands.verbs()) | set(_full_server().commands.verbs())
    missing = sorted(v for v in verbs if not re.search(r"`" + re.escape(v) + r"\b", commands_doc))
    assert not missing, f"docs/commands.md does not document: {', '.join(missing)}"


def test_every_capability_is_in_commands_md(commands_doc):
    server = _full_server()
    names = [cap.name for cap in server.caps.offered(server)]
    missing = [n for n in names if f"`{n}" not in commands_doc]
    assert not missing, f"docs/commands.md does not list the capabilities: {', '.join(missing)}"


def test_every_isupport_token_is_in_commands_md(commands_doc):
    tokens = [token.partition("=")[0] for token in _full_server().isupport_tokens()]
    missing = [t for t in tokens if not re.search(r"`" + re.escape(t) + r"[`=]", commands_doc)]
    assert not missing, f"docs/commands.md does not explain the ISUPPORT tokens: {', '.join(missing)}"
