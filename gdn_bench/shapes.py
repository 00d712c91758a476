"""Head counts and head size shared by both GDN definitions (Qwen3-Next at TP=4)."""

NUM_Q_HEADS = 4  # q and k heads (16 / TP 4)
NUM_V_HEADS = 8  # v heads (32 / TP 4); v-head h reads q/k head h // (NUM_V_HEADS // NUM_Q_HEADS)
HEAD_SIZE = 128
