"""gdn_prefill_qk4_v8_d128_k_last, variable-length sequences packed along tokens: everything
specific to it.

definition  the flashinfer-bench Definition, the algorithms and the DefinitionSpec (PREFILL)
reference   the definition's reference (its text is the Definition's `reference`)
mix         the mix plan, model-like inputs, the committed subset and the generated mix
bench       scripts/bench_prefill.py's logic: kernel-level times per call shape
variants    prefill.py with some settings changed (--config), and which settings those are
"""
