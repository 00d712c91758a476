"""The roles algorithms play in every definition's report, by name.

Plain strings with no dependencies, so that the data layer (gdn_bench.results), the report
and the benchmark scripts name them without importing the algorithm registry. Every
definition registers an algorithm under each of these names (gdn_bench.definitions); its
submission has a name of its own (DefinitionSpec.submission, recorded in a run's meta).
"""

# FlashInfer, as the contest's baseline calls it: the FI ratio is its kernel time over the submission's.
BASELINE = "fi-baseline"
# The definition's math as a plain PyTorch loop, the slowest honest implementation; not the
# definition's own `reference`, whose time the contest score divides by ours (gdn_bench.reference_times).
REFERENCE = "pt-reference"
