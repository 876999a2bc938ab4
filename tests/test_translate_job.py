"""Back-/forward-translation end to end through the real `spark-submit`: monolingual Tatoeba
text into mono_clean (jobs/filter.py --lang), a tiny multilingual model decoding it with every
method (jobs/translate.py), a second run from flags, and the synthetic pairs fed back through
the filter job."""

from __future__ import annotations

import json
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from integration_helpers import BT_BAD_LINES as BAD_LINES
from integration_helpers import BT_FLAGS_STREAM, JIT_OPTS, read_lake, submit_to
from integration_helpers import BT_MAX_IN as MAX_IN
from integration_helpers import BT_MAX_OUT as MAX_OUT
from integration_helpers import BT_STREAMS as STREAMS

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier


@pytest.fixture(scope="module")
def lake(translate_lake: dict) -> dict:
    """Built once per session (conftest.py, integration_helpers.build_translate_lake): two
    filter runs into mono_clean, the config run bt1 of STREAMS, the flags run bt2 (beam,
    80 rows, round 2), the filter job on bt1's sampled pairs (fb1), every table read."""
    return translate_lake


KEYS = ["stream", "role", "method", "params", "model", "round", "direction", "run_id", "src",
        "tgt", "hypothesis", "score", "src_tokens", "tgt_tokens", "source_row_id",
        "source_corpus", "row_id", "reject_reason"]


def rows(lake: dict, table: str, run_id: str = "bt1") -> list[dict]:
    return [r for r in (dict(zip(KEYS, x, strict=True)) for x in lake["rows"][table])
            if r["run_id"] == run_id]


def by_stream(lake: dict, table: str = "synthetic") -> dict[str, dict[int, dict]]:
    out: dict = defaultdict(dict)
    for r in rows(lake, table):
        out[r["stream"]][int(r["source_row_id"])] = r
    return out


def test_monolingual_text_is_filtered_and_conserved(lake: dict) -> None:
    assert "en tatoeba: 503 in" in lake["mono_en"]
    rejected = {(r[0], r[1]): r[2] for r in lake["rows"]["mono_rejected"]}
    assert rejected[("en", "")] == "empty"
    assert rejected[("en", BAD_LINES[1])] == "url_email_html"
    assert rejected[("en", BAD_LINES[2])] == "langid_src"  # Russian in the English corpus
    kept = Counter(r[0] for r in lake["rows"]["mono"])
    dropped = Counter(r[0] for r in lake["rows"]["mono_rejected"])
    stats = {r[0]: (int(r[1]), int(r[2])) for r in lake["rows"]["mono_stats"]}
    assert stats["en"] == (dropped["en"], 503) and kept["en"] + dropped["en"] == 503
    assert stats["zh"] == (dropped["zh"], 1500) and kept["zh"] + dropped["zh"] == 1500
    assert dropped["zh"] > 50  # Tatoeba "zh" has Cantonese lines: langid rejects them


def test_every_selected_sentence_is_synthetic_or_rejected(lake: dict) -> None:
    mono = {int(r[1]): (r[0], r[2]) for r in lake["rows"]["mono"]}
    stats = {r[0]: r for r in lake["rows"]["stats"] if r[10] == "bt1"}
    synth, rejected = by_stream(lake), by_stream(lake, "synthetic_rejected")
    for s in STREAMS:
        name = s["name"]
        ids = list(synth[name]) + list(rejected[name])
        assert len(ids) == len(set(ids)) == stats[name][6]  # selected = synthetic + rejected
        assert (stats[name][7], stats[name][8]) == (len(synth[name]), len(rejected[name]))
        reasons = Counter(r["reject_reason"] for r in rejected[name].values())
        assert json.loads(json.dumps(stats[name][9])) == dict(reasons)
        src_lang = s["direction"][:2]
        for sid, r in {**synth[name], **rejected[name]}.items():
            assert mono[sid] == (src_lang, r["src"])  # the source row, by its id
    assert "rows were lost" not in lake["translate"]


def test_balance_follows_the_weights(lake: dict) -> None:
    selected = {r[0]: r[6] for r in lake["rows"]["stats"] if r[10] == "bt1"}
    assert selected == {s["name"]: 60 * s.get("weight", 1) for s in STREAMS}


def test_provenance_columns(lake: dict, tiny_multi_ct2: Path) -> None:
    confs = {s["name"]: s for s in STREAMS}
    for r in rows(lake, "synthetic") + rows(lake, "synthetic_rejected"):
        s = confs[r["stream"]]
        assert (r["direction"], r["method"], r["role"]) == (
            s["direction"], s["method"], s.get("role", "back"))
        assert r["model"] == lake["model_id"] and r["round"] == 1
        assert r["source_corpus"] == "tatoeba"
        params = json.loads(r["params"])
        if s["method"] == "sampling":
            assert params == {"topk": 10, "temperature": 1.0, "seed": s.get("seed", 1)}
        elif s["method"] == "beam":
            assert params == {"beam_size": 4, "length_penalty": 1.0}
    second = rows(lake, "synthetic", "bt2") + rows(lake, "synthetic_rejected", "bt2")
    assert len(second) == 80 and {r["round"] for r in second} == {2}
    assert {r["stream"] for r in second} == {"forward-beam"}
    assert len(rows(lake, "synthetic", "bt1")) > 0  # the second run added, did not replace
    runs = {r[0]: (r[1], r[2]) for r in lake["rows"]["runs"]}
    assert runs["bt1"] == runs["bt2"] == ("translate", "succeeded")


def test_reject_reasons_match_the_limits(lake: dict) -> None:
    for r in rows(lake, "synthetic"):
        assert r["src_tokens"] <= MAX_IN and 0 < r["tgt_tokens"] < MAX_OUT
        assert r["tgt"] and r["score"] < 0  # a log-probability
    reasons = Counter()
    for r in rows(lake, "synthetic_rejected"):
        reasons[r["reject_reason"]] += 1
        if r["reject_reason"] == "input_too_long":
            assert r["src_tokens"] > MAX_IN and r["hypothesis"] is None
        else:
            assert r["reject_reason"] in ("output_truncated", "empty_output")
            assert r["tgt"] is None and r["hypothesis"] is not None
    assert reasons["input_too_long"] > 0  # long Tatoeba lines over 24 pieces


def test_beam_output_is_deterministic(lake: dict) -> None:
    synth = by_stream(lake)
    both = set(synth["ft-beam"]) & set(synth["ft-beam-again"])
    assert len(both) == len(synth["ft-beam"]) > 30
    for sid in both:
        a, b = synth["ft-beam"][sid], synth["ft-beam-again"][sid]
        assert (a["tgt"], a["score"]) == (b["tgt"], b["score"])


def test_generic_tokenizer_decodes_like_the_exported_pipeline(lake: dict) -> None:
    synth = by_stream(lake)
    assert synth["ft-greedy"].keys() == synth["ft-greedy-spm"].keys()
    for sid, r in synth["ft-greedy"].items():
        assert r["tgt"] == synth["ft-greedy-spm"][sid]["tgt"]


def test_sampling_is_diverse(lake: dict) -> None:
    synth = by_stream(lake)
    one, two, beam = synth["bt-sampling"], synth["bt-sampling-seed2"], synth["bt-noised"]
    shared = set(one) & set(two)
    assert len(shared) > 60
    assert sum(one[i]["tgt"] != two[i]["tgt"] for i in shared) > 0.5 * len(shared)
    with_beam = set(one) & set(beam)
    assert sum(one[i]["tgt"] != beam[i]["hypothesis"] for i in with_beam) > 0.5 * len(with_beam)
    assert len({r["tgt"] for r in one.values()}) > 0.8 * len(one)


def test_the_same_seed_samples_the_same_output(lake: dict) -> None:
    """Same rows, same seed, decoded in other tasks after other streams' draws."""
    synth = by_stream(lake)
    one, again = synth["bt-sampling"], synth["bt-sampling-again"]
    assert one.keys() == again.keys() and len(one) > 60
    assert all((one[i]["tgt"], one[i]["score"]) == (again[i]["tgt"], again[i]["score"])
               for i in one)


def test_noised_beam_changes_the_output_words(lake: dict) -> None:
    noised = list(by_stream(lake)["bt-noised"].values())
    changed = [r for r in noised if r["tgt"] != r["hypothesis"]]
    assert 0.1 * len(noised) < len(changed) < len(noised)
    assert any("<blank>" in r["tgt"] for r in changed)


def test_synthetic_pairs_feed_back_through_the_filter(lake: dict) -> None:
    n_synthetic = len(by_stream(lake)["bt-sampling"])
    rows_in, rejected = (int(x) for x in lake["rows"]["fb_stats"][0])
    assert rows_in == n_synthetic
    clean = lake["rows"]["fb_clean"]
    assert len(clean) == rows_in - rejected
    extra = json.loads(clean[0][2][0])  # provenance travels in `extra`
    assert extra["method"] == "sampling" and extra["model"] == lake["model_id"]
    assert "committed run fb1" in lake["feedback"]


def test_the_target_tag_picks_the_output_language(lake: dict) -> None:
    """One multilingual model for both directions: <2en> gives English, <2zh> Chinese."""
    def han_share(texts: list[str]) -> float:
        chars = "".join(texts)
        return sum("\u4e00" <= c <= "\u9fff" for c in chars) / max(1, len(chars))

    synth = by_stream(lake)
    english = [r["hypothesis"] for r in synth["ft-beam"].values()]
    chinese = [r["hypothesis"] for r in synth["bt-noised"].values()]
    assert han_share(english) < 0.05 and han_share(chinese) > 0.5


# -- The same run on a real standalone cluster (pyspark's sbin scripts, loopback only) -------
# Here rather than in test_cluster.py: it is compared with this module's local run bt2, whose
# lake is built once per worker process.
EXECUTORS = ("--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
             "--executor-memory", "1g", "--conf", "spark.sql.shuffle.partitions=5",
             "--conf", f"spark.executor.extraJavaOptions={JIT_OPTS}")


@pytest.fixture(scope="module")
def cluster(standalone):
    return standalone  # the session's cluster (conftest.py), shared with test_cluster.py


def test_translate_on_a_standalone_cluster_with_archives(cluster, tmp_path, lake: dict,
                                                        tiny_multi_ct2: Path):
    """translate_lake's local[2] run bt2 (from flags: zh-en beam, 80 rows of its mono_clean),
    run again on the cluster, into the same lake, as run cluster-bt."""
    root = lake["lake"]
    archive = tmp_path / "model.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tiny_multi_ct2, arcname=".")
    # The documented cluster form: the model shipped as an archive, named by its alias. The
    # driver runs elsewhere (another working directory) to prove nothing is found by accident.
    elsewhere = tmp_path / "driver"
    elsewhere.mkdir()
    done = submit_to(cluster.url, "translate", "--model", "tiny-ct2", *BT_FLAGS_STREAM, "--lake",
                     str(root), "--run-id", "cluster-bt",
                     spark_args=(*EXECUTORS, "--archives", f"{archive}#tiny-ct2"), cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-4000:]

    cols = "source_row_id, src, tgt, hypothesis, score, model"
    rows = read_lake(root, {
        "record": "SELECT spark, status FROM sluice.runs WHERE run_id = 'cluster-bt'",
        **{r: f"SELECT {cols} FROM sluice.synthetic WHERE run_id = '{r}' ORDER BY source_row_id"
           for r in ("bt2", "cluster-bt")}})
    ((spark, status),) = rows["record"]
    assert status == "succeeded" and json.loads(spark)["master"] == cluster.url
    assert len(rows["bt2"]) > 40
    assert rows["cluster-bt"] == rows["bt2"]
