"""gdn_decode_qk4_v8_d128_k_last, one decode step: what the definition is. (The tools that
measure its submission are harness modules: gdn_bench.decode_bench, gdn_bench.decode_tuning.)

definition  the flashinfer-bench Definition, the algorithms and the DefinitionSpec (DECODE)
reference   the definition's reference (its text is the Definition's `reference`)
mix         the embedded workloads: the contest's batch mix and model-like ones
"""
