"""--tpumem-gpus: each pytest-xdist worker gets GPUs of its own, or a share of one GPU's memory
(the environment JAX reads when its backend starts); a user's choice is never overridden."""

import fnmatch
import json
import os
from types import SimpleNamespace

import pytest

from pytest_tpumem.glue import gpus, sharing
from pytest_tpumem.glue.options import SettingError, Settings
from pytest_tpumem.readings import jaxcompat

GPU_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "JAX_ENABLE_CUDA_XDIST",
)
FRACTION = gpus.fraction_name()  # XLA_CLIENT_MEM_FRACTION on every jaxlib the package supports today


@pytest.fixture
def clean_env(monkeypatch):
    for name in GPU_VARS + ("PYTEST_XDIST_WORKER_COUNT",):
        monkeypatch.setenv(name, "")  # recorded, so that what apply() sets is undone: delenv of an unset one is not
        monkeypatch.delenv(name)
    monkeypatch.setattr(jaxcompat, "backends_started", lambda: False)
    return monkeypatch


@pytest.mark.parametrize(
    ("gpu_count", "workers", "visible"),
    [
        (2, 2, ["0", "1"]),
        (4, 2, ["0,1", "2,3"]),
        (3, 2, ["0", "1"]),  # one GPU left idle
        (8, 8, [str(g) for g in range(8)]),
        (1, 1, ["0"]),
    ],
)
def test_as_many_gpus_as_workers_or_more_each_gets_its_own_and_keeps_jaxs_defaults(gpu_count, workers, visible):
    envs = [gpus.worker_env(i, workers, gpu_count) for i in range(workers)]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == visible
    assert all(set(env) == {"CUDA_VISIBLE_DEVICES"} for env in envs)  # its GPU's memory is its own


@pytest.mark.parametrize(
    ("gpu_count", "workers", "visible", "fractions"),
    [
        (1, 2, ["0", "0"], ["0.375", "0.375"]),
        (1, 3, ["0", "0", "0"], ["0.250", "0.250", "0.250"]),
        (2, 3, ["0", "1", "0"], ["0.375", "0.750", "0.375"]),  # GPU 1 has one worker: JAX's 75%
        (2, 4, ["0", "1", "0", "1"], ["0.375"] * 4),
    ],
)
def test_more_workers_than_gpus_share_them_in_turn_with_an_even_share_of_memory_on_demand(
    gpu_count, workers, visible, fractions
):
    envs = [gpus.worker_env(i, workers, gpu_count) for i in range(workers)]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == visible
    assert [env[FRACTION] for env in envs] == fractions
    assert {env["XLA_PYTHON_CLIENT_PREALLOCATE"] for env in envs} == {"false"}
    assert all("XLA_PYTHON_CLIENT_MEM_FRACTION" not in env for env in envs)  # never both names


def test_no_gpu_to_share_is_said():
    with pytest.raises(SettingError, match="--tpumem-gpus: no GPU to share"):
        gpus.worker_env(0, 2, 0)


def test_gpus_are_counted_from_dev_without_jax(tmp_path):
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "null"):
        (tmp_path / "dev" / name).write_text("")
    assert gpus.host_gpus(str(tmp_path)) == 3
    assert gpus.host_gpus(str(tmp_path / "nowhere")) == 0


def worker(workerid="gw1", workercount=2, **more):
    return SimpleNamespace(workerinput={"workerid": workerid, "workercount": workercount, **more})


@pytest.mark.parametrize("name", ["XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"])
def test_a_worker_gets_its_gpu_and_a_fraction_the_user_set_under_either_name_is_kept_alone(clean_env, name):
    clean_env.setenv(name, ".2")
    sharing.GPUS.apply(worker("gw1", 4), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert {n: os.environ.get(n) for n in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")} == {
        "XLA_CLIENT_MEM_FRACTION": None,
        "XLA_PYTHON_CLIENT_MEM_FRACTION": None,
        name: ".2",  # the user's, not 0.375, and no second name beside it (jaxlib refuses both)
    }


def test_an_empty_fraction_is_unset_to_jaxlib_and_to_the_plugin(clean_env):
    """jaxlib reads "" as unset (``if memory_fraction:``): the worker's share is written."""
    clean_env.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
    sharing.GPUS.apply(worker("gw0", 2), Settings(enabled=True, gpus=1))
    assert os.environ[FRACTION] == "0.375"


def test_the_worker_count_may_come_from_xdists_environment(clean_env):
    """Where workerinput has no count, pytest-xdist's PYTEST_XDIST_WORKER_COUNT gives it."""
    clean_env.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    sharing.GPUS.apply(SimpleNamespace(workerinput={"workerid": "gw2"}), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # slot 2 of 3 on 2 GPUs: GPU 0, shared with slot 0
    assert os.environ[FRACTION] == "0.375"


@pytest.mark.parametrize(
    ("outer", "workers", "visible"),
    [
        ("2,3", 2, ["2", "3"]),  # the entries, not 0 and 1: CUDA matches each process's mask against the host
        ("2,3", 3, ["2", "3", "2"]),
        ("5", 2, ["5", "5"]),
        ("GPU-8a1b,GPU-77c0", 2, ["GPU-8a1b", "GPU-77c0"]),  # UUIDs are entries too
        (" 4, 6 ", 1, ["4,6"]),
    ],
)
def test_an_outer_cuda_visible_devices_is_indexed_into_not_replaced(clean_env, outer, workers, visible):
    clean_env.setenv("CUDA_VISIBLE_DEVICES", outer)
    count = gpus.host_gpus("/nowhere", os.environ)
    envs = [gpus.worker_env(i, workers, count, os.environ) for i in range(workers)]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == visible


def test_a_worker_under_an_outer_mask_gets_its_entry(clean_env):
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    sharing.GPUS.apply(worker("gw1", 2), Settings(enabled=True, gpus="auto"))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"


@pytest.mark.parametrize(
    ("outer", "count", "said"),
    [
        ("", 1, "--tpumem-gpus: CUDA_VISIBLE_DEVICES='' shows no GPU; set it to the GPUs to share, or unset it"),
        ("2,3", 3, "--tpumem-gpus=3: CUDA_VISIBLE_DEVICES='2,3' shows 2; give at most that many, or auto"),
    ],
)
def test_an_outer_mask_that_cannot_be_shared_is_named(clean_env, outer, count, said):
    clean_env.setenv("CUDA_VISIBLE_DEVICES", outer)
    with pytest.raises(SettingError) as raised:
        gpus.worker_env(0, 2, count, os.environ)
    assert str(raised.value) == said


# --- what jaxlib itself makes of a worker's environment --------------------------------------------


def jaxlib_options(env):
    """jaxlib's own GPU option builder (jaxlib/xla_client.py, generate_pjrt_gpu_plugin_options: what
    the CUDA plugin's initialize() passes to XLA), run on exactly ``env``."""
    from jaxlib import xla_client

    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if n.startswith("XLA_")]:
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        return xla_client.generate_pjrt_gpu_plugin_options()


@pytest.mark.parametrize(
    ("user", "fraction"),
    [
        ({}, None),
        ({"XLA_CLIENT_MEM_FRACTION": ".3"}, 0.3),
        ({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}, 0.3),
        ({"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}, None),
    ],
)
@pytest.mark.parametrize("outer", [None, "2,3"])
def test_every_workers_environment_is_one_jaxlib_accepts_and_reads_as_meant(user, fraction, outer):
    """--tpumem-gpus given a user's fraction (either name) and an outer CUDA_VISIBLE_DEVICES=2,3:
    each of 3 workers' environments, put through jaxlib's own builder, gives the share meant."""
    environ = {**user, **({} if outer is None else {"CUDA_VISIBLE_DEVICES": outer})}
    for slot in range(3):
        env = {**environ, **gpus.worker_env(slot, 3, 2, environ)}
        options = jaxlib_options({n: v for n, v in env.items() if n != "CUDA_VISIBLE_DEVICES"})
        sharing_gpu = 0.375 if slot != 1 else 0.75  # slots 0 and 2 share the first GPU
        assert options["memory_fraction"] == pytest.approx(fraction or sharing_gpu, abs=1e-3)
        assert options.get("preallocate") is ("XLA_PYTHON_CLIENT_PREALLOCATE" in user)
        first, second = ("2", "3") if outer else ("0", "1")
        assert env["CUDA_VISIBLE_DEVICES"] == (second if slot == 1 else first)


@pytest.mark.parametrize(
    ("user", "said"),
    [
        (
            {"XLA_CLIENT_MEM_FRACTION": ".3", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".4"},
            "--tpumem-gpus: jaxlib refuses the GPU settings a worker would start with (XLA_CLIENT_MEM_FRACTION='.3', "
            "XLA_PYTHON_CLIENT_MEM_FRACTION='.4'): XLA_CLIENT_MEM_FRACTION is specified together with "
            "XLA_PYTHON_CLIENT_MEM_FRACTION. Remove the latter one, it is deprecated.; jax would only log this and "
            "run the worker without its GPU",
        ),
        ({"XLA_CLIENT_MEM_FRACTION": "0.75+"}, "*(XLA_CLIENT_MEM_FRACTION='0.75+'): *could not convert*"),
        ({"XLA_PYTHON_CLIENT_ALLOCATOR": "bfcc"}, "*(XLA_PYTHON_CLIENT_ALLOCATOR='bfcc'): *must be *got \"bfcc\"*"),
        (  # a control character in the user's value reaches the terminal escaped
            {"XLA_PYTHON_CLIENT_ALLOCATOR": "\x1b[2J"},
            "*(XLA_PYTHON_CLIENT_ALLOCATOR='\\x1b[2J'): *got \"\\x1b[2j\"; jax would*",
        ),
    ],
)
def test_what_jaxlib_would_refuse_is_a_usage_error_not_a_worker_silently_without_its_gpu(user, said):
    with pytest.raises(SettingError) as raised:
        gpus.worker_env(0, 2, 1, user)
    assert fnmatch.fnmatchcase(str(raised.value), said), str(raised.value)


def test_the_fraction_goes_under_the_name_the_installed_jaxlib_reads(monkeypatch):
    """On a jaxlib whose builder reads only the old name, the old name is written; and the check never
    leaves os.environ changed."""
    assert gpus.fraction_name() == "XLA_CLIENT_MEM_FRACTION"  # jaxlib 0.10 to 0.12 read it first

    def older_builder(environ):  # as jaxlib read it before XLA_CLIENT_MEM_FRACTION existed
        value = environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
        return {"platform_name": "cuda", **({"memory_fraction": float(value)} if value else {})}

    monkeypatch.setattr(jaxcompat, "gpu_plugin_options", older_builder)
    gpus.fraction_name.cache_clear()
    try:
        assert gpus.worker_env(0, 2, 1, {})["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.375"
    finally:
        gpus.fraction_name.cache_clear()


def test_reading_jaxlibs_options_leaves_the_environment_as_it_was(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".9")
    before = dict(os.environ)
    options = jaxcompat.gpu_plugin_options({"XLA_CLIENT_MEM_FRACTION": ".2"})
    assert options is not None and options["memory_fraction"] == 0.2  # the .9 outside was not seen
    assert dict(os.environ) == before


def test_a_started_backend_is_too_late(clean_env):
    clean_env.setattr(jaxcompat, "backends_started", lambda: True)
    with pytest.raises(SettingError, match="--tpumem-gpus: jax's backend was started in worker gw1 before"):
        sharing.GPUS.apply(worker(), Settings(enabled=True, gpus=2))
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_nothing_changes_outside_a_worker_or_without_the_option(clean_env):
    sharing.GPUS.apply(SimpleNamespace(), Settings(enabled=True, gpus=2))
    sharing.GPUS.apply(worker(), Settings(enabled=True))
    assert not any(name in os.environ for name in GPU_VARS)


def test_a_started_backend_is_too_late_even_with_an_outer_mask(clean_env):
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    clean_env.setattr(jaxcompat, "backends_started", lambda: True)
    with pytest.raises(SettingError, match="--tpumem-gpus: jax's backend was started in worker gw1 before"):
        sharing.GPUS.apply(worker(), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_the_header_says_what_each_worker_gets_and_what_the_user_set():
    assert gpus.plan_line(2, 4, {}) == (
        "tpumem: --tpumem-gpus: 2 pytest-xdist workers on 4 GPUs: each worker 2 GPUs of its own (CUDA_VISIBLE_DEVICES)"
    )
    assert gpus.plan_line(2, 3, {}).endswith("each worker 1 GPU of its own (CUDA_VISIBLE_DEVICES); 1 GPU left idle")
    assert gpus.plan_line(4, 1, {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".2"}) == (
        "tpumem: --tpumem-gpus: 4 pytest-xdist workers on 1 GPU: each worker a share of one GPU's memory, taken on "
        "demand (CUDA_VISIBLE_DEVICES, XLA_PYTHON_CLIENT_PREALLOCATE=false, XLA_CLIENT_MEM_FRACTION=0.75 split "
        "between the workers on a GPU); kept as set: XLA_PYTHON_CLIENT_MEM_FRACTION='.2'"
    )
    assert gpus.plan_line(2, 2, {"CUDA_VISIBLE_DEVICES": "2,3"}) == (
        "tpumem: --tpumem-gpus: 2 pytest-xdist workers on 2 GPUs of CUDA_VISIBLE_DEVICES='2,3': each worker 1 GPU of "
        "its own (CUDA_VISIBLE_DEVICES)"
    )


def test_a_replacement_worker_gets_the_gpus_of_the_one_that_crashed(clean_env):
    """The controller hands each worker its slot under the GPUs' own keys, which the worker reads:
    gw2, replacing a crashed gw1 of -n 2, gets gw1's GPU, not a usage error for being third."""
    options = {"collectonly": False, "dist": "load", "tx": ["2*popen"]}
    registered = {}
    config = SimpleNamespace(
        getoption=lambda name, default=None: options.get(name, default),
        pluginmanager=SimpleNamespace(register=lambda plugin, name: registered.setdefault(name, plugin)),
    )
    assert sharing.GPUS.check_controller(config, Settings(enabled=True, gpus=2)).startswith("tpumem: --tpumem-gpus: 2 ")
    slots = registered["tpumem-gpus"]
    nodes = {i: SimpleNamespace(gateway=SimpleNamespace(id=f"gw{i}"), workerinput={}) for i in range(3)}
    slots.pytest_configure_node(nodes[0])
    slots.pytest_configure_node(nodes[1])
    slots.pytest_testnodedown(nodes[1], error="crashed")
    slots.pytest_configure_node(nodes[2])
    sharing.GPUS.apply(worker("gw2", 2, **nodes[2].workerinput), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


RECORD = f"""
import json, os, pathlib


def test_record(worker_id):
    env = {{name: os.environ.get(name) for name in {GPU_VARS!r}}}
    pathlib.Path("seen", worker_id + ".json").write_text(json.dumps(env))
"""


def test_each_xdist_worker_runs_with_its_share_and_the_header_says_it(pytester, clean_env):
    pytest.importorskip("xdist")
    pytester.mkdir("seen")
    pytester.makepyfile(test_record=RECORD)
    result = pytester.runpytest_subprocess("--tpumem", "--dist", "each", "-n", "3", "--tpumem-gpus=2")
    result.assert_outcomes(passed=3)
    seen = {p.stem: json.loads(p.read_text()) for p in (pytester.path / "seen").iterdir()}
    unset = dict.fromkeys(GPU_VARS)
    assert seen == {
        "gw0": {**unset, "CUDA_VISIBLE_DEVICES": "0", "XLA_PYTHON_CLIENT_PREALLOCATE": "false", FRACTION: "0.375"},
        "gw1": {**unset, "CUDA_VISIBLE_DEVICES": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false", FRACTION: "0.750"},
        "gw2": {**unset, "CUDA_VISIBLE_DEVICES": "0", "XLA_PYTHON_CLIENT_PREALLOCATE": "false", FRACTION: "0.375"},
    }
    result.stdout.fnmatch_lines(["tpumem: --tpumem-gpus: 3 pytest-xdist workers on 2 GPUs: each worker a share of *"])


def test_under_an_outer_mask_with_a_users_old_fraction_each_worker_gets_its_entry_and_the_users_fraction(
    pytester, clean_env
):
    pytest.importorskip("xdist")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    clean_env.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".2")
    pytester.mkdir("seen")
    pytester.makepyfile(test_record=RECORD)
    result = pytester.runpytest_subprocess("--tpumem", "--dist", "each", "-n", "3", "--tpumem-gpus=auto")
    result.assert_outcomes(passed=3)
    seen = {p.stem: json.loads(p.read_text()) for p in (pytester.path / "seen").iterdir()}
    assert {
        w: (e["CUDA_VISIBLE_DEVICES"], e["XLA_PYTHON_CLIENT_MEM_FRACTION"], e[FRACTION]) for w, e in seen.items()
    } == {
        "gw0": ("2", ".2", None if FRACTION != "XLA_PYTHON_CLIENT_MEM_FRACTION" else ".2"),
        "gw1": ("3", ".2", None if FRACTION != "XLA_PYTHON_CLIENT_MEM_FRACTION" else ".2"),
        "gw2": ("2", ".2", None if FRACTION != "XLA_PYTHON_CLIENT_MEM_FRACTION" else ".2"),
    }
    result.stdout.fnmatch_lines(
        [
            "tpumem: --tpumem-gpus: 3 pytest-xdist workers on 2 GPUs of CUDA_VISIBLE_DEVICES='2,3': each worker a share "
            "of *; kept as set: XLA_PYTHON_CLIENT_MEM_FRACTION='.2'"
        ]
    )


def test_both_fraction_names_set_are_refused_once_before_any_worker_starts(pytester, clean_env):
    pytest.importorskip("xdist")
    clean_env.setenv("XLA_CLIENT_MEM_FRACTION", ".3")
    clean_env.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".3")
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--tpumem", "-n", "2", "--tpumem-gpus=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if "--tpumem-gpus" in line]
    assert len(errors) == 1, result.stderr.str()
    assert "jaxlib refuses the GPU settings a worker would start with" in errors[0]
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("value", ["0", "many", "1025"])
def test_a_bad_gpu_count_is_a_usage_error_naming_it(pytester, value):
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest("--tpumem", f"--tpumem-gpus={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--tpumem-gpus: '{value}' is neither auto nor a number of GPUs from 1 to 1024"])


def test_without_the_option_a_gpu_host_with_workers_gets_a_warning(tmp_path, clean_env):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    warned = []
    config = SimpleNamespace(issue_config_time_warning=lambda w, stacklevel: warned.append(str(w)))
    sharing.GPUS.warn_if_shared(config, 2, str(tmp_path))
    assert warned == [
        "pytest-tpumem: 2 pytest-xdist workers on a host with 1 GPU, and nothing gives each worker GPUs or memory "
        "of its own: each JAX process takes 75% of its GPU when its backend starts, so the others run out of "
        "memory; pass --tpumem-gpus auto"
    ]
    clean_env.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the user chose: nothing to say
    sharing.GPUS.warn_if_shared(config, 2, str(tmp_path))
    sharing.GPUS.warn_if_shared(config, 1, str(tmp_path))  # one worker takes what one process takes
    assert len(warned) == 1


def test_the_warning_counts_an_outer_mask_and_is_silent_where_jaxs_own_conftest_shares(tmp_path, clean_env):
    """A CUDA_VISIBLE_DEVICES showing one GPU to two workers still has them contend (each would
    preallocate 75% of it); JAX_ENABLE_CUDA_XDIST (jax's conftest) gives each worker a GPU."""
    warned = []
    config = SimpleNamespace(issue_config_time_warning=lambda w, stacklevel: warned.append(str(w)))
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "3")
    sharing.GPUS.warn_if_shared(config, 2, str(tmp_path / "no-dev"))
    assert len(warned) == 1 and "2 pytest-xdist workers on a host with 1 GPU" in warned[0]
    clean_env.setenv("JAX_ENABLE_CUDA_XDIST", "2")
    sharing.GPUS.warn_if_shared(config, 2, str(tmp_path / "no-dev"))
    assert len(warned) == 1
