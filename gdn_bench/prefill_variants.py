"""Variants of the prefill submission: solution/triton/prefill.py loaded afresh with some of
its integer settings changed, so that they compare side by side without editing the file
(--config of scripts/bench_prefill.py and scripts/profile_call.py).

SETTINGS is what --config may set: module-level integer settings that prefill.py reads on
every call, each with the values it takes (a Range), checked when the flag is parsed, on any
machine, so that a value the kernels cannot take (a chunk that is not a power of two, a zero
that would divide, a size that would allocate hundreds of GB) is one line naming the setting
before anything needs a GPU. Its launch tables (PREP_TABLE, PASS_TABLE, SUMMARY_TABLE,
FIXUP_TABLE, WALK_TABLE: dicts by architecture) are tuned by scripts/tune_launch.py or edited
in the file. When prefill.py's
settings change, SETTINGS changes with them (a test holds the two together: every setting
is an integer of the file, and its value there passes).
"""

import ast
from dataclasses import dataclass

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL


@dataclass(frozen=True)
class Range:
    """The integers a setting takes: from `low` to `high` (None: no bound), powers of two
    only if `power_of_two`."""

    low: int
    high: int | None = None
    power_of_two: bool = False

    def __str__(self) -> str:
        kind = "a power of two" if self.power_of_two else "an integer"
        return f"{kind} from {self.low} to {self.high}" if self.high is not None else f"{kind} >= {self.low}"

    def holds(self, value) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool) and value >= self.low
                and (self.high is None or value <= self.high) and (not self.power_of_two or value & (value - 1) == 0))


@dataclass(frozen=True)
class Setting:
    """What --config may set: `what` it is, in words, and the values it takes."""

    what: str
    takes: Range


# A (sequence, span) piece's scratch is 1.5 MB (its map and entering state): at most this many.
MOST_PIECES = 1024
SETTINGS = {
    # tl.arange takes powers of two and tl.dot at least 16; the scratch grows as CHUNK squared.
    "CHUNK": Setting("tokens per block", Range(16, 128, power_of_two=True)),
    "WALK_MAX_TOKENS": Setting("calls of at most this many tokens walk them; -1: none", Range(-1)),
    "WALK_MAX_MEAN_LENGTH": Setting("calls of at most this many tokens per sequence walk them; -1: none", Range(-1)),
    "SPAN_MIN_TOKENS": Setting("tokens per sequence, on average, from which spans are cut", Range(0)),
    "SPAN_MIN_BLOCKS": Setting("blocks per span, at least", Range(1)),
    "SPAN_MAX": Setting("spans a call is cut into, about (so per sequence at most); below 2: none",
                        Range(0, MOST_PIECES)),
    "SPAN_PIECES": Setting("(sequence, span) pieces per call, at most", Range(0, MOST_PIECES)),
    "ORDER_MIN_BLOCKS": Setting("blocks from which the walks take the sequences longest first", Range(0)),
    "ORDER_MIN_PROGRAMS": Setting("span pass programs from which the walks take the sequences longest first",
                                  Range(0)),
}
CONFIG_NAMES = tuple(SETTINGS)  # their names, in order


def check_name(name: str) -> None:
    """ValueError, one line listing those there are, unless `name` is one of SETTINGS."""
    if name not in SETTINGS:
        raise ValueError(f"{name}: not a setting --config takes; it takes {', '.join(CONFIG_NAMES)}")


def check_setting(name: str, value) -> None:
    """ValueError, one line naming the setting and what it takes, unless `name` is one of
    SETTINGS and `value` one of its values."""
    check_name(name)
    setting = SETTINGS[name]
    if not setting.takes.holds(value):
        raise ValueError(f"{name} ({setting.what}): expected {setting.takes}, got {value!r}")


def parse_config(text: str) -> dict:
    """'CHUNK=32,SPAN_MAX=8' -> {'CHUNK': 32, 'SPAN_MAX': 8}: names from SETTINGS,
    values Python literals that it takes (check_setting); else ValueError, one line."""
    usage = f"expected NAME=VALUE[,NAME=VALUE...], got {text!r}"
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise ValueError(usage) from None
    if not isinstance(call, ast.Call) or call.args or not call.keywords or any(k.arg is None for k in call.keywords):
        raise ValueError(usage)
    config = {}
    for keyword in call.keywords:
        check_name(keyword.arg)
        if keyword.arg in config:
            raise ValueError(f"{keyword.arg} given twice in {text!r}")
        try:
            config[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError):
            raise ValueError(f"{keyword.arg}: expected a Python literal, got {ast.unparse(keyword.value)!r}") from None
        check_setting(keyword.arg, config[keyword.arg])
    return config


def load_variant(config: dict, index: int):
    """prefill.py loaded afresh with `config`'s settings set (each must pass check_setting and
    be an integer setting of the module)."""
    for name, value in config.items():
        check_setting(name, value)
    entry = PREFILL.submission_entry()
    module = load_solution_file(entry, f"gdn_prefill_variant_{index}")
    for name, value in config.items():
        if not isinstance(getattr(module, name, None), int):
            raise ValueError(f"{entry.name} has no integer setting {name!r} that --config takes "
                             f"({', '.join(CONFIG_NAMES)})")
        setattr(module, name, value)
    return module


def variant_label(config: dict) -> str:
    return "ours" + (f"[{','.join(f'{k}={v}' for k, v in config.items())}]" if config else "")
