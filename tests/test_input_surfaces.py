"""Input surfaces (issue 22, part 3): symlinks in input and source directories are skipped
(unless `ingest.follow_symlinks`), names that become paths stay inside their store, the
database name cannot reach into SQL, corpus names fit a directory name, a corrupt manifest
file and a missing input path are one line, and `--format table` reads a view."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from integration_helpers import spark_submit
from test_bad_input import one_error_line

from jobs.filtering.config import load_config
from jobs.kit import ingest
from jobs.kit.config import InputConf
from jobs.kit.errors import ConfigError, InputError
from jobs.kit.ingest import read_input
from jobs.refreshing import manifest as refresh_manifest
from jobs.refreshing.config import SourceConf, load_refresh_config
from jobs.refreshing.manifest import (
    MANIFEST_SCHEMA,
    hadoop_files,
    list_sources,
    local_files,
    read_manifest,
    read_manifest_files,
)
from jobs.selection.config import load_select_config

PAIRS = [("你好。", "Hello."), ("谢谢。", "Thank you."), ("再见。", "Goodbye.")]
SECRET = "root:x:0:0:root\t/root:/bin/bash\n"  # what a link to /etc/passwd would read


def tsv(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"{zh}\t{en}\n" for zh, en in pairs)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """An input directory with one real file, a symlink to a file outside it and a symlinked
    directory (both holding 'secret' lines), as someone with write access could plant."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET)
    (outside / "more.tsv").write_text(SECRET)
    crawl = tmp_path / "incoming" / "crawl"
    crawl.mkdir(parents=True)
    (crawl / "real.tsv").write_text(tsv(PAIRS))
    (crawl / "p.tsv").symlink_to(outside / "passwd")
    (crawl / "linked").symlink_to(outside, target_is_directory=True)
    return crawl


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What jobs/kit/progress.py `log` is given by the listings."""
    lines: list[str] = []
    monkeypatch.setattr(ingest, "log", lines.append, raising=False)
    monkeypatch.setattr(refresh_manifest, "log", lines.append)
    return lines


# -- 1. symlinks -------------------------------------------------------------------------------
def test_symlinks_in_an_input_directory_or_glob_are_skipped_with_a_warning(
    spark, planted: Path, said: list[str]
) -> None:
    """Were read: `ln -s /etc/passwd incoming/zh-en/crawl/p.tsv` landed passwd in bitext_raw."""
    for path in (str(planted), f"{planted}/*.tsv"):
        said.clear()
        rows = read_input(spark, InputConf(corpus="crawl", paths=[path]), "zh-en", 100_000)
        got = rows.orderBy("line").collect()
        assert [(r.src, r.tgt) for r in got] == PAIRS, path
        assert {Path(r.file).name for r in got} == {"real.tsv"}, path
        assert any(f"{planted / 'p.tsv'} is a symbolic link: skipped" in s for s in said), said
        linked = any(f"{planted / 'linked'} is a symbolic link" in s for s in said)
        assert linked == (path == str(planted)), said  # the glob does not match it


def test_follow_symlinks_reads_them_and_a_named_link_is_read(
    spark, planted: Path, said: list[str]
) -> None:
    """`ingest.follow_symlinks: true` reads where links point; a path the user names (no
    glob) is read even if it is a link: they chose it."""
    rows = read_input(spark, InputConf(corpus="crawl", paths=[str(planted)]), "zh-en", 100_000,
                      follow_symlinks=True)
    assert "root:x:0:0:root" in {r.src for r in rows.collect()}
    named = read_input(spark, InputConf(corpus="crawl", paths=[str(planted / "p.tsv")]),
                       "zh-en", 100_000)
    assert [r.src for r in named.collect()] == ["root:x:0:0:root"]
    assert not said
    assert load_config(None, [], {"pair": "zh-en"}).ingest.follow_symlinks is False


def test_refresh_listings_skip_symlinks_alike(spark, planted: Path, said: list[str]) -> None:
    """Hadoop's local file system lists a link as its target (FileStatus.isSymlink() false):
    both listings (Hadoop's, and the quick local one) must skip the link and the linked
    directory all the same."""
    for path in (str(planted), f"{planted}/*"):
        source = SourceConf(corpus="crawl", path=path)
        hadoop, local = hadoop_files(spark, source), local_files(source)
        assert hadoop == local, path
        assert [Path(p).name for p in hadoop] == ["real.tsv"], path
    assert sum("is a symbolic link: skipped" in s for s in said) == 8, said
    source = SourceConf(corpus="crawl", path=str(planted))
    both = hadoop_files(spark, source, True)
    assert both == local_files(source, True)
    assert sorted(Path(p).name for p in both) == ["more.tsv", "p.tsv", "passwd", "real.tsv"]
    cfg = load_refresh_config(None, [], {"pair": "zh-en", "sources": [
        {"corpus": "crawl", "path": str(planted)}], "ingest": {"follow_symlinks": True}})
    assert len(list_sources(None, cfg) or []) == 4


# -- 2. names that become paths ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../../../x", "a/b", "..", ".hidden"])
def test_model_names_cannot_leave_the_model_store(name: str, tmp_path: Path, capsys) -> None:
    """`train_pair_score.py --name ../../../../x` wrote outside the model store."""
    from jobs.scorer_training.pair_score import main

    lake = tmp_path / "lake"
    assert main(["--config", "conf/zh-en.yaml", "--name", name, "--lake", str(lake)]) == 2
    assert not lake.exists()  # refused before the lake is opened
    err = capsys.readouterr().err
    assert err.startswith(f"sluice: error: --name {name!r}: use up to 128 letters") and \
        err.count("\n") == 1, err
    for key in ("pair_score.model", "align.reference"):
        with pytest.raises(ConfigError, match=f"{key}: Value error, {key} "):
            load_config("conf/zh-en.yaml", [f"{key}={name}"])
    for key in ("models.name", "models.reuse"):
        with pytest.raises(ConfigError, match=f"{key}: Value error, {key} "):
            load_select_config("conf/select-zh-en.yaml", [f"{key}={name}"])


# -- 3. the database name ----------------------------------------------------------------------
@pytest.mark.integration  # a real spark-submit
def test_a_database_name_is_an_identifier(tmp_path: Path) -> None:
    """`--set "lake.database=x\\` LOCATION '<dir>/evildb' --"` created a directory."""
    evil = f"x` LOCATION '{tmp_path}/evildb' --"
    lake = tmp_path / "lake"
    done = spark_submit("--pair", "zh-en", "--corpus", "c", "--input", str(tmp_path),
                        "--lake", str(lake), "--set", f"lake.database={evil}")
    line = one_error_line(done)
    assert line.startswith("sluice: error: invalid config: lake.database: "), line
    assert not (tmp_path / "evildb").exists() and not lake.exists()
    for ok in ("sluice", "prop_1", "_x", "Determinism"):
        assert load_config(None, [f"lake.database={ok}"]).lake.database == ok
    for bad in ("1x", "a.b", "a-b", "x" * 129, ""):
        with pytest.raises(ConfigError, match="lake.database"):
            load_config(None, [f"lake.database={bad}"])


# -- 4. corpus names over the file-name limit --------------------------------------------------
def test_a_corpus_name_longer_than_a_directory_name_is_refused(spark, tmp_path: Path) -> None:
    """85 Chinese characters made `corpus=...` 262 bytes: a 377-line Java trace at the write.
    The longest accepted name is written by Spark fine."""
    for name in ("新" * 85, "#" * 83):  # '#' is escaped as %23: 3 bytes each
        with pytest.raises(ConfigError, match="corpus name .* too long: .* (262|256) bytes"):
            load_config(None, [], {"pair": "zh-en", "inputs": [{"corpus": name, "paths": ["x"]}]})
        with pytest.raises(ConfigError, match="too long"):
            load_refresh_config(None, [], {"pair": "zh-en",
                                           "sources": [{"corpus": name, "path": "x"}]})
    longest = "新" * 82  # corpus= + 246 bytes = 253
    cfg = load_config(None, [], {"pair": "zh-en", "inputs": [{"corpus": longest, "paths": ["x"]}]})
    df = spark.createDataFrame([(1, cfg.inputs[0].corpus)], "n int, corpus string")
    df.write.partitionBy("corpus").parquet(str(tmp_path / "t"))
    assert spark.read.parquet(str(tmp_path / "t")).first().corpus == longest


# -- 6. a corrupt input_files manifest -----------------------------------------------------------
def test_a_corrupt_manifest_file_is_one_line_naming_it(spark, tmp_path: Path, capsys) -> None:
    """A garbage .parquet file in the manifest raised pyarrow's ArrowInvalid (a traceback) in
    every refresh's quick check; Spark's read of it (a refresh --full) is one line too."""
    from jobs.refreshing.job import main

    part = tmp_path / "lake" / "tables" / "input_files" / "key=zh-en"
    part.mkdir(parents=True)
    bad = part / "part-00000.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match=f"^{bad}: not a readable input_files manifest file"):
        read_manifest_files(str(part))
    (tmp_path / "src").mkdir()
    config = tmp_path / "refresh.yaml"
    config.write_text(f"pair: zh-en\nsources: [{{corpus: c, path: {tmp_path / 'src'}}}]\n")
    assert main(["--config", str(config), "--lake", str(tmp_path / "lake")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sluice: error: {bad}: not a readable") and err.count("\n") == 1, err
    spark.sql(f"CREATE DATABASE IF NOT EXISTS surfaces_m LOCATION '{tmp_path / 'db'}'")
    spark.sql(f"CREATE TABLE surfaces_m.input_files ({MANIFEST_SCHEMA}) USING parquet "
              f"PARTITIONED BY (key) LOCATION '{part.parent}'")
    spark.sql("ALTER TABLE surfaces_m.input_files ADD PARTITION (key = 'zh-en')")
    with pytest.raises(InputError, match=f"^the input_files manifest: {bad}: cannot be read"):
        read_manifest(spark, "surfaces_m", "zh-en")


# -- 7. a missing input path -------------------------------------------------------------------
@pytest.mark.integration  # a real spark-submit
def test_a_missing_input_path_is_said_before_spark_reads(spark, tmp_path: Path) -> None:
    """Was a 98-line WARN trace (Spark's metadata-directory probe), then the error."""
    missing = tmp_path / "nope.tsv"
    for inp in (InputConf(corpus="c", paths=[str(missing)]),
                InputConf(corpus="c", paths=[f"{tmp_path}/*.nope"]),
                InputConf(corpus="c", paths=[str(missing), str(missing)], format="moses"),
                InputConf(corpus="c", paths=[str(tmp_path / "x.parquet")])):
        with pytest.raises(InputError, match=" no such file or directory$"):
            read_input(spark, inp, "zh-en", 100_000)
    # One rule for relative paths (README "Jobs and flags"): the job's working directory.
    relative = InputConf(corpus="c", paths=["no/such/dir/c.tsv"])
    with pytest.raises(InputError, match=re.escape(
            f"no/such/dir/c.tsv: no such file or directory (a relative path is read from the "
            f"working directory, {os.getcwd()})")):
        read_input(spark, relative, "zh-en", 100_000)
    done = spark_submit("--pair", "zh-en", "--corpus", "c", "--input", str(missing),
                        "--lake", str(tmp_path / "lake"))
    assert one_error_line(done) == f"sluice: error: {missing}: no such file or directory"
    assert "FileNotFoundException" not in done.stdout + done.stderr


# -- 8. --format table on a view -----------------------------------------------------------------
def test_format_table_reads_a_view(spark, tmp_path: Path) -> None:
    """A view has no `_metadata`: was UNRESOLVED_COLUMN _metadata.file_path. Its rows get the
    view's name as file and their place in an order of their content as line: the same in
    every run, whatever order Spark reads them in."""
    db = "surfaces"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION '{tmp_path / 'db'}'")
    rows = [(zh, en, f"r{i % 2}") for i, (zh, en) in enumerate(PAIRS * 2)]
    spark.createDataFrame(rows, "src string, tgt string, run_id string").repartition(3) \
        .write.mode("overwrite").saveAsTable(f"{db}.pairs")
    spark.sql(f"CREATE OR REPLACE VIEW {db}.pairs_view AS SELECT * FROM {db}.pairs "
              "WHERE src <> '再见。'")
    inp = InputConf(corpus="v", paths=[f"{db}.pairs_view"], format="table",
                    where="run_id = 'r0'")
    got = read_input(spark, inp, "zh-en", 100_000).orderBy("line").collect()
    assert [(r.file, r.line) for r in got] == [(f"{db}.pairs_view", n) for n in (1, 2)]
    assert sorted(r.src for r in got) == ["你好。", "谢谢。"]
    assert all(r.extra == ['{"run_id":"r0"}'] for r in got)
    again = read_input(spark, inp, "zh-en", 100_000).orderBy("line").collect()
    assert [(r.row_id, r.src) for r in again] == [(r.row_id, r.src) for r in got]
    table = read_input(spark, InputConf(corpus="t", paths=[f"{db}.pairs"], format="table"),
                       "zh-en", 100_000).collect()
    assert all(r.file.endswith(".parquet") for r in table) and len(table) == 6
    assert os.path.isdir(tmp_path / "db")


# -- 9. monolingual text out of a bitext side (HW-TSC WMT21: mono from the bitext's target) ------
def test_a_monolingual_run_reads_one_side_of_a_bitext_table(spark, tmp_path: Path) -> None:
    db = "surfaces_side"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION '{tmp_path / 'db'}'")
    rows = [(zh, en, "zh-en", 0.9, i) for i, (zh, en) in enumerate(PAIRS)]
    spark.createDataFrame(rows, "src string, tgt string, pair string, embed_cosine double, "
                          "row_id long").write.mode("overwrite").saveAsTable(f"{db}.clean")
    inp = InputConf(corpus="zh-side", paths=[f"{db}.clean"], format="table", side="src",
                    where="pair = 'zh-en'")
    got = read_input(spark, inp, "zh", 100_000, mono=True).collect()
    assert sorted(r.src for r in got) == sorted(zh for zh, _ in PAIRS)
    assert all(r.tgt is None for r in got)
    # Where each line came from stays with it; the other side and the scores do not.
    assert all('"pair":"zh-en"' in r.extra[0] and "embed_cosine" not in r.extra[0]
               and "tgt" not in r.extra[0] for r in got)
    with pytest.raises(InputError, match="`side: src` reads monolingual text out of bitext"):
        read_input(spark, inp, "zh-en", 100_000)
    with pytest.raises(ValueError, match="`side` reads one column of a table or Parquet"):
        InputConf(corpus="c", paths=["a.tsv"], side="tgt")
