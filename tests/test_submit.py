"""scripts/submit.py and pack_solution.py --definition, in a temporary git repository holding
this project's config.toml and solution/triton/: tags made with plumbing only, refusals with
one message and exit 2, and packing a tag's tree as the evaluator does gives what
pack_solution.py gives for that definition."""

import io
import os
import shutil
import subprocess
import tarfile

import pytest
from flashinfer_bench import Solution

from gdn_bench.algos import load_module
from gdn_bench.packing import pack, read_config
from helpers import ROOT

submit = load_module(ROOT / "scripts" / "submit.py", "submit_script")
pack_solution = load_module(ROOT / "scripts" / "pack_solution.py", "pack_solution_script")
DECODE, PREFILL = "gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"
STUB = "def kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):\n    pass\n"
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **IDENTITY}).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository with config.toml, solution/triton/kernel.py and a README, one commit."""
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    (root / "solution" / "triton").mkdir(parents=True)
    shutil.copy(ROOT / "config.toml", root / "config.toml")
    shutil.copy(ROOT / "solution" / "triton" / "kernel.py", root / "solution" / "triton" / "kernel.py")
    (root / "README.md").write_text("kit\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def _commit_prefill_stub(repo):
    (repo / "solution" / "triton" / "prefill.py").write_text(STUB)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "prefill kernel")


def _submit(repo, *argv, capsys):
    code = submit.main(["--repo", str(repo), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _evaluator_solution(repo, tag, tmp_path) -> Solution:
    """Check the tag's tree out (git archive) and pack it as the evaluator does: [solution] and
    [build] of its config.toml, the top-level files of solution/<language>/."""
    tree = tmp_path / f"tree-{tag}"
    archive = subprocess.run(["git", "-C", str(repo), "archive", tag], check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(tree, filter="data")
    config = read_config(tree / "config.toml")
    return pack(config, tree / "solution" / config.language)


def _pack_solution(repo, definition, out, capsys):
    code = pack_solution.main(["--definition", definition, "--config", str(repo / "config.toml"),
                               "--source-dir", str(repo / "solution" / "triton"), "-o", str(out)])
    return code, capsys.readouterr().err


def test_decode_tag_is_heads_tree_and_packs_like_pack_solution(repo, tmp_path, capsys):
    head = git(repo, "rev-parse", "HEAD")
    code, out, _ = _submit(repo, "--definition", "decode", "--tag", "sub-decode", capsys=capsys)
    assert code == 0 and "tagged sub-decode" in out
    assert git(repo, "rev-parse", "sub-decode^{tree}") == git(repo, "rev-parse", "HEAD^{tree}")
    assert git(repo, "rev-parse", "sub-decode^") == head == git(repo, "rev-parse", "HEAD")
    assert _pack_solution(repo, "decode", tmp_path / "s.json", capsys)[0] == 0
    packed = Solution.model_validate_json((tmp_path / "s.json").read_text())
    assert _evaluator_solution(repo, "sub-decode", tmp_path).hash() == packed.hash()
    assert packed.definition == DECODE and packed.spec.entry_point == "kernel.py::kernel"


def test_prefill_refused_while_its_entry_file_is_missing(repo, tmp_path, capsys):
    code, _, err = _submit(repo, "--definition", "prefill", "--tag", "sub-prefill", capsys=capsys)
    assert code == 2 and err.startswith("submit: error: entry_point file") and "prefill.py does not exist" in err
    assert git(repo, "tag") == ""
    code, err = _pack_solution(repo, "prefill", tmp_path / "s.json", capsys)
    assert code == 2 and "prefill.py does not exist" in err and not (tmp_path / "s.json").exists()


def test_prefill_tag_names_prefill_without_touching_the_checkout(repo, tmp_path, capsys):
    _commit_prefill_stub(repo)
    head, config = git(repo, "rev-parse", "HEAD"), (repo / "config.toml").read_text()
    code, _, _ = _submit(repo, "--definition", PREFILL, "--tag", "sub-prefill", capsys=capsys)
    assert code == 0
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "branch", "--show-current") == "main"
    assert (repo / "config.toml").read_text() == config and git(repo, "status", "--porcelain") == ""
    tagged = git(repo, "show", "sub-prefill:config.toml")
    assert 'definition = "gdn_prefill_qk4_v8_d128_k_last"' in tagged and "[build.cuda]" not in tagged
    assert git(repo, "diff", "--name-only", "HEAD", "sub-prefill") == "config.toml"
    assert _pack_solution(repo, "prefill", tmp_path / "s.json", capsys)[0] == 0
    packed = Solution.model_validate_json((tmp_path / "s.json").read_text())
    evaluated = _evaluator_solution(repo, "sub-prefill", tmp_path)
    assert evaluated.hash() == packed.hash()
    assert evaluated.definition == PREFILL and evaluated.spec.entry_point == "prefill.py::kernel"
    assert evaluated.spec.destination_passing_style
    assert {s.path for s in evaluated.sources} == {"kernel.py", "prefill.py"}


@pytest.mark.parametrize("path, text", [
    ("solution/triton/kernel.py", "# edited\n"),   # a change to a tracked file
    ("solution/triton/extra.py", "x = 1\n"),       # an untracked file the evaluator would pack
    ("config.toml", "[solution]\n"),
], ids=["tracked-source", "untracked-source", "config"])
def test_refuses_uncommitted_changes(repo, path, text, capsys):
    (repo / path).write_text(text)
    code, _, err = _submit(repo, "--tag", "t", capsys=capsys)
    assert code == 2 and err.startswith(f"submit: error: uncommitted changes in {path}") and err.count("\n") == 1
    assert git(repo, "tag") == ""


def test_other_changes_do_not_matter_and_existing_tags_are_refused(repo, capsys):
    (repo / "README.md").write_text("edited\n")
    assert _submit(repo, "--tag", "t", capsys=capsys)[0] == 0
    code, _, err = _submit(repo, "--tag", "t", capsys=capsys)
    assert code == 2 and "tag 't' already exists" in err


@pytest.mark.parametrize("tag", ["bad tag name", "bad..name", "x.lock"])
def test_bad_tag_name_says_what_is_wrong(repo, tag, capsys):
    """Table row `submit.py --tag "bad tag name"`: one line naming the tag and git's rules."""
    code, _, err = _submit(repo, "--tag", tag, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and git(repo, "tag") == ""
    assert err.startswith(f"submit: error: --tag {tag!r} is not a valid git tag name (no spaces, ")
    assert err.endswith("); choose another\n")


def test_unknown_definition(repo, capsys):
    with pytest.raises(SystemExit) as e:
        submit.main(["--repo", str(repo), "--definition", "nope", "--tag", "t"])
    assert e.value.code == 2 and "unknown definition 'nope'" in capsys.readouterr().err


def test_without_push_it_says_how_to_push_and_how_to_add_a_missing_remote(repo, tmp_path, capsys):
    code, out, _ = _submit(repo, "--tag", "t", capsys=capsys)
    assert code == 0 and out.splitlines()[-1] == (
        "to submit it, add the repository you register for the contest as the remote 'origin' (git remote add "
        "origin URL; this one has none of that name), then push it: git push origin refs/tags/t")
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    code, out, _ = _submit(repo, "--tag", "u", capsys=capsys)
    assert code == 0 and out.splitlines()[-1] == "to submit it, push it: git push origin refs/tags/u"


def test_outside_a_git_repository_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # wherever the temporary folder is
    code, out, err = _submit(tmp_path, "--tag", "t", capsys=capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"submit: error: {tmp_path} is not in a git repository (fatal: not a git repository")
    assert err.endswith("): the contest takes a submission as a tag of one; clone the kit with git (not a downloaded "
                        "archive), or name a clone with --repo\n")


def test_without_git_says_so_in_one_line(repo, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "")
    code, _, err = _submit(repo, "--tag", "t", capsys=capsys)
    assert code == 2 and err == ("submit: error: git is not installed (or not on PATH): the contest takes a submission "
                                 "as a tag of a git repository, and this script makes it with git; install git\n")


def test_push(repo, tmp_path, capsys):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    code, out, _ = _submit(repo, "--tag", "pushed", "--push", capsys=capsys)
    assert code == 0 and "pushed pushed to origin" in out
    assert git(remote, "rev-parse", "pushed") == git(repo, "rev-parse", "pushed")


def test_push_to_a_remote_that_does_not_exist_makes_no_tag(repo, capsys):
    """Table row `submit.py --push` to a remote that does not exist: refused before tagging."""
    code, _, err = _submit(repo, "--tag", "t", "--push", "--remote", "nope", capsys=capsys)
    assert code == 2 and git(repo, "tag") == ""
    assert err == (f"submit: error: --remote 'nope': no such remote in {repo} (`git remote -v` lists them); add it "
                   "with `git remote add nope URL`, or name another with --remote\n")


def test_a_failed_push_keeps_the_tag_and_a_rerun_says_how_to_push_it(repo, tmp_path, capsys):
    git(repo, "remote", "add", "origin", str(tmp_path / "no-such-remote.git"))
    code, out, err = _submit(repo, "--tag", "t", "--push", capsys=capsys)
    push = "git push origin refs/tags/t"
    assert code == 2 and "tagged t" in out and git(repo, "tag") == "t" and err.count("\n") == 1
    assert err.startswith("submit: error: git push origin refs/tags/t failed: fatal: ")
    assert err.endswith(f"; the tag 't' was made and stays: push it with `{push}` once that is fixed (or delete it: "
                        "git tag -d t)\n")
    code, _, err = _submit(repo, "--tag", "t", "--push", capsys=capsys)
    commit = git(repo, "rev-parse", "t^{commit}")[:12]
    assert code == 2 and err == (f"submit: error: tag 't' already exists (commit {commit}); to submit it as it is, "
                                 f"push it: {push}; to make it anew, delete it first (git tag -d t) or choose another "
                                 "name\n")
