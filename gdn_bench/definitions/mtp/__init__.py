"""gdn_mtp_qk4_v8_d128_k_last, T draft tokens per sequence from a state pool (speculative-decoding
verification): everything specific to it.

official.json  the official declaration, as flashinfer-bench's trace set held it (data)
definition     the flashinfer-bench Definition (the official one, the kit's reference), algorithms, spec (MTP)
reference      the definition's reference (its text is the Definition's `reference`)
mix            the serving-shaped mix plan, its stored tensors, the committed subset and the generated mix
"""
