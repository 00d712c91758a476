"""Head counts and head size shared by both GDN definitions (Qwen3-Next at TP=4), and the
output scale rule: out = scale * (S @ q), where a scale of 0 or None means 1/sqrt(HEAD_SIZE).

The submissions (solution/) and the definitions' reference texts (definitions/decode/ and
definitions/prefill/reference.py) must stay self-contained, so they state these facts themselves; the
rest of the harness, the baselines and the tests take them from here.
"""

import math

NUM_Q_HEADS = 4  # q and k heads (16 / TP 4)
NUM_V_HEADS = 8  # v heads (32 / TP 4); v-head h reads q/k head h // (NUM_V_HEADS // NUM_Q_HEADS)
HEAD_SIZE = 128
DEFAULT_SCALE = 1.0 / math.sqrt(HEAD_SIZE)  # what a scale of 0 or None stands for


def output_scale(scale) -> float:
    """`scale` (None, a number or a one-element tensor) as the Python float it stands for:
    DEFAULT_SCALE for 0 or None, else its value."""
    value = 0.0 if scale is None else float(scale)
    return value if value != 0.0 else DEFAULT_SCALE
