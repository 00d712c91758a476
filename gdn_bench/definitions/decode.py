"""The contest definition gdn_decode_qk4_v8_d128_k_last as a flashinfer-bench Definition.

Shapes: q, k [B, 1, 4, 128] bf16; v [B, 1, 8, 128] bf16; state [B, 8, 128, 128] f32 (K-last,
optional); A_log, dt_bias [8] f32; a, b [B, 1, 8] bf16; scale f32 scalar. Outputs: output
[B, 1, 8, 128] bf16 and new_state [B, 8, 128, 128] f32. The reference is the text of
gdn_bench/reference.py.
"""

from pathlib import Path

from flashinfer_bench import AxisConst, AxisVar, Definition, TensorSpec

from gdn_bench import reference

DEFINITION_NAME = "gdn_decode_qk4_v8_d128_k_last"
NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE = 4, 8, 128


def reference_source() -> str:
    """The reference implementation's source text (a module defining `run`)."""
    return Path(reference.__file__).read_text(encoding="utf-8")


def _spec(shape, dtype, description):
    return TensorSpec(shape=shape, dtype=dtype, description=description)


def build_definition() -> Definition:
    """The decode definition, with this project's reference."""
    qk = ["batch_size", "seq_len", "num_q_heads", "head_size"]
    per_v_head = ["batch_size", "seq_len", "num_v_heads"]
    state = ["batch_size", "num_v_heads", "head_size", "head_size"]
    return Definition(
        name=DEFINITION_NAME,
        op_type="gdn",
        description=(
            "Gated Delta Net decode step, Qwen3-Next linear attention at TP=4 (4 q/k heads, "
            "8 v heads, head size 128), state in K-last layout [B, HV, V, K]."
        ),
        tags=["stage:decode", "model:qwen3-next", "layout:k-last"],
        axes={
            "batch_size": AxisVar(description="Sequences decoded together."),
            "seq_len": AxisConst(value=1, description="One token per decode step."),
            "num_q_heads": AxisConst(value=NUM_Q_HEADS, description="Query heads (16 / TP 4)."),
            "num_k_heads": AxisConst(value=NUM_Q_HEADS, description="Key heads (16 / TP 4)."),
            "num_v_heads": AxisConst(value=NUM_V_HEADS, description="Value heads (32 / TP 4)."),
            "head_size": AxisConst(value=HEAD_SIZE),
        },
        constraints=["num_v_heads % num_q_heads == 0", "num_k_heads == num_q_heads"],
        inputs={
            "q": _spec(qk, "bfloat16", "Query."),
            "k": _spec(["batch_size", "seq_len", "num_k_heads", "head_size"], "bfloat16", "Key."),
            "v": _spec(per_v_head + ["head_size"], "bfloat16", "Value."),
            "state": _spec(state, "float32", "Recurrent state [B, HV, V, K] (optional: None = 0)."),
            "A_log": _spec(["num_v_heads"], "float32", "Log decay rate per v-head."),
            "a": _spec(per_v_head, "bfloat16", "Decay input, through softplus(a + dt_bias)."),
            "dt_bias": _spec(["num_v_heads"], "float32", "Decay bias per v-head."),
            "b": _spec(per_v_head, "bfloat16", "Update gate logit: beta = sigmoid(b)."),
            "scale": _spec(None, "float32", "Output scale; 0 or None means 1/sqrt(head_size)."),
        },
        outputs={
            "output": _spec(per_v_head + ["head_size"], "bfloat16", "scale * (new_state @ q)."),
            "new_state": _spec(state, "float32", "Updated state, K-last like state."),
        },
        reference=reference_source(),
    )
