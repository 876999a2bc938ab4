"""One SparkSession for the whole test run (a session start costs ~10 s), and what several
test modules share: trained models, and job runs that are the same input and config."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import integration_helpers
import pytest
from integration_helpers import JIT_OPTS

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Spark's settings as the Makefile and `sluice` give them (conf/spark-defaults.conf, logging).
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent.parent / "conf"))
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every JVM of the tests (this session's, and every spark-submit, spark-sql and query_lake.py
# it starts) lives seconds to minutes: compiling with C1 only, not C2 too, halves the CPU each
# one uses (a spark-submit of the filter job on the Tatoeba slice: 110 -> 55-60 CPU-seconds;
# a query_lake.py: 40 -> 23; test_determinism.py: 163 -> 108), on a test machine of 2 cores.
# Results do not change (Java floating point is strict). A SPARK_SUBMIT_OPTS given is kept.
if "TieredStopAtLevel" not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        [os.environ.get("SPARK_SUBMIT_OPTS", ""), JIT_OPTS]).strip()


# The slowest modules first (worker-seconds in CI's --durations, most first): pytest-xdist
# hands modules to its workers in collection order (--dist loadfile), so the long ones start
# at once and the many short ones fill in at the end instead of one worker finishing alone.
SLOW_FIRST = ("test_shared_metastore.py", "test_translate_job.py", "test_readme_commands.py",
              "test_recipe_run.py",
              "test_cluster.py", "test_gpu_scheduling.py", "test_refresh_job.py",
              "test_redecide.py", "test_refresh_property.py", "test_lake_readers.py",
              "test_select_job.py", "test_bad_input.py", "test_languages.py",
              "test_warm_driver.py", "test_pair_score.py", "test_recipes.py", "test_mix_job.py",
              "test_filter_job.py", "test_schedule_examples.py", "test_report.py",
              # then the fast tier's slowest, so that neither of its workers ends alone
              "test_lake_commit.py", "test_embed.py", "test_align.py", "test_mix_units.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: others as found


# Modules that share a session fixture below: each worker process builds its own, so they run
# as one work unit, on one worker, and it is built once a run (not once per worker that gets
# one of them). The unit takes the place of its first module in the order above.
SHARE_A_WORKER = (
    ("test_translate_job.py", "test_cluster.py", "test_determinism.py",
     "test_gpu_scheduling.py", "test_report_runs.py", "test_translate_edges.py",
     "test_translate_units.py"),  # standalone; scored_tatoeba; tiny_multi_ct2, marian_ct2
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile with the modules of SHARE_A_WORKER as one unit, handed out in collection
    order: xdist's default re-sorts units by their number of tests (most first), which put the
    slowest modules, of a few tests each, last."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    unit_of = {name: group[0] for group in SHARE_A_WORKER for name in group}

    class SharedUnits(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            folder, _, name = path.rpartition("/")
            return f"{folder}/{unit_of[name]}" if name in unit_of else path

    config.option.loadscopereorder = False
    return SharedUnits(config, log)


# The fast tier starts no job: a test not marked `integration` that runs spark-submit,
# spark-sql, a job's entry script or `sluice JOB` (not `query`, not `--help`) fails, naming the
# command, instead of slowing `make test-fast` unnoticed. The session's own SparkSession
# (pyspark-shell) is the exception.
SLUICE_JOBS = "|".join(["filter", "select", "refresh", "translate", "mix", "report",
                        "train-pair-score", "align-reference", "lake-gc", "sql"])
STARTS_A_JOB = re.compile(r"(spark-submit|spark-sql|/jobs/\w+\.py|-m jobs\.\w+"
                          rf"|/sluice\s(\S+\s)*({SLUICE_JOBS}))(\s|$)")


def starts_a_job(args: str | list) -> bool:
    """Whether a Popen of `args` starts a Spark job: a shell line is read whole; an argv by
    its program (spark-submit, spark-sql, sluice, or python running a job)."""
    if isinstance(args, str):
        line = args
    else:
        argv = [str(a) for a in args]
        program = Path(argv[0]).name if argv else ""
        if program.startswith("python"):
            line = " ".join(argv[:3])
        elif program in ("spark-submit", "spark-sql", "sluice"):
            line = " ".join(argv)
        else:
            return False  # bash running a script, git, ...: not a job by itself
    if "pyspark-shell" in line or re.search(r"\s(--help|-h)(\s|$)", line):
        return False
    return bool(STARTS_A_JOB.search(line + " "))


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_job(request: pytest.FixtureRequest, monkeypatch) -> None:
    if request.node.get_closest_marker("integration"):
        return
    popen_init = subprocess.Popen.__init__

    def guarded(self, args, *more, **kw):
        if starts_a_job(args):
            shown = args if isinstance(args, str) else " ".join(map(str, args))
            raise AssertionError(f"a fast-tier test starts a job: {shown[:200]} "
                                 "(mark it pytest.mark.integration)")
        popen_init(self, args, *more, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)

    def warm_job(script: str, argv: list[str], *more, **kw):  # integration_helpers.spark_submit
        raise AssertionError(f"a fast-tier test starts a job: {script} {' '.join(argv)[:160]} "
                             "(mark it pytest.mark.integration)")

    monkeypatch.setattr(integration_helpers.WARM, "submit", warm_job)


# Worker-seconds a module took (setup, call and teardown of its tests), and the CPU-seconds its
# worker process and everything it started spent meanwhile, printed at the end of a run, most
# first: where the suite's time goes (issue 37), and the order SLOW_FIRST wants. On the 2-core
# CI machine both cores are busy throughout, so CPU-seconds are what a change must cut.
MODULE_SECONDS: dict[str, float] = {}
MODULE_CPU: dict[str, float] = {}
CPU_AT_SETUP = pytest.StashKey[float]()
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds(root: int) -> float:
    """CPU-seconds of `root` and its living descendants, each with the children it has
    reaped (Linux /proc): a job that ended is in its parent's count, one that runs in its
    own. A daemon that left the tree (the metastore's PostgreSQL) is not counted."""
    parent_of: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while listed
            continue
        pid = int(stat.parent.name)
        parent_of[pid] = int(fields[1])
        ticks[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    total = 0
    for pid in ticks:
        up = pid
        while up not in (root, 0, 1) and up in parent_of:
            up = parent_of[up]
        if up == root:
            total += ticks[pid]
    return total / CLOCK_TICKS


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[CPU_AT_SETUP] = tree_cpu_seconds(os.getpid())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """The teardown's report carries the test's CPU-seconds to the controller (xdist sends a
    report's user_properties along)."""
    outcome = yield
    if call.when == "teardown" and CPU_AT_SETUP in item.stash:
        # Never below 0: a child that left the tree unreaped (a daemon) takes its count along.
        spent = max(0.0, tree_cpu_seconds(os.getpid()) - item.stash[CPU_AT_SETUP])
        outcome.get_result().user_properties.append(("cpu_seconds", spent))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    MODULE_SECONDS[module] = MODULE_SECONDS.get(module, 0.0) + report.duration
    for name, value in report.user_properties:
        if name == "cpu_seconds":
            MODULE_CPU[module] = MODULE_CPU.get(module, 0.0) + value


def pytest_terminal_summary(terminalreporter) -> None:
    if not MODULE_SECONDS or hasattr(terminalreporter.config, "workerinput"):
        return
    total = sum(MODULE_SECONDS.values())
    terminalreporter.section(f"worker-seconds by module ({total:,.0f} in all; "
                             f"CPU-seconds {sum(MODULE_CPU.values()):,.0f})")
    for module, seconds in sorted(MODULE_SECONDS.items(), key=lambda kv: -kv[1]):
        if seconds >= 1:
            terminalreporter.write_line(
                f"{seconds:8.1f}  {MODULE_CPU.get(module, 0.0):8.1f} CPU  {module}")


# Workers of the session's standalone cluster offer one GPU each, from a discovery script
# that names one (there is no GPU): test_gpu_scheduling.py's jobs ask for them, the other
# cluster tests' jobs ask for none and get none.
FAKE_GPUS = '#!/usr/bin/env bash\necho \'{"name":"gpu","addresses":["0"]}\'\n'


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    """One standalone cluster for the session's cluster tests (test_cluster.py,
    test_gpu_scheduling.py, test_translate_job.py: one work unit, so one worker process starts
    it once): two workers of one core, each offering a fake GPU (`gpu_script` is its discovery
    script; an application that asks for no GPU gets none)."""
    from integration_helpers import spark_env
    from standalone_cluster import standalone_cluster

    root = tmp_path_factory.mktemp("standalone")
    script = root / "fake_gpus.sh"
    script.write_text(FAKE_GPUS)
    script.chmod(0o755)
    env = dict(spark_env(), SPARK_WORKER_OPTS="-Dspark.worker.resource.gpu.amount=1 "
               f"-Dspark.worker.resource.gpu.discoveryScript={script}")
    with standalone_cluster(root / "cluster", env) as running:
        running.gpu_script = script
        yield running


@pytest.fixture(scope="session")
def lake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake")


@pytest.fixture(scope="session")
def spark(lake_root: Path):
    from jobs.lake.session import build_session

    session = build_session(
        "sluice-tests",
        str(lake_root),
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def anki_pool() -> list[str]:
    """60 real Anki zh-en pairs (TSV lines): files drawn from them repeat each other often."""
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        pairs = ["\t".join(line.rstrip("\n").split("\t")[:2]) for line in f]
    return pairs[1000:1060]


SCORED_DB = "determinism"


@pytest.fixture(scope="session")
def scored_config(lake_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The filter job on the 1,500 real zh-en Tatoeba pairs with both pair scorers (the
    aligner trained on a sample of 500 clean pairs; embeddings with margin k=4), into a
    database of its own in the test session's lake."""
    config = tmp_path_factory.mktemp("scored") / "job.yaml"
    paths = f"[{DATA / 'tatoeba-zh-en.zh'}, {DATA / 'tatoeba-zh-en.en'}]"
    config.write_text(
        f"extends: {REPO / 'conf/zh-en.yaml'}\n"
        f"lake: {{root: {lake_root / SCORED_DB}, database: {SCORED_DB}}}\n"
        f"inputs:\n  - {{corpus: tatoeba, paths: {paths}}}\n"
        "align: {enabled: true, sample_pairs: 500, min_train_pairs: 500}\n"
        "embedding: {enabled: true, margin_k: 4}\n"
    )
    return config


@pytest.fixture(scope="session")
def scored_tatoeba(spark, lake_root: Path, scored_config: Path) -> dict:
    """`scored_config` run by `jobs.filtering.job.main` in this session's JVM (local[2]) as det-1:
    test_determinism.py's first run, and the local[2] reference that test_cluster.py's
    cluster run of the same config must equal."""
    from jobs.filtering.job import main

    assert main(["--config", str(scored_config), "--run-id", "det-1"]) == 0
    return {"config": scored_config, "lake": lake_root / SCORED_DB, "database": SCORED_DB,
            "run_id": "det-1"}


@pytest.fixture(scope="session")
def translate_lake(tmp_path_factory: pytest.TempPathFactory, data_dir: Path,
                   request: pytest.FixtureRequest) -> dict:
    """test_translate_job.py's lake (integration_helpers.build_translate_lake), read once;
    test_cluster.py decodes on the cluster what its run bt2 decoded locally, into it."""
    from integration_helpers import build_translate_lake

    return build_translate_lake(tmp_path_factory.mktemp("bt"), data_dir,
                                lambda: request.getfixturevalue("tiny_multi_ct2"))


@pytest.fixture(scope="session")
def tiny_multi_ct2(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
                   ) -> Path:
    """conf/train/tiny-multi-zh-en.yaml (zh->en and en->zh, <2xx> tags) trained for 300 steps
    on the test slice (~20 s of one worker) and exported to CTranslate2: poor translations,
    but real ones. Kept in pytest's cache under a hash of all that makes it (the config, its
    data, training/'s code, torch's, ctranslate2's and sentencepiece's versions), so the
    edit-test loop trains it again only when one of those changed; a clean clone trains it."""
    import shutil
    from importlib.metadata import version

    from training.config import load_config
    from training.export import export
    from training.train import run

    made_of = [REPO / "conf/train/tiny-multi-zh-en.yaml", *sorted((REPO / "training").glob("*.py"))]
    cfg = load_config(made_of[0], [])
    made_of += sorted({REPO / path for source in [*cfg.data.train, cfg.data.dev]
                       for path in source.paths})
    digest = hashlib.sha256(" ".join(version(package) for package in (
        "torch", "ctranslate2", "sentencepiece")).encode())
    for path in made_of:
        digest.update(path.read_bytes())
    cached = request.config.cache.mkdir(f"tiny-multi-ct2-{digest.hexdigest()[:16]}") / "ct2"
    if (cached / "model.bin").exists():
        return cached
    root = tmp_path_factory.mktemp("tiny-multi")
    cfg = load_config(made_of[0], [f"run_dir={root / 'run'}"])
    for source in [*cfg.data.train, cfg.data.dev]:
        source.paths = [str(REPO / p) for p in source.paths]
    run(cfg)
    (checkpoint,) = sorted((root / "run" / "checkpoints").glob("ckpt_*.pt"))
    made = export(checkpoint, root / "ct2")
    staged = cached.with_name(f"ct2.{os.getpid()}")  # whole or not there: a rename
    shutil.copytree(made, staged)
    try:
        staged.rename(cached)
    except OSError:  # another run of the suite put it there first: the same model
        shutil.rmtree(staged)
    return cached


@pytest.fixture(scope="session")
def marian_ct2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A third-party model as users bring them: a Hugging Face MarianMT (the OPUS-MT
    architecture: separate source.spm/target.spm, vocab.json with <pad> last, no tokenizer
    metadata CTranslate2 knows of) with random weights, converted by CTranslate2's own
    TransformersConverter. It decodes nonsense, but through the real third-party path."""
    import json
    import shutil

    import ctranslate2
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    root = tmp_path_factory.mktemp("marian")
    pairs = (DATA / "train_anki_cmn.tsv").read_text(encoding="utf-8").splitlines()
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(p.split("\t")[0] for p in pairs), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(root / "sp"), vocab_size=1000, pad_id=-1,
        bos_id=-1, eos_id=1, unk_id=2, minloglevel=2,
    )
    hf = root / "hf"
    hf.mkdir()
    for side in ("source", "target"):
        shutil.copy(root / "sp.model", hf / f"{side}.spm")
    pieces = spm.SentencePieceProcessor(model_file=str(root / "sp.model"))
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(pieces.get_piece_size()):
        vocab.setdefault(pieces.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)  # Marian's convention: CTranslate2 drops a last <pad>
    (hf / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    files = [str(hf / name) for name in ("source.spm", "target.spm", "vocab.json")]
    MarianTokenizer(*files).save_pretrained(hf)
    n, pad = len(vocab), vocab["<pad>"]
    config = MarianConfig(
        vocab_size=n, decoder_vocab_size=n, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad,
    )
    MarianMTModel(config).save_pretrained(hf)
    out = root / "ct2"
    ctranslate2.converters.TransformersConverter(str(hf)).convert(str(out))
    for side in ("source", "target"):  # OPUS-MT directories carry their tokenizers
        shutil.copy(hf / f"{side}.spm", out / f"{side}.spm")
    return out
