"""Variants of the prefill submission: solution/triton/prefill.py loaded afresh with some of
its settings changed, so that launch configurations compare side by side without editing the
file (--config of scripts/bench_prefill.py and scripts/profile_call.py).

CONFIG_NAMES is what --config may set: module-level settings that prefill.py reads on every
call, integers and Launch values (a Launch takes the tuple of its fields, e.g.
SUMMARY_LAUNCH=(64,4,2)). Its tables (PASS_TABLE, WALK_TABLE) are edited in the file.
"""

import ast

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL

CONFIG_NAMES = ("CHUNK", "PREP_WARPS", "WALK_MAX_TOKENS", "WALK_MAX_MEAN_LENGTH", "SPAN_MIN_TOKENS",
                "SPAN_MIN_BLOCKS", "SPAN_MAX", "SPAN_PIECES", "SUMMARY_LAUNCH", "FIXUP_LAUNCH")


def parse_config(text: str) -> dict:
    """'CHUNK=32,PREP_WARPS=8' -> {'CHUNK': 32, 'PREP_WARPS': 8}: names from CONFIG_NAMES,
    values Python literals (a tuple may hold commas: SUMMARY_LAUNCH=(64,4,2))."""
    usage = f"expected NAME=VALUE[,NAME=VALUE...], got {text!r}"
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise ValueError(usage) from None
    if not isinstance(call, ast.Call) or call.args or not call.keywords or any(k.arg is None for k in call.keywords):
        raise ValueError(usage)
    config = {}
    for keyword in call.keywords:
        if keyword.arg not in CONFIG_NAMES:
            raise ValueError(f"{keyword.arg}: not a setting --config takes; it takes {', '.join(CONFIG_NAMES)}")
        try:
            config[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError):
            raise ValueError(f"{keyword.arg}: expected a Python literal, got {ast.unparse(keyword.value)!r}") from None
    return config


def _like(current, value, name: str):
    """`value` in the form of the module's `current` one: an integer, or a tuple of a
    NamedTuple's fields (made into that NamedTuple); else ValueError."""
    if hasattr(current, "_fields"):
        if isinstance(value, tuple) and len(value) == len(current):
            return type(current)(*(_like(c, v, f"{name}.{f}") for f, c, v in zip(current._fields, current, value)))
        raise ValueError(f"{name}: expected a tuple ({', '.join(current._fields)}), got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"{name}: expected an integer, got {value!r}")


def load_variant(config: dict, index: int):
    """prefill.py loaded afresh with `config`'s settings set (each must be one of
    CONFIG_NAMES, in the module, and of its value's form)."""
    entry = PREFILL.submission_entry()
    module = load_solution_file(entry, f"gdn_prefill_variant_{index}")
    for name, value in config.items():
        if name not in CONFIG_NAMES or not hasattr(module, name):
            raise ValueError(f"{entry.name} has no setting {name!r} that --config takes ({', '.join(CONFIG_NAMES)})")
        setattr(module, name, _like(getattr(module, name), value, name))
    return module


def variant_label(config: dict) -> str:
    return "ours" + (f"[{','.join(f'{k}={v}' for k, v in config.items())}]" if config else "")
