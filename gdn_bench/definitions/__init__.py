"""The contest's GDN definitions, one DefinitionSpec each (gdn_bench.definitions.spec).
A new definition is a folder beside decode/, prefill/ and mtp/ and one entry in DEFINITIONS.

The track scores decode and prefill (TRACK); mtp, the third official GDN definition, is not
part of its score, so `--definition both` runs the track's two."""

from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.mtp.definition import MTP
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.spec import DefinitionSpec

DEFINITIONS: dict[str, DefinitionSpec] = {spec.short: spec for spec in (DECODE, PREFILL, MTP)}
TRACK = (DECODE, PREFILL)  # the definitions the track's score is the mean of
DEFAULT = DECODE.short
BOTH = "both"  # what --definition takes for every definition of the track, one after the other


def resolve(name: str) -> DefinitionSpec:
    """The spec named by its short name (decode, prefill, mtp) or full name; else ValueError."""
    for spec in DEFINITIONS.values():
        if name in (spec.short, spec.name):
            return spec
    valid = ", ".join(f"{s.short} ({s.name})" for s in DEFINITIONS.values())
    raise ValueError(f"unknown definition {name!r}; valid: {valid}")


def chosen(name: str) -> list[DefinitionSpec]:
    """The definitions `name` names: the track's (TRACK) for BOTH, else the one `resolve` gives."""
    return list(TRACK) if name == BOTH else [resolve(name)]
