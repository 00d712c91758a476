"""solution/triton/direct_launch.py: the ways to launch a compiled kernel below Triton's launcher
wrapper, for the two known layouts of Triton's C launcher (stand-ins on CPU), descriptors encoded
once per object; on a GPU (skipped without one), prefill calls by the direct path write exactly
what their first calls, through Triton, wrote, and take the C launcher."""

import pytest
import torch
import triton

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.host_cost import call_inputs, our_calls

sub = load_solution_file(PREFILL.submission_entry(), "gdn_direct_launch")
direct_launch = load_solution_file(PREFILL.submission_entry().parent / "direct_launch.py", "gdn_direct_launch_alone")
C_LAUNCH = [].append  # a C function, as Triton's compiled launcher is
KNOWN_LAYOUTS = ((3, 6), (3, 9))  # Triton releases whose launcher layouts direct_launch knows (its docstring)


class _Source:
    signature = {"x_ptr": "*fp32", "desc": "tensordesc<bf16[64, 64]>", "n": "i32", "BLOCK": "constexpr"}


class _Wrapper:
    """Triton's launcher object, as 3.6 makes it (no arg_annotations) or 3.7.1 and 3.9 (with them)."""

    launch_cooperative_grid, launch_pdl, global_scratch_size, profile_scratch_size = False, True, 0, 0

    def __init__(self, launch, annotated=False):
        self.launch = launch
        if annotated:
            self.arg_annotations, self.kernel_signature = "annotations", "signature"


class _Compiled:
    function, packed_metadata, src = "function", ("metadata",), _Source()

    def __init__(self, wrapper, descriptors=None):
        self.run = wrapper
        self.metadata = type("Metadata", (), {"tensordesc_meta": descriptors})()


def _descriptor_wrapper(launcher):
    """A function that closes over the C launcher as Triton's descriptor wrapper does."""
    def inner(*args):
        return launcher(*args)
    return inner


def test_the_spread_layout_of_triton_3_6():
    compiled = _Compiled(_Wrapper(C_LAUNCH))
    direct, wrapper = direct_launch.ways_to_launch(compiled)
    assert direct.run is C_LAUNCH and direct.spread and [p for p, _ in direct.descriptors] == [1]
    assert direct.head == ("function", False, True, None, None, ("metadata",), None, None, None)
    assert wrapper == direct_launch.LaunchWay(compiled.run, ("function", ("metadata",), None, None, None), True, ())


def test_the_annotated_layout_of_triton_3_7_1_and_3_9_under_the_descriptor_wrapper():
    direct, _ = direct_launch.ways_to_launch(_Compiled(_Wrapper(_descriptor_wrapper(C_LAUNCH), annotated=True)))
    assert direct.run is C_LAUNCH and not direct.spread
    assert direct.head == ("function", False, True, ("metadata",), None, None, None, None, None, "annotations",
                           "signature")


@pytest.mark.parametrize("change", ["scratch", "python launcher", "sanitizer"])
def test_the_wrapper_alone_where_it_has_work_or_the_launcher_is_unknown(change):
    wrapper = _Wrapper(C_LAUNCH if change != "python launcher" else (lambda *args: None))
    if change == "scratch":
        wrapper.global_scratch_size = 128
    if change == "sanitizer":
        wrapper.gsan_enabled = True
    assert [way.run for way in direct_launch.ways_to_launch(_Compiled(wrapper))] == [wrapper]


def test_descriptors_are_spliced_in_and_encoded_once_per_object():
    encoded = []

    def expand(descriptor):
        encoded.append(descriptor)
        return [f"map of {descriptor}", 64, 1]

    way = direct_launch.LaunchWay("run", ("head",), True, ((1, expand),))
    kept, first, second = {}, "descriptor a", "descriptor b"
    assert direct_launch.launch_arguments((2, 1, 1), "stream", way, (7, first, 9, 16), kept) == (
        2, 1, 1, "stream", "head", 7, "map of descriptor a", 64, 1, 9, 16)
    direct_launch.launch_arguments((2, 1, 1), "stream", way, (7, first, 9, 16), kept)
    folded = direct_launch.launch_arguments((1, 1, 1), "s", way._replace(spread=False), (7, second, 9, 16), kept)
    assert folded == (1, 1, 1, "s", "head", (7, "map of descriptor b", 64, 1, 9, 16))
    assert encoded == [first, second]


@pytest.mark.parametrize("spread", [True, False])
def test_a_kept_layout_lays_out_what_launch_arguments_does_and_keeps_leading_descriptors(spread):
    """argument_layout(...)(stream, args) == launch_arguments(...), for either layout, with leading
    descriptors (the layout keeps the last ones' expansion) that change and come back; each
    descriptor object is encoded once."""
    encoded = []

    def expand(descriptor, record=False):
        if record:
            encoded.append(descriptor)
        return [f"map of {descriptor}", 64]

    def way(record):
        return direct_launch.LaunchWay("run", ("head",), spread, tuple(
            (position, lambda d: expand(d, record)) for position in (0, 1)))
    layout = direct_launch.argument_layout((2, 1, 1), way(True), (16,), {})
    first, second = ("a", "b", 9), (object(), "b", 10)
    for args in (first, first, second, first):
        assert layout("stream", args) == direct_launch.launch_arguments((2, 1, 1), "stream", way(False), args, {},
                                                                        (16,))
    assert encoded == ["a", "b", second[0]]  # each object once


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("lengths", [(6,), (300,), (512,) * 16, (8192,)])
def test_direct_launches_write_what_triton_s_did(lengths):
    """Each entry point twice on the same inputs into NaN-filled outputs: the first call goes
    through Triton (compiling), the second by the direct path; bit for bit the same. On a Triton
    release of a known layout, every launcher of the call kept the C launcher."""
    x = call_inputs(lengths, "cuda", seed=len(lengths))
    written = []
    for _ in range(2):
        pool, outputs = x["pool"].clone(), []
        for call in our_calls(sub, dict(x, pool=pool)).values():  # kernel(), then pooled_prefill()
            x["output"].fill_(float("nan"))
            x["new_state"].fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            outputs += [x["output"].clone(), x["new_state"].clone()]
        written.append((*outputs, pool))
    for first, second in zip(*written):
        assert torch.equal(first.nan_to_num(7.0), second.nan_to_num(7.0))
    assert not any(t.isnan().any() for t in written[1][:3])  # kernel()'s output and state, pooled's output
    if KNOWN_LAYOUTS[0] <= tuple(int(p) for p in triton.__version__.split(".")[:2]) <= KNOWN_LAYOUTS[1]:
        kept = [entry[0].run for launcher in vars(sub).values() if isinstance(launcher, sub.Launcher)
                for entry in launcher.compiled.values() if entry]
        assert kept and all(run.__class__.__name__ == "builtin_function_or_method" for run in kept)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("lengths", [(300,), (8192,)])
def test_a_call_in_a_cuda_graph_and_on_another_stream_writes_what_it_does_eagerly(lengths):
    """The direct path's scratch is a raw block of CUDA's caching allocator: captured into a
    graph it comes from the graph's pool, on a side stream from that stream's; the replay and the
    side stream's call write bit for bit what the eager call on the default stream wrote."""
    x = call_inputs(lengths, "cuda", seed=len(lengths) + 5)
    kernel = our_calls(sub, x)["kernel"]
    kernel()  # through Triton (compiling), then the direct path
    written = []

    def poisoned(run):
        x["output"].fill_(float("nan"))
        x["new_state"].fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        written.append((x["output"].clone(), x["new_state"].clone()))

    poisoned(kernel)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel()
    poisoned(graph.replay)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        poisoned(kernel)
    eager = written[0]
    assert not eager[0].isnan().any() and not eager[1].isnan().any()
    for other in written[1:]:
        assert torch.equal(eager[0], other[0]) and torch.equal(eager[1], other[1])
