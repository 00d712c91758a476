"""gdn_bench: the harness around the GDN decode submission (reference, trace set, packing,
checking, timing and reports) for the FlashInfer contest's gdn_decode_qk4_v8_d128_k_last."""
