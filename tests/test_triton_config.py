"""qmodel.triton.read_config / write_config: Triton's config.pbtxt in qmodel's knobs and back
(issue 22, item 2 and 3)."""

import sys
import warnings

import pytest

import qmodel as qm
from qmodel.triton import TritonConfigWarning, read_config, write_config

pytest.importorskip("tritonclient.grpc", reason="the [triton] extra is not installed")
from google.protobuf import text_format  # noqa: E402
from tritonclient.grpc import model_config_pb2  # noqa: E402

SERVICE = qm.ServiceTime.affine(1e-3, 1e-4)
CPU = "instance_group [{ kind: KIND_CPU }]\n"


def quiet(text, **kwargs):
    """read_config where the text sets nothing unmodelled (a warning would be a failure)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TritonConfigWarning)
        return read_config(text, **kwargs)


@pytest.mark.parametrize("node", [
    qm.Node(SERVICE),
    qm.Node(SERVICE, max_batch_size=32, max_queue_delay=2.5e-3),
    qm.Node(SERVICE, max_batch_size=64, max_queue_delay=1e-4, preferred_batch_sizes=(16, 32),
            instances=3, max_queue_size=128),
])
def test_write_then_read_gives_the_node_back(node):
    text = write_config(node, "m", kind="KIND_CPU")
    config = quiet(text)
    assert config.node(node.service) == node
    assert config.name == "m" and config.backend == "python" and config.unmodelled == ()
    # what Triton parses: the same message through its own schema
    message = text_format.Parse(text, model_config_pb2.ModelConfig())
    assert message.max_batch_size == node.max_batch_size
    assert message.dynamic_batching.max_queue_delay_microseconds == round(
        node.max_queue_delay * 1e6)
    assert list(message.dynamic_batching.preferred_batch_size) == list(
        node.preferred_batch_sizes)


def test_units_and_names():
    config = quiet('name: "ranker"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 16\n'
                   'dynamic_batching {\n  max_queue_delay_microseconds: 2500\n'
                   '  preferred_batch_size: [ 4, 8 ]\n'
                   '  default_queue_policy { max_queue_size: 40 }\n}\n' + CPU)
    assert (config.max_batch_size, config.max_queue_delay, config.preferred_batch_sizes,
            config.max_queue_size, config.instances) == (16, 0.0025, (4, 8), 40, 1)
    assert config.backend == "onnxruntime_onnx" and config.dynamic_batching


@pytest.mark.parametrize("groups, gpus, instances", [
    ("instance_group [{ count: 2, kind: KIND_CPU }, { count: 3, kind: KIND_CPU }]", None, 5),
    ("instance_group [{ count: 2, kind: KIND_GPU, gpus: [0, 1, 2] }]", None, 6),
    ("instance_group [{ count: 2, kind: KIND_GPU, gpus: [0] },"
     " { count: 1, kind: KIND_GPU, gpus: [1, 2] }]", None, 4),
    ("instance_group [{ count: 2, kind: KIND_GPU }]", 4, 8),
    ("instance_group [{ kind: KIND_GPU }]", 2, 2),            # count defaults to 1
    ("", 4, 4),                                                # one instance per GPU
    ("", 0, 1),                                                # or one on the CPU
    ("instance_group [{ count: 3, kind: KIND_AUTO }]", 0, 3),  # AUTO without GPUs: CPU
])
def test_instances_sum_over_groups_and_gpus(groups, gpus, instances):
    config = quiet(f"max_batch_size: 8\ndynamic_batching {{ }}\n{groups}", gpus=gpus)
    assert config.instances == instances


def test_gpu_groups_without_a_gpu_count_assume_one_and_say_so():
    with pytest.warns(TritonConfigWarning, match=r"instance_group\[0\] \(KIND_GPU, count 2, "
                                                 r"no gpus listed\).*taken as 1 GPU"):
        config = read_config("max_batch_size: 8\ndynamic_batching { }\n"
                             "instance_group [{ count: 2, kind: KIND_GPU }]")
    assert config.instances == 2 and "taken as 1 GPU" in config.unmodelled[0]
    with pytest.raises(ValueError, match="give no instance"):
        quiet("max_batch_size: 8\ninstance_group [{ count: 2, kind: KIND_GPU }]", gpus=0)
    with pytest.raises(ValueError, match="gpus must be the number of GPUs"):
        read_config("max_batch_size: 8", gpus=-1)


def test_no_dynamic_batcher_serves_one_request_per_execution():
    with pytest.warns(TritonConfigWarning, match="no dynamic_batching: Triton's default "
                                                 "scheduler runs each request alone"):
        config = read_config("max_batch_size: 32\n" + CPU)
    assert config.max_batch_size == 1 and config.triton_max_batch_size == 32
    assert quiet("max_batch_size: 0\n" + CPU).max_batch_size == 1


@pytest.mark.parametrize("block, expected", [
    ("dynamic_batching { priority_levels: 2 default_priority_level: 1 }",
     "priority_levels 2: qmodel serves one FIFO queue"),
    ("dynamic_batching { default_queue_policy { default_timeout_microseconds: 5000 } }",
     "does not time requests out"),
    ("dynamic_batching { preserve_ordering: true }", "preserve_ordering"),
    ("dynamic_batching { }\nresponse_cache { enable: true }", "response_cache"),
])
def test_what_qmodel_does_not_model_is_named(block, expected):
    with pytest.warns(TritonConfigWarning, match=expected):
        config = read_config(f"max_batch_size: 8\n{block}\n{CPU}")
    assert any(expected in note for note in config.unmodelled)


def test_rate_limiter_is_named():
    with pytest.warns(TritonConfigWarning, match=r"instance_group\[0\].rate_limiter"):
        read_config('max_batch_size: 8\ndynamic_batching { }\ninstance_group [{ kind: '
                    'KIND_CPU, rate_limiter { resources [{ name: "R1", count: 4 }] } }]')


def test_malformed_files_name_the_file_and_line(tmp_path):
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir()
    path.write_text('name: "m"\nmax_batch_size: 8\ndynamic_batching {\n'
                    '  max_queue_delay_microsecond: 100\n}\n')
    with pytest.raises(ValueError, match=rf"^{path}:4:3: Message type "
                                         r"\"inference.ModelDynamicBatching\" has no field "
                                         r"named \"max_queue_delay_microsecond\""):
        read_config(path)
    path.write_text('max_batch_size: eight\n')
    with pytest.raises(ValueError, match=rf"^{path}:1:17: .*Couldn't parse integer"):
        read_config(path.parent)                  # the model's directory works too
    with pytest.raises(ValueError, match=r"<text>:1:17: .*Value out of range"):
        read_config("max_batch_size: 99999999999")
    with pytest.raises(ValueError, match=r"^<text>:2: max_batch_size must be 0"):
        read_config("name: 'm'\nmax_batch_size: -4\n" + CPU)
    with pytest.raises(ValueError, match="no config file at"):
        read_config(tmp_path / "missing")


def test_knobs_out_of_range_name_the_line():
    with pytest.raises(ValueError, match=r"^<text>:3: Node.preferred_batch_sizes"):
        read_config("max_batch_size: 8\ndynamic_batching {\n  preferred_batch_size: [ 16 ]\n}\n"
                    + CPU)


def test_sequence_batching_is_refused_with_the_line():
    with pytest.raises(ValueError, match=r"^<text>:2: this model uses sequence batching"):
        read_config("max_batch_size: 8\nsequence_batching { max_sequence_idle_microseconds: "
                    "1000 }\n")


def test_write_config_checks_its_arguments():
    node = qm.Node(SERVICE, max_batch_size=8, max_queue_delay=0.5e-6)
    with pytest.raises(ValueError, match="not a whole number of microseconds"):
        write_config(node, "m")
    node = qm.Node(SERVICE, max_batch_size=8, instances=3)
    with pytest.raises(ValueError, match=r"node.instances \(3\) divisible"):
        write_config(node, "m", gpus=[0, 1])
    with pytest.raises(ValueError, match=r"\(name, data_type, dims\)"):
        write_config(node, "m", inputs=[("x", "TYPE_FP32")])
    with pytest.raises(ValueError, match="name must be the model's directory name"):
        write_config(node, "a/b")
    text = write_config(qm.Node(SERVICE, instances=4), "m", gpus=[0, 1])
    assert quiet(text).instances == 4


def test_without_the_extra_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tritonclient.grpc", None)
    with pytest.raises(ImportError, match=r"pip install 'qmodel\[triton\]'"):
        read_config("max_batch_size: 8")
