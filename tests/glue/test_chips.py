"""--tpumem-tpu-chips: each pytest-xdist worker gets chips of its own (the environment libtpu reads),
and a count the workers cannot share is one usage error."""

import dataclasses
import json
import os
from types import SimpleNamespace

import pytest

from pytest_tpumem.glue import chips, sharing
from pytest_tpumem.glue.options import SettingError, Settings
from pytest_tpumem.readings import jaxcompat

TPU_VARS = (
    "TPU_VISIBLE_CHIPS",
    "TPU_CHIPS_PER_PROCESS_BOUNDS",
    "TPU_PROCESS_BOUNDS",
    "TPU_PROCESS_ADDRESSES",
    "TPU_PROCESS_PORT",
    "CLOUD_TPU_TASK_ID",
    "ALLOW_MULTIPLE_LIBTPU_LOAD",
)
LEGACY_VARS = ("TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS", "TPU_VISIBLE_DEVICES")


@pytest.fixture
def clean_env(monkeypatch):
    """No TPU variable in this process's environment, whatever a test sets is undone after it, and
    jax's backend taken as not started (other tests in this process start it)."""
    for name in TPU_VARS + LEGACY_VARS + ("PYTEST_XDIST_WORKER_COUNT",):
        monkeypatch.setenv(name, "")  # recorded, so that what apply() sets is undone: delenv of an unset one is not
        monkeypatch.delenv(name)
    monkeypatch.setattr(jaxcompat, "backends_started", lambda: False)
    return monkeypatch


# --- worker_env: the share of each worker ---------------------------------------------------------


@pytest.mark.parametrize(
    "chip_count, workers, visible, bounds",
    [
        (4, 4, ["0", "1", "2", "3"], "1,1,1"),
        (4, 2, ["0,1", "2,3"], "1,2,1"),
        (4, 1, ["0,1,2,3"], "2,2,1"),
        (8, 2, ["0,1,2,3", "4,5,6,7"], "2,2,1"),
        (8, 1, ["0,1,2,3,4,5,6,7"], "2,4,1"),
        (8, 8, [str(c) for c in range(8)], "1,1,1"),
    ],
)
def test_each_worker_gets_neighbouring_chips_of_its_own(chip_count, workers, visible, bounds):
    envs = [chips.worker_env(i, workers, chip_count) for i in range(workers)]
    assert [env["TPU_VISIBLE_CHIPS"] for env in envs] == visible
    for env in envs:
        assert env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == bounds
        assert env["TPU_PROCESS_BOUNDS"] == "1,1,1"  # a one-process slice: the workers are not one job
        assert env["TPU_PROCESS_ADDRESSES"] == "localhost:" + env["TPU_PROCESS_PORT"]
        assert (env["CLOUD_TPU_TASK_ID"], env["ALLOW_MULTIPLE_LIBTPU_LOAD"]) == ("0", "true")
    assert len({env["TPU_PROCESS_PORT"] for env in envs}) == workers


def test_chips_left_over_stay_idle():
    assert [chips.worker_env(i, 3, 4)["TPU_VISIBLE_CHIPS"] for i in range(3)] == ["0", "1", "2"]


@pytest.mark.parametrize(
    "workers, chip_count, message",
    [
        (
            3,
            2,
            "--tpumem-tpu-chips: 3 pytest-xdist workers but 2 TPU chips on this host, "
            "and workers must not share a chip: run with -n 2 or fewer",
        ),
        (
            1,
            3,
            "--tpumem-tpu-chips: 3 TPU chips over 1 pytest-xdist worker is 3 each, "
            "and libtpu takes 1, 2, 4 or 8 chips a process: run with -n 3 (1 each)",
        ),
        (3, 16, "*is 5 each*: run with -n 2 (8 each) or -n 4 (4 each)"),
        (2, 12, "*is 6 each*: run with -n 3 (4 each)"),
    ],
)
def test_a_count_the_workers_cannot_share_says_what_to_run(workers, chip_count, message):
    from fnmatch import fnmatchcase

    with pytest.raises(SettingError) as e:
        chips.worker_env(0, workers, chip_count)
    assert fnmatchcase(str(e.value), message), str(e.value)


# --- host_chips: counted from /dev ----------------------------------------------------------------


def _touch(root, *paths):
    for path in paths:
        target = root.joinpath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")


def test_v4_chips_are_dev_accel(tmp_path):
    _touch(tmp_path, "dev/accel0", "dev/accel1", "dev/accel2", "dev/accel3", "dev/vfio/0")
    assert chips.host_chips(str(tmp_path)) == 4


def test_v5e_and_later_chips_are_numeric_vfio_groups(tmp_path):
    _touch(tmp_path, *(f"dev/vfio/{g}" for g in range(8)), "dev/vfio/vfio")
    (tmp_path / "dev/accel").mkdir()  # NVIDIA drivers 570+: a directory, no chip
    assert chips.host_chips(str(tmp_path)) == 8


def test_a_vfio_group_of_another_vendor_is_no_chip(tmp_path):
    _touch(tmp_path, "dev/vfio/0", "dev/vfio/96")
    for group, vendor in (("0", "0x1ae0"), ("96", "0x15b3")):  # a TPU; a BlueField's management interface
        (tmp_path / f"sys/kernel/iommu_groups/{group}/devices/dev{group}").mkdir(parents=True)
        (tmp_path / f"sys/kernel/iommu_groups/{group}/devices/dev{group}/vendor").write_text(vendor + "\n")
    assert chips.host_chips(str(tmp_path)) == 1


def test_a_vfio_group_whose_sysfs_shows_no_device_is_still_a_chip(tmp_path):
    """Only a vendor seen, and not Google's, makes a group no chip: an empty devices directory tells
    nothing, as a missing one does, and the group counts."""
    _touch(tmp_path, "dev/vfio/0", "dev/vfio/1")
    (tmp_path / "sys/kernel/iommu_groups/0/devices").mkdir(parents=True)  # listed, empty
    assert chips.host_chips(str(tmp_path)) == 2  # group 1: no sysfs directory at all


def test_no_tpu_no_chip(tmp_path):
    assert chips.host_chips(str(tmp_path)) == 0


# --- apply: in a worker, before jax starts --------------------------------------------------------


def worker(workerid="gw1", workercount=2, **more):
    return SimpleNamespace(workerinput={"workerid": workerid, "workercount": workercount, **more})


def test_a_worker_gets_its_share_in_its_environment(clean_env):
    sharing.TPU.apply(worker("gw1", 2), Settings(enabled=True, tpu_chips=4))
    assert os.environ["TPU_VISIBLE_CHIPS"] == "2,3"
    assert os.environ["TPU_CHIPS_PER_PROCESS_BOUNDS"] == "1,2,1"
    assert "TPU_CHIPS_PER_HOST_BOUNDS" not in os.environ  # the older spelling only where it was set


def test_the_controllers_slot_wins_over_the_worker_number(clean_env):
    """A worker that replaces a crashed one (gw2 of -n 2) gets the crashed one's chips."""
    sharing.TPU.apply(worker("gw2", 2, tpumem_chip_slot=0, tpumem_chips=4), Settings(enabled=True, tpu_chips="auto"))
    assert os.environ["TPU_VISIBLE_CHIPS"] == "0,1"


def test_the_older_spellings_set_by_the_host_are_made_to_agree(clean_env):
    clean_env.setenv("TPU_CHIPS_PER_HOST_BOUNDS", "2,2,1")
    clean_env.setenv("TPU_HOST_BOUNDS", "1,1,1")
    sharing.TPU.apply(worker("gw0", 4), Settings(enabled=True, tpu_chips=4))
    assert (os.environ["TPU_CHIPS_PER_HOST_BOUNDS"], os.environ["TPU_HOST_BOUNDS"]) == ("1,1,1", "1,1,1")


@pytest.mark.parametrize(
    "config, settings",
    [
        (SimpleNamespace(), Settings(enabled=True, tpu_chips=4)),  # not a worker
        (worker(), Settings(enabled=True)),  # the option not given
    ],
)
def test_nothing_changes_outside_a_worker_or_without_the_option(clean_env, config, settings):
    sharing.TPU.apply(config, settings)
    assert not any(name in os.environ for name in TPU_VARS)


def test_the_worker_count_may_come_from_xdists_environment(clean_env):
    clean_env.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    sharing.TPU.apply(SimpleNamespace(workerinput={"workerid": "gw3"}), Settings(enabled=True, tpu_chips=4))
    assert os.environ["TPU_VISIBLE_CHIPS"] == "3"


def test_a_started_backend_is_too_late(clean_env):
    clean_env.setattr(jaxcompat, "backends_started", lambda: True)
    with pytest.raises(SettingError, match="jax's backend was started in worker gw1 before pytest-tpumem could give"):
        sharing.TPU.apply(worker(), Settings(enabled=True, tpu_chips=4))
    assert "TPU_VISIBLE_CHIPS" not in os.environ


@pytest.mark.parametrize("name", ["TPU_VISIBLE_CHIPS", "TPU_VISIBLE_DEVICES"])
def test_the_users_own_choice_of_chips_is_not_overridden(clean_env, name):
    clean_env.setenv(name, "0")
    with pytest.raises(SettingError, match=f"{name}=0 is set already, and pytest-tpumem does not override"):
        sharing.TPU.apply(worker(), Settings(enabled=True, tpu_chips=4))
    assert os.environ[name] == "0"


def test_a_control_character_in_the_users_choice_is_said_escaped(clean_env):
    clean_env.setenv("TPU_VISIBLE_CHIPS", "\x1b[2J0")
    with pytest.raises(SettingError) as raised:
        sharing.TPU.apply(worker(), Settings(enabled=True, tpu_chips=4))
    assert "TPU_VISIBLE_CHIPS=\\x1b[2J0 is set already" in str(raised.value)
    assert "\x1b" not in str(raised.value)


def test_auto_without_a_chip_says_to_give_the_number(clean_env):
    clean_env.setattr(sharing, "TPU", dataclasses.replace(sharing.TPU, count=lambda root, environ: 0))
    with pytest.raises(SettingError, match=r"--tpumem-tpu-chips=auto: no TPU chip on this host .*--tpumem-tpu-chips=4"):
        sharing.TPU.apply(worker(), Settings(enabled=True, tpu_chips="auto"))


def test_auto_counts_the_hosts_chips(clean_env):
    clean_env.setattr(sharing, "TPU", dataclasses.replace(sharing.TPU, count=lambda root, environ: 8))
    sharing.TPU.apply(worker("gw1", 2), Settings(enabled=True, tpu_chips="auto"))
    assert os.environ["TPU_VISIBLE_CHIPS"] == "4,5,6,7"


# --- the controller -------------------------------------------------------------------------------


def test_a_replacement_worker_gets_the_chips_of_the_one_that_crashed():
    slots = sharing.Slots(workers=2, count=4, slot_key="tpumem_chip_slot", count_key="tpumem_chips")
    nodes = {i: SimpleNamespace(gateway=SimpleNamespace(id=f"gw{i}"), workerinput={}) for i in range(3)}
    slots.pytest_configure_node(nodes[0])
    slots.pytest_configure_node(nodes[1])
    slots.pytest_testnodedown(nodes[1], error="crashed")
    slots.pytest_configure_node(nodes[2])
    assert [nodes[i].workerinput["tpumem_chip_slot"] for i in range(3)] == [0, 1, 1]
    assert {n.workerinput["tpumem_chips"] for n in nodes.values()} == {4}


@pytest.mark.parametrize(
    "tx, workers",
    [(["popen"] * 3, 3), (["2*popen", "popen//python=python3"], 3), (["popen", "ssh=somehost"], None), ([], None)],
)
def test_the_controller_counts_the_workers_on_this_host(tx, workers):
    options = {"collectonly": False, "dist": "load" if tx else "no", "tx": tx}
    config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
    assert sharing.local_workers(config) == workers


# --- through pytest-xdist -------------------------------------------------------------------------

RECORD = f"""
import json, os, pathlib

import jax.numpy as jnp


def test_record(worker_id):
    env = {{name: os.environ.get(name) for name in {TPU_VARS!r}}}
    pathlib.Path("seen", worker_id + ".json").write_text(json.dumps(env))
    assert int(jnp.arange(4).sum()) == 6  # jax still runs (on this host's CPU)
"""


def seen(pytester):
    return {p.stem: json.loads(p.read_text()) for p in (pytester.path / "seen").iterdir()}


@pytest.mark.parametrize(
    "args, ini, visible",
    [
        (("-n", "2", "--tpumem-tpu-chips=4"), "", {"gw0": "0,1", "gw1": "2,3"}),
        (("-n", "4", "--tpumem-tpu-chips=4"), "", {"gw0": "0", "gw1": "1", "gw2": "2", "gw3": "3"}),
        (("-n", "2"), "tpumem_tpu_chips = 8", {"gw0": "0,1,2,3", "gw1": "4,5,6,7"}),
    ],
)
def test_each_xdist_worker_runs_its_tests_on_chips_of_its_own(pytester, clean_env, args, ini, visible):
    pytest.importorskip("xdist")
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.mkdir("seen")
    pytester.makepyfile(test_record=RECORD)
    result = pytester.runpytest_subprocess("--tpumem", "--dist", "each", *args)
    result.assert_outcomes(passed=len(visible))
    env = seen(pytester)
    assert {w: e["TPU_VISIBLE_CHIPS"] for w, e in env.items()} == visible
    share = len(visible["gw0"].split(","))
    assert {e["TPU_CHIPS_PER_PROCESS_BOUNDS"] for e in env.values()} == {chips.BOUNDS[share]}
    assert len({e["TPU_PROCESS_PORT"] for e in env.values()}) == len(visible)


def test_without_the_option_no_worker_is_given_chips(pytester, clean_env):
    pytest.importorskip("xdist")
    pytester.mkdir("seen")
    pytester.makepyfile(test_record=RECORD)
    result = pytester.runpytest_subprocess("--tpumem", "--dist", "each", "-n", "2")
    result.assert_outcomes(passed=2)
    assert all(value is None for env in seen(pytester).values() for value in env.values())


CRASH_ONCE = """
import os, time


def test_crash_once(worker_id):
    try:
        fd = os.open("crashed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, worker_id.encode())
    os.close(fd)
    os._exit(1)


def test_more(worker_id):
    time.sleep(0.5)
"""

RECORD_AT_START = f"""
import json, os, pathlib


def pytest_sessionstart(session):
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is not None:
        env = {{name: os.environ.get(name) for name in {TPU_VARS!r}}}
        pathlib.Path("seen", workerinput["workerid"] + ".json").write_text(json.dumps(env))
"""


def test_a_worker_replacing_a_crashed_one_gets_its_chips(pytester, clean_env):
    pytest.importorskip("xdist")
    pytester.mkdir("seen")
    pytester.makeconftest(RECORD_AT_START)
    pytester.makepyfile(test_crash=CRASH_ONCE)
    result = pytester.runpytest_subprocess("--tpumem", "-n", "2", "--dist", "each", "--tpumem-tpu-chips=4")
    result.stdout.fnmatch_lines(["*replacing crashed worker gw*"])
    crashed = (pytester.path / "crashed").read_text()
    survivor = {"gw0": "gw1", "gw1": "gw0"}[crashed]
    chips_of = {w: e["TPU_VISIBLE_CHIPS"] for w, e in seen(pytester).items()}
    assert chips_of["gw2"] == chips_of[crashed] != chips_of[survivor]


@pytest.mark.parametrize(
    "args, env, message",
    [
        (
            ("-n", "3", "--tpumem-tpu-chips=2"),
            {},
            "ERROR: pytest-tpumem: --tpumem-tpu-chips: 3 pytest-xdist workers but 2 TPU chips on this host, "
            "and workers must not share a chip: run with -n 2 or fewer",
        ),
        (
            ("-n", "1", "--tpumem-tpu-chips=3"),
            {},
            "ERROR: pytest-tpumem: --tpumem-tpu-chips: 3 TPU chips over 1 pytest-xdist worker is 3 each*",
        ),
        (
            ("-n", "2", "--tpumem-tpu-chips=4"),
            {"TPU_VISIBLE_CHIPS": "0"},
            "ERROR: pytest-tpumem: --tpumem-tpu-chips: TPU_VISIBLE_CHIPS=0 is set already*",
        ),
    ],
)
def test_what_the_workers_cannot_share_is_one_usage_error(pytester, clean_env, args, env, message):
    pytest.importorskip("xdist")
    for name, value in env.items():
        clean_env.setenv(name, value)
    _refused_before_any_worker(pytester, args, message)


def test_a_backend_started_at_conftest_import_is_one_usage_error(pytester, clean_env):
    """Too late for the workers to choose chips (the same conftest starts theirs), and the controller's
    backend would hold the chips."""
    pytest.importorskip("xdist")
    pytester.makeconftest("import jax\n\njax.devices()\n")
    _refused_before_any_worker(
        pytester,
        ("-n", "2", "--tpumem-tpu-chips=4"),
        "ERROR: pytest-tpumem: --tpumem-tpu-chips: jax's backend was started in the pytest-xdist controller before "
        "pytest-tpumem could share out the chips (a conftest or plugin called jax.devices()*",
    )


def _refused_before_any_worker(pytester, args, message):
    pytester.makepyfile("def test_never():\n    raise AssertionError('ran')\n")
    result = pytester.runpytest_subprocess("--tpumem", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "[gw" not in result.stdout.str() and "crashed" not in result.stdout.str()


class _WarnedConfig:
    def __init__(self):
        self.warnings = []

    def issue_config_time_warning(self, warning, stacklevel):
        self.warnings.append(str(warning))


def test_workers_sharing_the_chips_of_a_tpu_host_get_a_warning_without_the_option(tmp_path, monkeypatch):
    (tmp_path / "dev").mkdir()
    for i in range(4):
        (tmp_path / "dev" / f"accel{i}").touch()
    monkeypatch.delenv("TPU_VISIBLE_CHIPS", raising=False)
    monkeypatch.delenv("TPU_VISIBLE_DEVICES", raising=False)
    config = _WarnedConfig()
    sharing.TPU.warn_if_shared(config, 2, str(tmp_path))
    assert config.warnings == [
        "pytest-tpumem: 2 pytest-xdist workers on a TPU host with 4 chips, and nothing gives each worker chips of "
        "its own: libtpu lets one process hold a chip, so the others will fail to start their backend; pass "
        "--tpumem-tpu-chips auto"
    ]
    # a choice made elsewhere (JAX's conftest sets TPU_VISIBLE_CHIPS itself), one worker, no TPU: no warning
    monkeypatch.setenv("TPU_VISIBLE_CHIPS", "0")
    sharing.TPU.warn_if_shared(config, 2, str(tmp_path))
    monkeypatch.delenv("TPU_VISIBLE_CHIPS")
    monkeypatch.setenv("JAX_ENABLE_TPU_XDIST", "1")  # JAX's conftest gives each worker a chip itself
    sharing.TPU.warn_if_shared(config, 2, str(tmp_path))
    monkeypatch.delenv("JAX_ENABLE_TPU_XDIST")
    sharing.TPU.warn_if_shared(config, 1, str(tmp_path))
    sharing.TPU.warn_if_shared(config, 2, str(tmp_path / "nowhere"))
    assert len(config.warnings) == 1
