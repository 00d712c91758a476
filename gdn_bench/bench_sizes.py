"""The sizes the GPU benchmarks time by default, apart from the modules that time them (which
import torch), so that their command lines show them, and check their arguments, before torch
is imported."""

# Decode batch sizes: bench_kernel's table, tune_launch's decode probes, bench_serving's pooled decode.
DECODE_BATCH_SIZES = (1, 4, 8, 16, 32, 48, 64, 128, 256, 512)
# bench_prefill's T x N grid (total_seq_len, num_seqs), where --seq-lens or --num-seqs asks for one.
PREFILL_SEQ_LENS = (6, 64, 300, 1024, 4096, 8192)
PREFILL_NUM_SEQS = (1, 4, 32)
# bench_serving's MTP calls: batch sizes and tokens per row.
MTP_BATCH_SIZES = (1, 16, 64)
DRAFT_LENGTHS = (2, 4, 8)
# bench_serving's pooled prefill calls, by sequence lengths: the token walk, the chunked path, spans.
PREFILL_CALLS = ((6,), (16,) * 4, (64,), (300,), (75,) * 4, (1024,), (256,) * 4, (4096,), (512,) * 16, (8192,))
# bench_serving's host-cost calls (gdn_bench.host_cost), by sequence lengths: the token walk, the
# chunked path, spans, many sequences.
HOST_COST_CALLS = ((6,), (300,), (1024,), (8192,), (512,) * 16)
