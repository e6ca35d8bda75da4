"""The parsers of what XLA writes, pinned to real text: buffer assignments, memory-usage reports
and optimized HLO that jax 0.10.2 and libtpu wrote for three small programs (golden/make.py makes
them again), and the TPU compiler's refusal. Each figure below was checked against the file by
hand; a change of format in a new jax shows here first, as a figure, not as a vaguer message."""

import pathlib

import pytest

from pytest_tpumem.readings import tpu
from pytest_tpumem.readings.buffers import Buffer, hlo_buffers, largest_buffers, memory_spaces

GOLDEN = pathlib.Path(__file__).parent / "golden"
MODEL = "/tmp/tpumem-golden/model.py"  # where make.py ran the programs: never under a test's directory


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # source paths are shown relative to the working directory where under it


def test_a_tpu_buffer_assignment_gives_the_hbm_values_largest_first_and_leaves_out_vmem_smem_and_scratch():
    # allocation 8 (the 16 MiB prefetch copy) is color 1, vmem; allocation 6 is color 2, smem; the
    # three 512-byte reduce_sum allocations are thread-local: none of them is HBM.
    assert largest_buffers(GOLDEN / "tpu_step") == (
        Buffer(16_777_216, "bf16[4096,2048]", "argument 0", "x.1", "x", ""),
        Buffer(4_194_304, "bf16[2048,1024]", "argument 1", "w.1", "w", ""),
        Buffer(4096, "f32[1024]", "output", "tanh_reduce_fusion", "jit(step)/dot_general", f"{MODEL}:18 (step)"),
        Buffer(512, "(bf16[4096,2048], bf16[4096,2048], u32[])", "temporary", "copy-start{}", "", ""),
    )
    assert largest_buffers(GOLDEN / "tpu_step", count=2) == largest_buffers(GOLDEN / "tpu_step")[:2]


def test_a_refused_program_still_has_its_buffers_and_memory_spaces():
    assert largest_buffers(GOLDEN / "tpu_refused") == (
        Buffer(17_363_968_000, "f32[70000,62000]", "argument 0", "x.1", "x", ""),
        Buffer(
            512, "f32[]", "output", "convolution_reduce_fusion", "jit(too_big)/dot_general", f"{MODEL}:24 (too_big)"
        ),
    )
    assert memory_spaces(GOLDEN / "tpu_refused") == {"default": 17_363_970_048, "vmem": 0}


def test_memory_spaces_are_read_per_space_default_being_hbm():
    assert memory_spaces(GOLDEN / "tpu_step") == {"default": 20_977_664, "vmem": 16_777_216, "smem": 4}


def test_a_directory_without_a_dump_reads_as_nothing(tmp_path):
    assert largest_buffers(tmp_path) == () and memory_spaces(tmp_path) == {}


def test_the_tpu_compilers_refusal_gives_its_two_figures_in_binary_units():
    text = (GOLDEN / "tpu_refused.refusal.txt").read_text()
    m = tpu._REFUSAL.search(text)
    assert m is not None and m.group(0) == "required for HLO temporaries (16.17G) exceeds available HBM (15.75G)"
    assert (tpu._size(m[1], m[2]), tpu._size(m[3], m[4])) == (17_362_405_294, 16_911_433_728)  # 16.17 and 15.75 GiB


def test_an_optimized_module_gives_what_its_entry_computation_materializes_with_lines():
    # The CPU compiler converts the bf16 operands of the dot itself (no op_name): not the user's upcast.
    buffers = hlo_buffers((GOLDEN / "cpu_step.optimized.txt").read_text())
    assert [(b.size, b.shape, b.kind, b.instruction, b.op, b.source, b.converted_from) for b in buffers] == [
        (4096, "bf16[64,32]", "argument 0", "x.1", "x", "", ""),
        (1024, "bf16[32,16]", "argument 1", "w.1", "w", "", ""),
        (8192, "f32[64,32]", "temporary", "wrapped_convert", "", "", ""),
        (2048, "f32[32,16]", "temporary", "wrapped_convert.1", "", "", ""),
        (4096, "f32[64,16]", "temporary", "ynn_fusion", "jit(step)/dot_general", f"{MODEL}:18 (step)", ""),
        (4096, "f32[64,16]", "temporary", "wrapped_tanh", "jit(step)/tanh", f"{MODEL}:19 (step)", ""),
        (128, "f32[2,16]", "temporary", "wrapped_reduce-window", "", "", ""),
        (64, "f32[16]", "output", "wrapped_reduce", "jit(step)/reduce_sum", f"{MODEL}:19 (step)", ""),
    ]


def test_an_upcast_the_user_wrote_is_named_with_the_narrow_dtype_and_every_result_is_an_output():
    buffers = hlo_buffers((GOLDEN / "cpu_upcast.optimized.txt").read_text())
    assert [(b.size, b.kind, b.instruction, b.source, b.converted_from) for b in buffers] == [
        (4096, "argument 0", "x.1", "", ""),
        (8192, "output", "wrapped_convert", f"{MODEL}:28 (upcast)", "bf16"),
        (8192, "output", "convert_sine_fusion", f"{MODEL}:29 (upcast)", ""),  # converts inside its fusion: not a value
    ]


def test_a_module_without_an_entry_computation_reads_as_nothing():
    assert hlo_buffers("HloModule empty\n") == ()
