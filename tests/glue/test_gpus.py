"""--tpumem-gpus: each pytest-xdist worker gets GPUs of its own, or a share of one GPU's memory
(the environment JAX reads when its backend starts); a user's choice is never overridden."""

import json
import os
from types import SimpleNamespace

import pytest

from pytest_tpumem.glue import gpus, sharing
from pytest_tpumem.glue.options import SettingError, Settings
from pytest_tpumem.readings import jaxcompat

GPU_VARS = ("CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")


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
    assert [env["XLA_PYTHON_CLIENT_MEM_FRACTION"] for env in envs] == fractions
    assert {env["XLA_PYTHON_CLIENT_PREALLOCATE"] for env in envs} == {"false"}


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


def test_a_worker_gets_its_gpu_and_a_memory_variable_the_user_set_is_kept(clean_env):
    clean_env.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".2")
    sharing.GPUS.apply(worker("gw1", 4), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == ".2"  # the user's, not 0.375


def test_the_worker_count_may_come_from_xdists_environment(clean_env):
    """Where workerinput has no count, pytest-xdist's PYTEST_XDIST_WORKER_COUNT gives it."""
    clean_env.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    sharing.GPUS.apply(SimpleNamespace(workerinput={"workerid": "gw2"}), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # slot 2 of 3 on 2 GPUs: GPU 0, shared with slot 0
    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.375"


def test_a_users_choice_of_gpus_is_never_overridden(clean_env):
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(
        SettingError, match="CUDA_VISIBLE_DEVICES=3 is set already, and pytest-tpumem does not override"
    ):
        sharing.GPUS.apply(worker(), Settings(enabled=True, gpus=2))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"


def test_a_started_backend_is_too_late(clean_env):
    clean_env.setattr(jaxcompat, "backends_started", lambda: True)
    with pytest.raises(SettingError, match="--tpumem-gpus: jax's backend was started in worker gw1 before"):
        sharing.GPUS.apply(worker(), Settings(enabled=True, gpus=2))
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_nothing_changes_outside_a_worker_or_without_the_option(clean_env):
    sharing.GPUS.apply(SimpleNamespace(), Settings(enabled=True, gpus=2))
    sharing.GPUS.apply(worker(), Settings(enabled=True))
    assert not any(name in os.environ for name in GPU_VARS)


def test_the_header_says_what_each_worker_gets_and_what_the_user_set():
    assert gpus.plan_line(2, 4, {}) == (
        "tpumem: --tpumem-gpus: 2 pytest-xdist workers on 4 GPUs: each worker 2 GPUs of its own (CUDA_VISIBLE_DEVICES)"
    )
    assert gpus.plan_line(2, 3, {}).endswith("each worker 1 GPU of its own (CUDA_VISIBLE_DEVICES); 1 GPU left idle")
    assert gpus.plan_line(4, 1, {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".2"}) == (
        "tpumem: --tpumem-gpus: 4 pytest-xdist workers on 1 GPU: each worker a share of one GPU's memory, taken on "
        "demand (CUDA_VISIBLE_DEVICES, XLA_PYTHON_CLIENT_PREALLOCATE=false, XLA_PYTHON_CLIENT_MEM_FRACTION=0.75 split "
        "between the workers on a GPU); kept as set: XLA_PYTHON_CLIENT_MEM_FRACTION=.2"
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
    assert seen == {
        "gw0": {
            "CUDA_VISIBLE_DEVICES": "0",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.375",
        },
        "gw1": {
            "CUDA_VISIBLE_DEVICES": "1",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.750",
        },
        "gw2": {
            "CUDA_VISIBLE_DEVICES": "0",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.375",
        },
    }
    result.stdout.fnmatch_lines(["tpumem: --tpumem-gpus: 3 pytest-xdist workers on 2 GPUs: each worker a share of *"])


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
