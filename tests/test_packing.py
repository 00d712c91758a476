"""scripts/pack_solution.py and gdn_bench.packing: the round trip and every error case."""

import json
import shutil
import subprocess
import sys

import pytest
from flashinfer_bench import Solution

from flashinfer_bench.agents.solution_handler import VALID_SOURCE_EXTENSIONS

from gdn_bench.algos import load_module
from gdn_bench.packing import PackError, config_text_for, pack, read_config, solution_dir, write_solution
from helpers import ROOT

SCRIPT = ROOT / "scripts" / "pack_solution.py"
pack_script = load_module(SCRIPT, "pack_solution_script_packing")
CONFIG_PATH = ROOT / "config.toml"
GOOD_CONFIG = CONFIG_PATH.read_text(encoding="utf-8")
SOURCES = solution_dir(ROOT, "triton")


def _run(*args):
    """The script as a command: a process of its own."""
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def _main(capsys, *args) -> tuple[int, str]:
    """The script's main in this process (argument errors included): (exit status, stderr)."""
    try:
        code = pack_script.main(list(map(str, args)))
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def test_round_trip(tmp_path):
    out = tmp_path / "solution.json"
    result = _run("-o", out)
    assert result.returncode == 0, result.stderr
    solution = Solution.model_validate_json(out.read_text())
    assert solution.definition == "gdn_decode_qk4_v8_d128_k_last"
    assert solution.spec.language.value == "triton"
    assert solution.spec.entry_point == "kernel.py::kernel"
    assert solution.spec.destination_passing_style is True
    sources = {s.path: s.content for s in solution.sources}
    folder = SOURCES
    assert sources == {p.name: p.read_text() for p in folder.iterdir() if p.suffix in VALID_SOURCE_EXTENSIONS}
    assert "kernel.py" in sources
    assert solution.hash() == pack(read_config(CONFIG_PATH), SOURCES).hash()


def _config(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('name = "gdn-decode-fla-recurrent"\n', ""), r"missing key 'name' in \[solution\]"),
        (lambda t: t.replace('author = "gdn-contest-kit"\n', ""), r"missing key 'author' in \[solution\]"),
        (lambda t: t.replace('entry_point = "kernel.py::kernel"\n', ""), r"missing key 'entry_point' in \[build\]"),
        (lambda t: t.replace("destination_passing_style = true\n", ""), r"missing key 'destination_passing_style'"),
        (lambda t: t.replace('language = "triton"\n', ""), r"missing key 'language' in \[build\]"),
        (lambda t: t.replace("[build", "[bild"), r"missing section \[build\]"),
        (lambda t: t.replace("gdn_decode_qk4_v8_d128_k_last", "gdn_nope"),
         r"no submission for gdn_decode_qk4_v8_d128_k_last: \[solution\] names 'gdn_nope'"),
        (lambda t: t.replace("kernel.py::kernel", "kernel.py::no_such_function"),
         r"function 'no_such_function' is not defined"),
        (lambda t: t.replace("kernel.py::kernel", "missing.py::kernel"), r"file .*missing.py does not exist"),
        (lambda t: t.replace("kernel.py::kernel", "kernel.py"), r"must be 'file::function'"),
        (lambda t: t + "[[[", r"not valid TOML"),
    ],
    ids=["no-name", "no-author", "no-entry-point", "no-dps", "no-language", "no-build", "other-definition",
         "undefined-function", "missing-file", "entry-without-function", "bad-toml"],
)
def test_config_errors(tmp_path, edit, message, capsys):
    path = _config(tmp_path, edit(GOOD_CONFIG))
    with pytest.raises(PackError, match=message):
        pack(read_config(path, definition="gdn_decode_qk4_v8_d128_k_last"), SOURCES)
    code, stderr = _main(capsys, "--config", path, "-o", tmp_path / "out.json")
    assert code == 2
    assert stderr.startswith("pack_solution: error:") and not (tmp_path / "out.json").exists()


def test_missing_config_file(tmp_path):
    with pytest.raises(PackError, match="not found"):
        read_config(tmp_path / "absent.toml")


def test_empty_source_file_is_rejected(tmp_path, capsys):
    src = tmp_path / "src"
    shutil.copytree(SOURCES, src)
    (src / "helpers.py").write_text("\n")
    with pytest.raises(PackError, match=r"helpers.py: empty source file"):
        pack(read_config(CONFIG_PATH), src)
    code, stderr = _main(capsys, "--source-dir", src, "-o", tmp_path / "out.json")
    assert code == 2 and "empty source file" in stderr


def test_unknown_language_section(tmp_path):
    with pytest.raises(PackError, match=r"no \[build.cpp\] section"):
        read_config(_config(tmp_path, GOOD_CONFIG), language="cpp")


def test_write_solution_loads_back(tmp_path):
    solution = pack(read_config(CONFIG_PATH), SOURCES)
    loaded = write_solution(solution, tmp_path / "deep" / "s.json")
    assert loaded == solution
    assert json.loads((tmp_path / "deep" / "s.json").read_text())["name"] == solution.name


def test_script_packs_its_own_checkout_whatever_gdn_bench_is_installed_from(tmp_path):
    """A second checkout's pack_solution.py, run with this environment (whose gdn_bench may
    come from elsewhere), reads that checkout's config.toml and solution/ and writes there."""
    clone = tmp_path / "clone"
    shutil.copytree(SOURCES, clone / "solution" / "triton")
    (clone / "scripts").mkdir()
    shutil.copy(SCRIPT, clone / "scripts")
    (clone / "config.toml").write_text(GOOD_CONFIG.replace('description = "', 'description = "CLONE: '))
    result = subprocess.run([sys.executable, str(clone / "scripts" / "pack_solution.py")], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert Solution.model_validate_json((clone / "solution.json").read_text()).description.startswith("CLONE: ")


def test_root_that_is_no_checkout(tmp_path):
    result = _run("--root", tmp_path)
    assert result.returncode == 2 and "pack_solution: error: argument --root: " in result.stderr
    assert "Traceback" not in result.stderr
    assert "is not a checkout of the kit: it has no config.toml and no solution" in result.stderr


@pytest.mark.parametrize("given", ["newdir/", "existing"], ids=["trailing-slash", "existing-folder"])
def test_output_naming_a_folder_gets_solution_json_in_it(given, tmp_path, capsys):
    """Table row `pack_solution.py -o /tmp/newdir/`: a trailing slash means a folder."""
    (tmp_path / "existing").mkdir()
    assert pack_script.main(["-o", str(tmp_path / given) + ("/" if given.endswith("/") else "")]) == 0
    written = tmp_path / given.rstrip("/") / "solution.json"
    assert Solution.model_validate_json(written.read_text()).definition == "gdn_decode_qk4_v8_d128_k_last"
    assert capsys.readouterr().out.startswith(f"wrote {written}: ")


def test_a_checkout_of_a_prefill_tag_packs_prefill_by_default(tmp_path, capsys):
    """Its config.toml is the one submit.py commits for prefill: [solution] names prefill."""
    tagged = _config(tmp_path, config_text_for(GOOD_CONFIG, "gdn_prefill_qk4_v8_d128_k_last"))
    code, stderr = _main(capsys, "--config", tagged, "-o", tmp_path / "s.json")
    assert code == 0, stderr
    solution = Solution.model_validate_json((tmp_path / "s.json").read_text())
    assert (solution.definition, solution.spec.entry_point) == ("gdn_prefill_qk4_v8_d128_k_last", "prefill.py::kernel")


def test_another_definitions_language_build_is_named(tmp_path, capsys):
    """[build.cuda] is [solution]'s (decode): prefill has no cuda build, and the line says why."""
    code, stderr = _main(capsys, "--definition", "prefill", "--language", "cuda", "-o", tmp_path / "s.json")
    assert code == 2 and stderr == (
        f"pack_solution: error: {CONFIG_PATH}: no cuda build for gdn_prefill_qk4_v8_d128_k_last: [build.cuda] is for "
        "gdn_decode_qk4_v8_d128_k_last ([solution]), and [submission.prefill] builds triton (set language and "
        "entry_point there for cuda)\n")
    assert not (tmp_path / "s.json").exists()
