"""Triton ensembles (issue 23, item 4): ensemble_scheduling read into an Ensemble, written
back, and the malformed ones refused with the line."""

import warnings

import pytest

import qmodel as qm

pytest.importorskip("tritonclient.grpc", reason="needs the triton extra: pip install "
                                                "'qmodel[triton]'")
from qmodel.triton import TritonEnsembleConfig, read_config, write_config  # noqa: E402

S = qm.ServiceTime.affine(1e-3, 1e-4)
CASE = qm.Ensemble({"user_tower": qm.Node(S, max_batch_size=8, max_queue_delay=1e-3,
                                          preferred_batch_sizes=(1, 2, 4), instances=8),
                    "item_tower": qm.Node(S, max_batch_size=8, max_queue_delay=1e-3,
                                          preferred_batch_sizes=(1, 2, 4), instances=8),
                    "scoring": qm.Node(S, max_batch_size=8, instances=8)},
                   [("user_tower", "scoring"), ("item_tower", "scoring")])
MODEL = 'backend: "python"\nmax_batch_size: 8\ndynamic_batching { }\n' \
        'instance_group [{ count: 2, kind: KIND_CPU }]\n'


def _repository(tmp_path, texts):
    for model, text in texts.items():
        (tmp_path / model).mkdir()
        (tmp_path / model / "config.pbtxt").write_text(text)
    return tmp_path


def test_an_ensemble_round_trips_through_a_model_repository(tmp_path):
    texts = write_config(CASE, "recommender", kind="KIND_CPU")
    assert set(texts) == {"recommender", "user_tower", "item_tower", "scoring"}
    assert 'platform: "ensemble"' in texts["recommender"]
    repo = _repository(tmp_path, texts)
    for source in (repo / "recommender", repo / "recommender" / "config.pbtxt"):
        cfg = read_config(source)
        assert isinstance(cfg, TritonEnsembleConfig) and cfg.name == "recommender"
        assert cfg.stages["user_tower"].instances == 8
        assert cfg.stages["user_tower"].preferred_batch_sizes == (1, 2, 4)
        assert cfg.ensemble({m: S for m in cfg.stages}) == CASE
    text = texts["recommender"]
    assert read_config(text, repository=repo).edges == tuple(sorted(CASE.edges))


def test_steps_follow_the_tensors_they_read(tmp_path):
    """A chain pre -> model -> post written by hand, the ensemble input read twice."""
    repo = _repository(tmp_path, {m: MODEL for m in ("pre", "model", "post")})
    ens = read_config('''
name: "pipe"
platform: "ensemble"
max_batch_size: 8
input [{ name: "RAW", data_type: TYPE_FP32, dims: [4] }]
output [{ name: "SCORE", data_type: TYPE_FP32, dims: [1] }]
ensemble_scheduling { step [
  { model_name: "pre", model_version: -1, input_map { key: "x" value: "RAW" }
    output_map { key: "y" value: "FEATURES" } },
  { model_name: "model", model_version: -1, input_map { key: "x" value: "FEATURES" }
    input_map { key: "raw" value: "RAW" } output_map { key: "y" value: "LOGITS" } },
  { model_name: "post", model_version: -1, input_map { key: "x" value: "LOGITS" }
    output_map { key: "y" value: "SCORE" } } ] }
''', repository=repo)
    assert ens.edges == (("model", "post"), ("pre", "model"))
    assert ens.ensemble({"pre": S, "model": S, "post": S}).order == ("pre", "model", "post")


@pytest.mark.parametrize("steps, message", [
    ('{ model_name: "a", input_map { key: "x" value: "NOWHERE" } '
     'output_map { key: "y" value: "OUT" } }',
     r"<text>:\d+: step 'a' reads tensor 'NOWHERE', which neither the ensemble's inputs nor "
     r"any step's output_map provides \(a missing input"),
    ('{ model_name: "a", input_map { key: "x" value: "IN" } output_map { key: "y" value: "T" } '
     '}, { model_name: "a", input_map { key: "x" value: "T" } output_map { key: "y" value: '
     '"OUT" } }', "model 'a' runs in two steps"),
    ('{ model_name: "a", input_map { key: "x" value: "IN" } output_map { key: "y" value: "T" } '
     '}, { model_name: "b", input_map { key: "x" value: "IN" } output_map { key: "y" value: '
     '"T" } }', "ensemble tensor 'T' is written twice"),
    ('{ model_name: "a", input_map { key: "x" value: "IN" } output_map { key: "y" value: "T" } '
     '}', "ensemble output 'OUT' is written by no step"),
    ('{ model_name: "missing", input_map { key: "x" value: "IN" } output_map { key: "y" '
     'value: "OUT" } }', "step 'missing': read_config: no config file at"),
])
def test_malformed_ensembles_name_the_line(tmp_path, steps, message):
    repo = _repository(tmp_path, {"a": MODEL, "b": MODEL})
    text = ('platform: "ensemble"\nmax_batch_size: 8\ninput [{ name: "IN", data_type: '
            'TYPE_FP32, dims: [1] }]\noutput [{ name: "OUT", data_type: TYPE_FP32, dims: [1] '
            f'}}]\nensemble_scheduling {{ step [ {steps} ] }}\n')
    with pytest.raises(ValueError, match=message):
        read_config(text, repository=repo)


def test_an_ensemble_as_text_needs_its_repository():
    with pytest.raises(ValueError, match="give the ensemble's directory or file, or "
                                         "repository="):
        read_config('platform: "ensemble"\nensemble_scheduling { step [{ model_name: "a" }] }')


def test_services_must_cover_every_step(tmp_path):
    repo = _repository(tmp_path, write_config(CASE, "recommender", kind="KIND_CPU"))
    cfg = read_config(repo / "recommender")
    with pytest.raises(ValueError, match="no ServiceTime for 'scoring'"):
        cfg.ensemble({"user_tower": S, "item_tower": S})


def test_what_qmodel_does_not_model_is_warned(tmp_path):
    texts = write_config(CASE, "recommender")               # KIND_GPU without gpus listed
    texts["recommender"] = texts["recommender"].replace(
        "ensemble_scheduling {", "ensemble_scheduling {\n  max_inflight_requests: 4", 1)
    repo = _repository(tmp_path, texts)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = read_config(repo / "recommender")
    text = " ".join(str(w.message) for w in caught)
    assert "max_inflight_requests 4" in text and "step 'scoring'" in text
    assert any("max_inflight_requests" in note for note in cfg.unmodelled)


def test_a_step_with_a_queue_limit_is_refused_with_the_file(tmp_path):
    limited = MODEL.replace("dynamic_batching { }",
                            "dynamic_batching { default_queue_policy { max_queue_size: 8 } }")
    repo = _repository(tmp_path, {"a": limited, "b": MODEL})
    text = ('platform: "ensemble"\nmax_batch_size: 8\ninput [{ name: "IN", data_type: '
            'TYPE_FP32, dims: [1] }]\noutput [{ name: "OUT", data_type: TYPE_FP32, dims: [1] '
            '}]\nensemble_scheduling { step [ { model_name: "a", input_map { key: "x" value: '
            '"IN" } output_map { key: "y" value: "OUT" } } ] }\n')
    with pytest.raises(ValueError, match=r"^<text>: Ensemble stage 'a' has max_queue_size=8"):
        read_config(text, repository=repo)
