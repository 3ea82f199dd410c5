"""kvplan.sources.hub: local paths, the real huggingface_hub cache code path (offline), error mapping.

No test touches the network: hub tests run against a real cache layout built by
`tests/hubcache.py`, with HF_HUB_OFFLINE=1 (or an endpoint on a closed loopback port). Only the
error-mapping tests replace `hf_hub_download`, to raise the library's exceptions on demand.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub import errors as hf_errors

from kvplan.errors import EXIT_BAD_INPUT, ConfigError, HubError, InputError, KvplanError
from kvplan.sources import hub, json_files
from kvplan.sources.hub import ModelFiles, load_model_files, read_safetensors_header, safetensors_headers

sys.path.insert(0, str(Path(__file__).parent.parent))
from hubcache import commit_for, make_hub_cache, use_hub_cache  # noqa: E402

HF_CONFIGS = Path("/work/shared/hf-configs")
QWEN_DIR = HF_CONFIGS / "Qwen--Qwen3.5-27B"
NVFP4_DIR = HF_CONFIGS / "nvidia--Qwen3.6-27B-NVFP4"
NEMOTRON_DIR = HF_CONFIGS / "nvidia--Nemotron-H-56B-Base-8K"
QWEN = "Qwen/Qwen3.5-27B"
NVFP4 = "nvidia/Qwen3.6-27B-NVFP4"
SECRET = "hf_kvplanTESTsecret0123456789abcdefXYZ"

REPO_ROOT = Path(__file__).resolve().parents[2]


def fixture_json(folder: Path, name: str = "config.json") -> dict:
    return json.loads((folder / name).read_bytes())


@pytest.fixture(autouse=True)
def _isolated_hf(tmp_path_factory, monkeypatch):
    """Every test: no token, no user cache, no real endpoint reachable by accident."""
    home = tmp_path_factory.mktemp("hf_home")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(home / "token"))
    use_hub_cache(monkeypatch, home / "hub", offline=True)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty hub cache, in use (offline)."""
    root = tmp_path / "hub"
    root.mkdir()
    use_hub_cache(monkeypatch, root, offline=True)
    return root


@pytest.fixture
def qwen_cache(cache) -> Path:
    """Qwen3.5-27B as `hf download` leaves it: config.json cached, hf_quant_config known absent."""
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json"},
                   no_exist=["hf_quant_config.json"])
    return cache


# --------------------------------------------------------------------------------------------
# Hub, through the real huggingface_hub code path (offline, warmed cache)


def test_hub_id_offline_returns_exact_config(qwen_cache):
    files = load_model_files(QWEN)
    snapshot = qwen_cache / "models--Qwen--Qwen3.5-27B" / "snapshots" / commit_for(QWEN)
    assert isinstance(files, ModelFiles)
    assert files.config == fixture_json(QWEN_DIR)
    assert files.source == QWEN and files.repo_id == QWEN and files.is_hub
    assert files.revision is None
    assert files.commit_hash == commit_for(QWEN)
    assert Path(files.local_dir) == snapshot
    assert Path(files.config_path) == snapshot / "config.json"
    assert files.hf_quant_config is None
    assert files.notes == ()  # the cache knows hf_quant_config.json does not exist


def test_model_files_is_frozen(qwen_cache):
    files = load_model_files(QWEN)
    with pytest.raises(AttributeError):
        files.repo_id = "other/repo"  # type: ignore[misc]


def test_hub_quant_config_loaded_from_cache(cache):
    make_hub_cache(cache, NVFP4, {
        "config.json": NVFP4_DIR / "config.json",
        "hf_quant_config.json": NVFP4_DIR / "hf_quant_config.json",
    })
    files = load_model_files(NVFP4)
    assert files.config == fixture_json(NVFP4_DIR)
    assert files.hf_quant_config == fixture_json(NVFP4_DIR, "hf_quant_config.json")
    assert files.hf_quant_config["quantization"]["kv_cache_quant_algo"] == "FP8"
    assert files.notes == ()


def test_hub_quant_config_not_wanted(cache):
    make_hub_cache(cache, NVFP4, {
        "config.json": NVFP4_DIR / "config.json",
        "hf_quant_config.json": NVFP4_DIR / "hf_quant_config.json",
    })
    files = load_model_files(NVFP4, want_quant_config=False)
    assert files.hf_quant_config is None and files.notes == ()


def test_hub_quant_config_unknown_offline_is_a_note_not_an_error(cache):
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json"})  # no .no_exist marker
    files = load_model_files(QWEN)
    assert files.config == fixture_json(QWEN_DIR)
    assert files.hf_quant_config is None
    assert len(files.notes) == 1 and "hf_quant_config.json" in files.notes[0]


def test_hub_copied_files_instead_of_symlinks(cache):
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json"}, symlinks=False)
    assert load_model_files(QWEN).config == fixture_json(QWEN_DIR)


def test_hub_revision_commit_hash(cache):
    old_commit = "a" * 40
    old_config = dict(fixture_json(QWEN_DIR), kvplan_marker="old")
    make_hub_cache(cache, QWEN, {"config.json": json.dumps(old_config).encode()},
                   commit=old_commit, refs=())
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json"})  # main

    assert load_model_files(QWEN).config == fixture_json(QWEN_DIR)
    pinned = load_model_files(f"{QWEN}@{old_commit}")
    assert pinned.config == old_config
    assert pinned.repo_id == QWEN and pinned.revision == old_commit
    assert pinned.commit_hash == old_commit
    assert Path(pinned.local_dir).name == old_commit
    assert load_model_files(QWEN, revision=old_commit).config == old_config
    # the same revision given twice is fine; two different ones are a mistake
    assert load_model_files(f"{QWEN}@{old_commit}", revision=old_commit).config == old_config
    with pytest.raises(InputError, match="two revisions"):
        load_model_files(f"{QWEN}@{old_commit}", revision="main")


def test_hub_revision_branch(cache):
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json"}, refs=("dev",))
    files = load_model_files(f"{QWEN}@dev")
    assert files.revision == "dev" and files.commit_hash == commit_for(QWEN)
    assert files.config == fixture_json(QWEN_DIR)


def test_hub_cache_miss_names_the_file_and_how_to_get_it(cache):
    with pytest.raises(HubError) as info:
        load_model_files("Qwen/Not-Cached-7B")
    err = info.value
    assert "config.json" in err.message and "Qwen/Not-Cached-7B" in err.message
    assert "offline" in err.message
    assert "hf download Qwen/Not-Cached-7B config.json" in err.hint
    assert "local folder" in err.hint
    assert err.exit_code == EXIT_BAD_INPUT
    assert isinstance(err.__cause__, hf_errors.LocalEntryNotFoundError)
    assert "\n" not in err.message


def test_hub_cache_miss_for_uncached_revision(qwen_cache):
    rev = "b" * 40
    with pytest.raises(HubError) as info:
        load_model_files(QWEN, revision=rev)
    assert "config.json" in info.value.message and rev in info.value.message
    assert f"--revision {rev}" in info.value.hint


def test_hub_cached_malformed_json_is_config_error(cache):
    make_hub_cache(cache, QWEN, {"config.json": b'{\n  "model_type": "qwen3_5",\n}\n'})
    with pytest.raises(ConfigError) as info:
        load_model_files(QWEN)
    assert f"config.json of {QWEN}" in info.value.message
    assert "line 3, column 1" in info.value.message
    assert "--force-download" in info.value.hint


def test_hub_cached_malformed_quant_config_is_config_error(cache):
    make_hub_cache(cache, NVFP4, {"config.json": NVFP4_DIR / "config.json",
                                  "hf_quant_config.json": b"[1, 2]"})
    with pytest.raises(ConfigError, match="hf_quant_config.json.*list"):
        load_model_files(NVFP4)


def test_hub_reads_environment_in_a_fresh_process(tmp_path):
    """HF_HUB_CACHE / HF_HOME / HF_HUB_OFFLINE are honoured as the library reads them itself;
    importing kvplan.sources.hub does not import huggingface_hub."""
    script = (
        "import sys, json\n"
        "import kvplan.sources.hub as h\n"
        "assert 'huggingface_hub' not in sys.modules, 'kvplan.sources.hub imports huggingface_hub eagerly'\n"
        f"f = h.load_model_files({QWEN!r})\n"
        "print(json.dumps({'dir': f.local_dir, 'config': f.config}))\n"
    )
    expected = fixture_json(QWEN_DIR)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("HF_", "HUGGING")) and k != "TRANSFORMERS_OFFLINE"}
    base["PYTHONPATH"] = str(REPO_ROOT)

    hub_cache = tmp_path / "via_hub_cache"
    make_hub_cache(hub_cache, QWEN, {"config.json": QWEN_DIR / "config.json"})
    hf_home = tmp_path / "via_hf_home"
    make_hub_cache(hf_home / "hub", QWEN, {"config.json": QWEN_DIR / "config.json"})

    for env, root in (
        ({"HF_HUB_CACHE": str(hub_cache), "HF_HOME": str(tmp_path / "unused")}, hub_cache),
        ({"HF_HOME": str(hf_home)}, hf_home / "hub"),
    ):
        out = subprocess.run(
            [sys.executable, "-c", script], env={**base, **env, "HF_HUB_OFFLINE": "1"},
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["config"] == expected
        assert Path(result["dir"]).is_relative_to(root)


def _closed_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def unreachable_endpoint(cache, monkeypatch):
    """Online mode, but HF_ENDPOINT is a closed loopback port: every request is refused."""
    endpoint = f"http://127.0.0.1:{_closed_loopback_port()}"
    use_hub_cache(monkeypatch, cache, offline=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(hf_constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    sleeps: list[float] = []
    monkeypatch.setattr("time.sleep", sleeps.append)  # record any back-off instead of waiting
    monkeypatch.setattr(hub, "_SLEEPS", sleeps, raising=False)
    return endpoint


def test_network_unreachable_not_cached(unreachable_endpoint):
    with pytest.raises(HubError) as info:
        load_model_files("Qwen/Not-Cached-7B")
    err = info.value
    assert "cannot reach" in err.message and unreachable_endpoint in err.message
    assert "config.json" in err.message
    assert "HF_HUB_OFFLINE=1" in err.hint
    # a refused connection cannot be fixed by retrying: one request, no back-off at all
    assert isinstance(err.__cause__, httpx2.ConnectError)
    assert hub._SLEEPS == []


def test_network_unreachable_but_cached_still_works(unreachable_endpoint, cache):
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json"},
                   no_exist=["hf_quant_config.json"])
    files = load_model_files(QWEN)
    assert files.config == fixture_json(QWEN_DIR) and files.notes == ()


# --------------------------------------------------------------------------------------------
# Local files and folders


def test_local_config_file(tmp_path):
    files = load_model_files(str(QWEN_DIR / "config.json"))
    assert files.config == fixture_json(QWEN_DIR)
    assert files.repo_id is None and files.revision is None and not files.is_hub
    assert files.config_path == str(QWEN_DIR / "config.json")
    assert files.local_dir == str(QWEN_DIR)
    assert files.hf_quant_config is None


def test_local_folder_with_quant_config():
    files = load_model_files(str(NVFP4_DIR))
    assert files.config == fixture_json(NVFP4_DIR)
    assert files.hf_quant_config == fixture_json(NVFP4_DIR, "hf_quant_config.json")
    assert files.local_dir == str(NVFP4_DIR)
    assert load_model_files(str(NVFP4_DIR), want_quant_config=False).hf_quant_config is None


def test_local_file_with_any_json_name(tmp_path):
    path = tmp_path / "my-model.json"
    path.write_bytes((QWEN_DIR / "config.json").read_bytes())
    assert load_model_files(str(path)).config == fixture_json(QWEN_DIR)


def test_local_relative_and_home_paths(tmp_path, monkeypatch):
    model = tmp_path / "models" / "qwen"
    model.mkdir(parents=True)
    shutil.copy(QWEN_DIR / "config.json", model / "config.json")
    monkeypatch.chdir(tmp_path)
    assert load_model_files("./models/qwen").config == fixture_json(QWEN_DIR)
    assert load_model_files("models/qwen/config.json").config == fixture_json(QWEN_DIR)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_model_files("~/models/qwen").config == fixture_json(QWEN_DIR)


def test_local_path_that_looks_like_a_hub_id_wins(tmp_path, monkeypatch):
    """An existing folder `Qwen/Qwen3.5-27B` is local; the hub is not consulted."""
    (tmp_path / "Qwen").mkdir()
    shutil.copytree(QWEN_DIR, tmp_path / "Qwen" / "Qwen3.5-27B")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _must_not_be_called)
    files = load_model_files(QWEN)
    assert files.repo_id is None and files.config == fixture_json(QWEN_DIR)


def test_infinity_and_nan_tokens_are_accepted(tmp_path):
    files = load_model_files(str(NEMOTRON_DIR))
    assert math.inf in files.config["time_step_limit"]
    path = tmp_path / "config.json"
    path.write_text('{"a": Infinity, "b": -Infinity, "c": NaN}')
    config = load_model_files(str(path)).config
    assert config["a"] == math.inf and config["b"] == -math.inf and math.isnan(config["c"])


def test_utf8_bom_is_tolerated(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + (QWEN_DIR / "config.json").read_bytes())
    assert load_model_files(str(path)).config == fixture_json(QWEN_DIR)


def test_revision_with_local_path_is_input_error():
    with pytest.raises(InputError, match="local path"):
        load_model_files(str(QWEN_DIR), revision="main")


# --------------------------------------------------------------------------------------------
# Malformed / missing local input


def test_malformed_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "hidden_size": 4096,\n  "num_layers": 32,,\n}\n')
    with pytest.raises(ConfigError) as info:
        load_model_files(str(path))
    msg = info.value.message
    assert str(path) in msg and "not valid JSON" in msg
    assert "line 3, column 20" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(("text", "kind"), [
    ("[1, 2, 3]", "list"), ('"config"', "string"), ("42", "number"), ("null", "null"),
    ("true", "boolean"),
])
def test_non_object_json_is_config_error(tmp_path, text, kind):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_model_files(str(path))
    assert str(path) in info.value.message and kind in info.value.message
    assert "object" in info.value.message


def test_non_utf8_is_config_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"model_type": "caf\xe9"}')  # latin-1
    with pytest.raises(ConfigError) as info:
        load_model_files(str(path))
    assert str(path) in info.value.message and "UTF-8" in info.value.message
    assert "0xe9" in info.value.message and "offset 19" in info.value.message


def test_empty_file_is_config_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"  \n")
    with pytest.raises(ConfigError, match="empty"):
        load_model_files(str(path))


def test_oversize_config_is_refused_before_parsing(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    with path.open("wb") as f:  # sparse: 16 MiB + 1 byte without writing them
        f.truncate(hub.MAX_CONFIG_BYTES + 1)

    def no_parse(*args, **kwargs):
        raise AssertionError("an oversize file must not be parsed")

    monkeypatch.setattr(json_files.json, "loads", no_parse)
    with pytest.raises(ConfigError) as info:
        load_model_files(str(path))
    assert str(path) in info.value.message and "16 MiB" in info.value.message


def test_config_exactly_at_the_limit_is_read(tmp_path):
    path = tmp_path / "config.json"
    body = b'{"pad": "'
    path.write_bytes(body + b"x" * (hub.MAX_CONFIG_BYTES - len(body) - 2) + b'"}')
    assert path.stat().st_size == hub.MAX_CONFIG_BYTES
    assert len(load_model_files(str(path)).config["pad"]) > 0


def test_folder_without_config_json(tmp_path):
    folder = tmp_path / "weights-only"
    folder.mkdir()
    (folder / "hf_quant_config.json").write_text("{}")
    with pytest.raises(ConfigError) as info:
        load_model_files(str(folder))
    assert "config.json" in info.value.message and str(folder) in info.value.message


def _must_not_be_called(*args, **kwargs):
    raise AssertionError("the hub must not be consulted for a path")


@pytest.mark.parametrize("source", [
    "/nonexistent/model/config.json", "/nonexistent/model", "./no-such-folder",
    "../no-such-folder", "~/no-such-folder-kvplan", "no-such-config.json", "models/a/b",
    "gpt2", "", "Qwen/",
])
def test_nonexistent_path_is_no_such_file(source, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _must_not_be_called)
    with pytest.raises(ConfigError) as info:
        load_model_files(source)
    assert "no such file or folder" in info.value.message
    assert f"'{source}'" in info.value.message
    assert "ORG/NAME" in info.value.hint


# --------------------------------------------------------------------------------------------
# Mapping the library's exceptions (hf_hub_download replaced to raise them)


def _response(status: int, url: str = "https://huggingface.co/org/name/resolve/main/config.json"):
    return httpx2.Response(status, request=httpx2.Request("HEAD", url))


def _offline_error() -> hf_errors.LocalEntryNotFoundError:
    try:
        raise hf_errors.LocalEntryNotFoundError("not in cache") from hf_errors.OfflineModeIsEnabled(
            "offline")
    except hf_errors.LocalEntryNotFoundError as e:
        return e


def _network_error() -> hf_errors.LocalEntryNotFoundError:
    try:
        raise hf_errors.LocalEntryNotFoundError("check connection") from httpx2.ConnectError(
            "[Errno 111] Connection refused")
    except hf_errors.LocalEntryNotFoundError as e:
        return e


def _raiser(exc: BaseException):
    def fake(*args, **kwargs):
        raise exc
    return fake


MAPPING_CASES = {
    "gated": (lambda: hf_errors.GatedRepoError("gated", response=_response(403)),
              ["gated", "org/name", "config.json"], ["HF_TOKEN", "hf auth login"]),
    "repo-not-found": (lambda: hf_errors.RepositoryNotFoundError("nf", response=_response(401)),
                       ["org/name", "not found"], ["spelling", "HF_TOKEN"]),
    "revision-not-found": (lambda: hf_errors.RevisionNotFoundError("rev", response=_response(404)),
                           ["revision 'v9'", "not found", "org/name"], ["commit hash"]),
    "entry-not-found": (lambda: hf_errors.RemoteEntryNotFoundError("e", response=_response(404)),
                        ["has no config.json"], ["local config.json"]),
    "http-401": (lambda: hf_errors.HfHubHTTPError("401", response=_response(401)),
                 ["denied", "401"], ["HF_TOKEN", "hf auth login"]),
    "http-403": (lambda: hf_errors.HfHubHTTPError("403", response=_response(403)),
                 ["denied", "403"], ["HF_TOKEN", "hf auth login"]),
    "http-503": (lambda: hf_errors.HfHubHTTPError("503", response=_response(503),
                                                  server_message="Service Unavailable\nmore"),
                 ["HTTP 503", "Service Unavailable"], ["retry later", "HF_HUB_OFFLINE=1"]),
    "disabled": (lambda: hf_errors.DisabledRepoError("d", response=_response(403)),
                 ["disabled"], []),
    "offline-not-cached": (_offline_error,
                           ["config.json of org/name@v9", "not in the Hugging Face cache",
                            "HF_HUB_OFFLINE=1"],
                           ["hf download org/name --revision v9 config.json", "local folder"]),
    "offline-mode-raw": (lambda: hf_errors.OfflineModeIsEnabled("offline"),
                         ["config.json", "offline mode is on"], ["hf download"]),
    "network-wrapped": (_network_error, ["cannot reach", "config.json"], ["HF_HUB_OFFLINE=1"]),
    "connect-error": (lambda: httpx2.ConnectError("refused"),
                      ["cannot reach", "config.json"], ["HF_HUB_OFFLINE=1", "HF_ENDPOINT"]),
    "connect-timeout": (lambda: httpx2.ConnectTimeout("timed out"),
                        ["cannot reach"], ["HF_HUB_OFFLINE=1"]),
    "proxy-error": (lambda: httpx2.ProxyError("proxy"), ["cannot reach"], ["proxy"]),
    "invalid-id": (lambda: hf_errors.HFValidationError("Repo id must use alphanumeric chars"),
                   ["not a valid hub model id"], ["ORG/NAME"]),
}


@pytest.mark.parametrize("case", sorted(MAPPING_CASES))
def test_library_errors_are_mapped(case, monkeypatch):
    make_exc, in_message, in_hint = MAPPING_CASES[case]
    offline = case.startswith("offline")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", offline)
    exc = make_exc()
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raiser(exc))
    # the probe that precedes a download of an uncached file meets the same failure
    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", _raiser(exc))
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    source = "org/name@v9" if case in ("revision-not-found", "offline-not-cached") else "org/name"
    with pytest.raises(HubError) as info:
        load_model_files(source)
    err = info.value
    for text in in_message:
        assert text in err.message, (case, err.message)
    for text in in_hint:
        assert text in (err.hint or ""), (case, err.hint)
    assert "\n" not in err.message and "\n" not in (err.hint or "")
    assert err.exit_code == EXIT_BAD_INPUT
    assert err.__cause__ is exc


def test_network_error_while_offline_flag_off_is_not_called_offline(monkeypatch):
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raiser(_network_error()))
    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", _raiser(_network_error()))
    with pytest.raises(HubError) as info:
        load_model_files("org/name")
    assert "offline mode is on" not in info.value.message


def test_unexpected_exception_is_not_swallowed(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raiser(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        load_model_files("org/name")


def test_gated_hint_when_a_token_is_set(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        _raiser(hf_errors.GatedRepoError("gated", response=_response(403))))
    with pytest.raises(HubError) as info:
        load_model_files("org/name")
    assert "token in use has no access" in info.value.hint
    assert "https://huggingface.co/org/name" in info.value.hint


def _quant_fails_with(exc: BaseException):
    """config.json is served from the fixture; hf_quant_config.json raises `exc`."""
    def fake_download(repo_id, filename, **kwargs):
        if filename == "config.json":
            return str(QWEN_DIR / "config.json")
        raise exc
    return fake_download


def test_quant_config_absent_on_hub_is_normal(monkeypatch):
    exc = hf_errors.RemoteEntryNotFoundError("404", response=_response(404))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _quant_fails_with(exc))
    files = load_model_files(QWEN)
    assert files.hf_quant_config is None and files.notes == ()
    assert files.config == fixture_json(QWEN_DIR)


def test_quant_config_other_errors_are_mapped(monkeypatch):
    exc = hf_errors.GatedRepoError("gated", response=_response(403))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _quant_fails_with(exc))
    with pytest.raises(HubError) as info:
        load_model_files(QWEN)
    assert "hf_quant_config.json" in info.value.message


# --------------------------------------------------------------------------------------------
# The token never leaks


LEAKY_CASES = [
    lambda: hf_errors.GatedRepoError(f"token {SECRET}", response=_response(403)),
    lambda: hf_errors.RepositoryNotFoundError(f"token {SECRET}", response=_response(401)),
    lambda: hf_errors.HfHubHTTPError(f"token {SECRET}", response=_response(401)),
    lambda: hf_errors.HfHubHTTPError(f"token {SECRET}", response=_response(500),
                                     server_message=f"bad token {SECRET}"),
    lambda: hf_errors.RevisionNotFoundError(f"token {SECRET}", response=_response(404)),
    lambda: hf_errors.LocalEntryNotFoundError(f"token {SECRET}"),
    lambda: httpx2.ConnectError(f"token {SECRET}"),
    lambda: hf_errors.HFValidationError(f"token {SECRET}"),
    lambda: PermissionError(13, f"Permission denied {SECRET}"),
]


@pytest.mark.parametrize("index", range(len(LEAKY_CASES)))
def test_token_never_appears_in_errors(index, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raiser(LEAKY_CASES[index]()))
    with pytest.raises(HubError) as info:
        load_model_files("org/name")
    err = info.value
    for text in (err.message, err.hint or "", str(err)):
        assert SECRET not in text


def test_token_file_never_appears_in_errors(monkeypatch):
    Path(hf_constants.HF_TOKEN_PATH).write_text(SECRET)
    exc = hf_errors.HfHubHTTPError("500", response=_response(500), server_message=SECRET)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raiser(exc))
    with pytest.raises(HubError) as info:
        load_model_files("org/name")
    assert SECRET not in info.value.message + (info.value.hint or "")


def test_token_not_in_real_offline_error(cache, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    with pytest.raises(KvplanError) as info:
        load_model_files("org/private-model")
    assert SECRET not in info.value.message + (info.value.hint or "")


# --------------------------------------------------------------------------------------------
# safetensors headers

np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")


def _tensors(scale: int = 1) -> dict:
    return {
        "model.embed_tokens.weight": np.zeros((16 * scale, 8), dtype=np.float16),
        "model.layers.0.mlp.up_proj.weight": np.ones((4, 8), dtype=np.float32),
        "model.layers.0.input_layernorm.weight": np.zeros((8,), dtype=np.int8),
    }


_DTYPE_NAMES = {"float16": "F16", "float32": "F32", "int8": "I8"}


def _check_header(header: dict, tensors: dict, metadata: dict) -> None:
    assert header["__metadata__"] == metadata
    assert set(header) == set(tensors) | {"__metadata__"}
    for name, array in tensors.items():
        info = header[name]
        assert info["dtype"] == _DTYPE_NAMES[array.dtype.name]
        assert info["shape"] == list(array.shape)
        begin, end = info["data_offsets"]
        assert end - begin == array.nbytes


def test_safetensors_header_single_file(tmp_path):
    from safetensors import safe_open

    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(QWEN_DIR / "config.json", folder / "config.json")
    tensors = _tensors()
    st_numpy.save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})

    headers = safetensors_headers(load_model_files(str(folder)))
    assert list(headers) == ["model.safetensors"]
    header = headers["model.safetensors"]
    _check_header(header, tensors, {"format": "pt"})
    with safe_open(folder / "model.safetensors", framework="numpy") as f:  # agree with the lib
        for name in tensors:
            sl = f.get_slice(name)
            assert header[name]["shape"] == list(sl.get_shape())
            assert header[name]["dtype"] == sl.get_dtype()


def test_safetensors_header_reads_no_tensor_data(tmp_path):
    """Only the header is read: a file whose tensor bytes are cut off still reports them."""
    path = tmp_path / "model.safetensors"
    st_numpy.save_file(_tensors(scale=64), path)
    n = int.from_bytes(path.read_bytes()[:8], "little")
    with path.open("r+b") as f:
        f.truncate(8 + n)
    header = read_safetensors_header(path)
    assert header["model.embed_tokens.weight"]["shape"] == [1024, 8]
    assert header["__metadata__"] == {}


def test_safetensors_headers_sharded_with_index(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(QWEN_DIR / "config.json", folder / "config.json")
    a = {"a.weight": np.zeros((2, 3), dtype=np.float16)}
    b = {"b.weight": np.zeros((5,), dtype=np.float32)}
    st_numpy.save_file(a, folder / "model-00001-of-00002.safetensors")
    st_numpy.save_file(b, folder / "model-00002-of-00002.safetensors")
    # Mistral-style duplicate, not named by the index: vLLM skips it, so must we
    st_numpy.save_file({**a, **b}, folder / "consolidated.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 32},
        "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                       "b.weight": "model-00002-of-00002.safetensors"},
    }))
    files = load_model_files(str(folder))
    headers = safetensors_headers(files)
    assert sorted(headers) == ["model-00001-of-00002.safetensors",
                               "model-00002-of-00002.safetensors"]
    assert headers["model-00001-of-00002.safetensors"]["a.weight"]["shape"] == [2, 3]
    assert headers["model-00002-of-00002.safetensors"]["b.weight"]["dtype"] == "F32"

    (folder / "model-00002-of-00002.safetensors").unlink()  # incomplete download
    assert safetensors_headers(files) is None


def test_safetensors_headers_none_without_weights():
    assert safetensors_headers(load_model_files(str(QWEN_DIR))) is None


@pytest.mark.parametrize("content", [
    b"\x01\x02",  # too short
    (10**9).to_bytes(8, "little") + b"{}",  # length beyond the file
    (4).to_bytes(8, "little") + b"[1] ",  # not an object
    (6).to_bytes(8, "little") + b'{"x":1',  # broken JSON
    (13).to_bytes(8, "little") + b'{"t": {"a":1}}',  # tensor entry without dtype/shape/offsets
])
def test_corrupt_local_safetensors_is_config_error(tmp_path, content):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(QWEN_DIR / "config.json", folder / "config.json")
    (folder / "model.safetensors").write_bytes(content)
    with pytest.raises(ConfigError, match="model.safetensors"):
        safetensors_headers(load_model_files(str(folder)))


def test_safetensors_headers_hub_offline_is_none(qwen_cache):
    """Real library path: offline, weights not cached -> None, no error."""
    assert safetensors_headers(load_model_files(QWEN)) is None


def test_safetensors_headers_hub_fully_cached_reads_locally(cache, tmp_path, monkeypatch):
    weights = tmp_path / "model.safetensors"
    tensors = _tensors()
    st_numpy.save_file(tensors, weights, metadata={"format": "pt"})
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json",
                                 "model.safetensors": weights},
                   no_exist=["hf_quant_config.json"])
    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", _must_not_be_called)
    headers = safetensors_headers(load_model_files(QWEN))
    _check_header(headers["model.safetensors"], tensors, {"format": "pt"})


def test_safetensors_headers_hub_partial_cache_asks_the_hub(cache, tmp_path, monkeypatch):
    """One shard cached but no index: the set may be incomplete, so the Hub is asked."""
    weights = tmp_path / "shard.safetensors"
    st_numpy.save_file(_tensors(), weights)
    make_hub_cache(cache, QWEN, {"config.json": QWEN_DIR / "config.json",
                                 "model-00001-of-00002.safetensors": weights},
                   no_exist=["hf_quant_config.json"])
    calls = []

    def fake(repo_id, **kwargs):
        calls.append((repo_id, kwargs))
        raise hf_errors.OfflineModeIsEnabled("offline")

    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", fake)
    assert safetensors_headers(load_model_files(QWEN)) is None
    assert calls == [(QWEN, {"revision": commit_for(QWEN)})]


def test_safetensors_headers_hub_metadata_mapped_to_local_shape(qwen_cache, tmp_path,
                                                                monkeypatch):
    """`get_safetensors_metadata` answers are reshaped to exactly what a local read gives."""
    from huggingface_hub.utils import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo

    path = tmp_path / "model.safetensors"
    tensors = _tensors()
    st_numpy.save_file(tensors, path, metadata={"format": "pt"})
    local = read_safetensors_header(path)
    file_meta = SafetensorsFileMetadata(
        metadata=local["__metadata__"],
        tensors={
            name: TensorInfo(dtype=info["dtype"], shape=info["shape"],
                             data_offsets=tuple(info["data_offsets"]))
            for name, info in local.items() if name != "__metadata__"
        },
    )
    repo_meta = SafetensorsRepoMetadata(
        metadata=None, sharded=False,
        weight_map={name: "model.safetensors" for name in tensors},
        files_metadata={"model.safetensors": file_meta},
    )
    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata",
                        lambda repo_id, **kwargs: repo_meta)
    headers = safetensors_headers(load_model_files(QWEN))
    assert headers == {"model.safetensors": local}


@pytest.mark.parametrize("exc", [
    hf_errors.NotASafetensorsRepoError("no safetensors"),
    hf_errors.GatedRepoError("gated", response=_response(403)),
    httpx2.ConnectError("refused"),
    hf_errors.SafetensorsParsingError("bad header"),
])
def test_safetensors_headers_hub_unavailable_is_none(qwen_cache, monkeypatch, exc):
    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", _raiser(exc))
    assert safetensors_headers(load_model_files(QWEN)) is None


# --------------------------------------------------------------------------------------------
# An unreachable Hub answers in seconds: no retry loop for a refused connection


def _kvplan_offline_env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING")) and k != "TRANSFORMERS_OFFLINE"}
    return {**env, "HF_HOME": str(tmp_path / "hf_home"), "HF_ENDPOINT": endpoint,
            "PYTHONPATH": str(REPO_ROOT)}


@pytest.mark.parametrize("cached", [False, True], ids=["not-cached", "config-cached"])
def test_refused_hub_answers_in_seconds_without_retrying(tmp_path, cached):
    """huggingface_hub alone retries a refused connection 5 times with back-off (~25 s of
    'Retrying in 8s' lines); kvplan asks once. The endpoint is a closed loopback port."""
    import time

    endpoint = f"http://127.0.0.1:{_closed_loopback_port()}"
    env = _kvplan_offline_env(tmp_path, endpoint)
    if cached:
        make_hub_cache(tmp_path / "hf_home" / "hub", "Qwen/Qwen3-8B",
                       {"config.json": REPO_ROOT / "tests/data/hf-configs/Qwen--Qwen3-8B/config.json"})
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kvplan.cli", "check", "Qwen/Qwen3-8B",
                          "--kv-cache-memory", "10GiB", "--json"], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    elapsed = time.monotonic() - start
    assert elapsed < 10, f"took {elapsed:.1f} s"  # generous: measured ~3 s cold, imports included
    assert "Retrying" not in out.stderr and "Retry " not in out.stderr
    if cached:  # the config is cached: it plans, the missing quant config is a note
        assert out.returncode == 0, out.stderr
        warnings = json.loads(out.stdout)["warnings"]
        assert any("hf_quant_config.json" in w and "not reachable" in w for w in warnings)
    else:
        assert out.returncode == EXIT_BAD_INPUT and out.stdout == ""
        lines = out.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith("Error: cannot reach " + endpoint)
        assert lines[1].startswith("Hint: ")


@pytest.mark.parametrize(("status", "calls"), [(503, 2), (429, 2), (404, 1), (401, 1)])
def test_probe_retries_once_only_what_a_retry_can_fix(monkeypatch, status, calls):
    """A 5xx/429 gets one quiet second try (1 s later); a 401/404 none."""
    seen, sleeps = [], []

    def fake(*args, **kwargs):
        seen.append(args)
        raise hf_errors.HfHubHTTPError(str(status), response=_response(status))

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", fake)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raiser(AssertionError("no download")))
    monkeypatch.setattr("time.sleep", sleeps.append)
    with pytest.raises(HubError):
        load_model_files("org/name")
    assert len(seen) == calls and sleeps == [1.0] * (calls - 1)


# --------------------------------------------------------------------------------------------
# Mistral-format hub repos (params.json + consolidated*.safetensors): vLLM's get_config reads
# params.json; offline, kvplan reads the cached snapshot's files


MISTRAL_DIR = REPO_ROOT / "tests" / "data" / "mistral-format"


def test_a_cached_mistral_format_repo_is_read_from_params_json(cache):
    folder = MISTRAL_DIR / "mistralai--Devstral-Small-2507"
    make_hub_cache(cache, "mistralai/Devstral-Small-2507", {
        "params.json": folder / "params.json",
        "consolidated.safetensors": folder / "consolidated.safetensors"},
        no_exist=["config.json", "hf_quant_config.json"])
    files = load_model_files("mistralai/Devstral-Small-2507")
    assert files.config_format == "mistral" and files.hf_config is None
    assert files.config_path.endswith("params.json")
    assert files.config["architectures"] == ["MistralForCausalLM"]
    assert files.config["dtype"] == "bfloat16"  # the cached consolidated.safetensors header
    assert files.config["max_position_embeddings"] == 128000
    # --config-format hf: vLLM reads config.json, which this repo has not
    with pytest.raises(KvplanError):
        load_model_files("mistralai/Devstral-Small-2507", config_format="hf")


def test_a_cached_repo_without_consolidated_weights_stays_hf(cache):
    folder = MISTRAL_DIR / "handmade--mistral-sliding-window-with-config-json"
    make_hub_cache(cache, "org/mistral-hf", {
        "params.json": folder / "params.json", "config.json": folder / "config.json"},
        no_exist=["hf_quant_config.json"])
    files = load_model_files("org/mistral-hf")
    assert files.config_format == "hf" and files.config == fixture_json(folder)
    forced = load_model_files("org/mistral-hf", config_format="mistral")
    assert forced.config_format == "mistral" and forced.hf_config == fixture_json(folder)
    assert forced.config["layer_types"] == ["sliding_attention"] * 32


def test_mistral_format_is_what_the_load_decided(qwen_cache, tmp_path):
    # offline, a hub model whose cache holds no params.json: the listing could not be asked
    assert hub.mistral_format(load_model_files(QWEN)) is None
    assert hub.mistral_format(load_model_files(QWEN, config_format="hf")) is False
    folder = tmp_path / "voxtral"
    shutil.copytree(Path(__file__).parents[1] / "data" / "mistral-format"
                    / "handmade--voxtral-audio", folder)
    assert hub.mistral_format(load_model_files(str(folder))) is True
    (folder / "consolidated.safetensors").unlink()  # params.json alone is not Mistral format
    (folder / "config.json").write_text("{}")
    assert hub.mistral_format(load_model_files(str(folder))) is False


def test_a_mistral_format_folder_is_a_model_folder_for_its_pooling_module(tmp_path):
    from kvplan.sources.st_modules import read_st_modules

    folder = tmp_path / "devstral"
    shutil.copytree(Path(__file__).parents[1] / "data" / "mistral-format"
                    / "mistralai--Devstral-Small-2507", folder)
    (folder / "modules.json").write_text(json.dumps(
        [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_lasttoken": true}')
    files = load_model_files(str(folder))
    assert files.config_format == "mistral"
    st = read_st_modules(files)
    assert st.known and st.pooling == {"pooling_mode_lasttoken": True}
