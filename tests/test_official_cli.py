"""flashinfer-bench main's CLI on a whole mix (gdn_bench.official_cli): the reference's cost."""

import json

import pytest

from gdn_bench.official_cli import OFFICIAL_MTP_LAUNCHES_PER_STEP, reference_calls
from gdn_bench.paths import project_root
from helpers import counted_launches, mtp_inputs


def test_official_mtp_reference_launches_as_declared():
    namespace = {}
    exec(json.loads((project_root() / "gdn_bench/definitions/mtp/official.json").read_text())["reference"], namespace)
    assert counted_launches(namespace["run"], mtp_inputs(2, 3, 5)) == pytest.approx(
        OFFICIAL_MTP_LAUNCHES_PER_STEP * 8 * 2 * 3, rel=0.05)


def test_cli_reference_calls():
    harness = {"warmup": 10, "iterations": 50, "trials": 3}
    assert reference_calls(harness, profiled=False) == 3
    assert reference_calls(harness, profiled=True) == 3 * 67
