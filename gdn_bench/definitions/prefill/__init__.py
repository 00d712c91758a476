"""gdn_prefill_qk4_v8_d128_k_last, variable-length sequences packed along tokens: what the
definition is. (The tools that measure its submission are harness modules:
gdn_bench.prefill_bench, gdn_bench.prefill_variants.)

definition  the flashinfer-bench Definition, the algorithms and the DefinitionSpec (PREFILL)
reference   the definition's reference (its text is the Definition's `reference`)
mix         the mix plan, model-like inputs, the committed subset and the generated mix
"""
