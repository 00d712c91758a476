"""gdn_decode_qk4_v8_d128_k_last, one decode step: everything specific to it.

definition  the flashinfer-bench Definition, the algorithms and the DefinitionSpec (DECODE)
reference   the definition's reference (its text is the Definition's `reference`)
mix         the embedded workloads: the contest's batch mix and model-like ones
bench       scripts/bench_kernel.py's logic: kernel-level times per batch size
tuning      scripts/tune_launch.py's logic: the (BV, warps) sweep and kernel.py's LAUNCH_TABLE
"""
