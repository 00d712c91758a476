"""The contest's GDN definitions, one DefinitionSpec each (gdn_bench.definitions.spec).
A new definition is a folder beside decode/ and prefill/ and one entry in DEFINITIONS."""

from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.spec import DefinitionSpec

DEFINITIONS: dict[str, DefinitionSpec] = {spec.short: spec for spec in (DECODE, PREFILL)}
DEFAULT = DECODE.short
BOTH = "both"  # what --definition takes for every definition of the track, one after the other


def resolve(name: str) -> DefinitionSpec:
    """The spec named by its short name (decode, prefill) or full name; else ValueError."""
    for spec in DEFINITIONS.values():
        if name in (spec.short, spec.name):
            return spec
    valid = ", ".join(f"{s.short} ({s.name})" for s in DEFINITIONS.values())
    raise ValueError(f"unknown definition {name!r}; valid: {valid}")


def chosen(name: str) -> list[DefinitionSpec]:
    """The definitions `name` names: every one for BOTH, else the one `resolve` gives."""
    return list(DEFINITIONS.values()) if name == BOTH else [resolve(name)]
