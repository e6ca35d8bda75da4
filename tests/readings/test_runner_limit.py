"""readings.host.runner_limit on made-up /proc and /sys trees, as the kernel writes them: cgroup
v2's memory.max ("max" where none), v1's memory.limit_in_bytes (9223372036854771712 where none),
the smallest limit of the cgroup and those above it, else MemTotal. The kernel's own files on
this machine are read by the last test."""

import pytest

from pytest_tpumem.readings.host import oom_kills, runner_limit

V1_NONE = "9223372036854771712"


def _tree(tmp_path, files):
    for path, text in files.items():
        f = tmp_path / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text + "\n")
    return str(tmp_path)


MEMINFO = "MemTotal:       24684084 kB\nMemFree:        1000 kB"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # v2: the job's cgroup has none, its parent 1 GiB
            {
                "/proc/self/cgroup": "0::/ci/job",
                "/sys/fs/cgroup/ci/job/memory.max": "max",
                "/sys/fs/cgroup/ci/memory.max": "1073741824",
                "/proc/meminfo": MEMINFO,
            },
            (1073741824, "/sys/fs/cgroup/ci/memory.max"),
        ),
        (  # v2: the job's own limit is the smaller
            {
                "/proc/self/cgroup": "0::/ci/job",
                "/sys/fs/cgroup/ci/job/memory.max": "943718400",
                "/sys/fs/cgroup/ci/memory.max": "1073741824",
            },
            (943718400, "/sys/fs/cgroup/ci/job/memory.max"),
        ),
        (  # v1, as on this machine: the memory controller's line, no limit set: MemTotal
            {
                "/proc/self/cgroup": "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/",
                "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": V1_NONE,
                "/sys/fs/cgroup/memory/memory.limit_in_bytes": V1_NONE,
                "/proc/meminfo": MEMINFO,
            },
            (24684084 * 1024, "/proc/meminfo MemTotal (no memory cgroup limit)"),
        ),
        (  # v1 with a limit, as ../shared/cases/runner/run.sh makes one
            {
                "/proc/self/cgroup": "4:memory:/runner_case_7",
                "/sys/fs/cgroup/memory/runner_case_7/memory.limit_in_bytes": "943718400",
            },
            (943718400, "/sys/fs/cgroup/memory/runner_case_7/memory.limit_in_bytes"),
        ),
        ({"/proc/meminfo": "MemFree: 1 kB"}, None),  # nothing readable
    ],
)
def test_the_runners_limit_is_the_smallest_on_the_way_up_else_the_machines(tmp_path, files, expected):
    assert runner_limit(_tree(tmp_path, files)) == expected


def test_this_machine_has_a_limit_it_can_read():
    limit, source = runner_limit()
    assert limit > 0 and source


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # v2: memory.events, summed up the path (the kill counted where the limit was hit)
            {
                "/proc/self/cgroup": "0::/ci/job",
                "/sys/fs/cgroup/ci/job/memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0",
                "/sys/fs/cgroup/ci/memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 2",
            },
            (3, "/sys/fs/cgroup/ci/job/memory.events"),
        ),
        (  # v1: memory.oom_control
            {
                "/proc/self/cgroup": "4:memory:/runner_case_7",
                "/sys/fs/cgroup/memory/runner_case_7/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1",
            },
            (1, "/sys/fs/cgroup/memory/runner_case_7/memory.oom_control"),
        ),
        ({"/proc/self/cgroup": "0::/"}, None),  # nothing that counts kills
    ],
)
def test_the_oom_killers_count_is_read_up_the_cgroup_path(tmp_path, files, expected):
    assert oom_kills(_tree(tmp_path, files)) == expected


def test_host_rss_is_the_kernels_vmrss():
    """host_rss reads /proc/self/statm (cheaper than status): the same figure as VmRSS, read
    between two reads of status with nothing allocated between them."""
    from pytest_tpumem.readings.host import _proc_status, host_rss

    before = _proc_status("VmRSS")
    rss = host_rss()
    after = _proc_status("VmRSS")
    assert before is not None and after is not None and rss is not None
    assert min(before, after) - 64 * 1024 <= rss <= max(before, after) + 64 * 1024
