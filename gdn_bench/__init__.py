"""gdn_bench: the harness of the GDN contest kit, for both definitions of the FlashInfer
contest's Gated Delta Net track (gdn_decode_qk4_v8_d128_k_last and
gdn_prefill_qk4_v8_d128_k_last): trace sets, packing, checking, timing and reports.

definitions/ holds what is specific to one definition, a folder each (its DefinitionSpec,
reference, workload mix and kernel-level benchmark); the modules beside it are shared by
both. scripts/ are thin command lines over these modules."""
