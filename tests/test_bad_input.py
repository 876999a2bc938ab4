"""Bad input and bad flags (issue 11): every line end splits a line, corrupt gzip and UTF-16/32
files are one clear line before anything is written, unknown languages, odd names and invalid
`--set` YAML are config errors, and a busy embedded metastore is said at once."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from pathlib import Path

import pytest
from integration_helpers import REPO, spark_env, spark_submit

from jobs.filtering.config import load_config
from jobs.kit.config import InputConf, parse_override
from jobs.kit.errors import ConfigError, InputError
from jobs.kit.ingest import read_input, text_problem
from jobs.lake.session import check_metastore_free

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier


def tatoeba_pairs(data_dir: Path, n: int) -> list[tuple[str, str]]:
    zh = (data_dir / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()
    en = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
    return list(zip(zh, en, strict=True))[:n]


def tsv(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"{zh}\t{en}\n" for zh, en in pairs)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The job's only error line (spark-submit passes the driver's stderr on to stdout), after
    asserting exit code 2 and that no traceback or Spark task failure was printed."""
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    errors = [line for line in said.splitlines() if line.startswith("sluice: error: ")]
    assert len(errors) == 1, said[-3000:]
    for noise in ("Traceback", "Exception in task", "\tat org.apache", "Lost task"):
        assert noise not in said, said[-3000:]
    return errors[0]


def nothing_written(lake: Path) -> bool:
    return not (lake / "runs").exists() and not list(lake.rglob("*.parquet"))


# -- 1. line ends --------------------------------------------------------------------------
@pytest.mark.parametrize("end", ["\r", "\r\n", "\n", "mixed"])
def test_every_line_end_splits_lines_alike(spark, tmp_path: Path, data_dir: Path, end: str) -> None:
    """A file with bare-CR line ends was one pair with 49 glued into `extra`. Small splits make
    lines (and a CRLF) cross block boundaries; a gzip file is one block."""
    pairs = tatoeba_pairs(data_dir, 50)
    ends = ["\r", "\r\n", "\n"] if end == "mixed" else [end]
    text = "".join(f"{zh}\t{en}{ends[i % len(ends)]}" for i, (zh, en) in enumerate(pairs))
    zh_side = "".join(f"{zh}{ends[i % len(ends)]}" for i, (zh, _) in enumerate(pairs))
    (tmp_path / "p.tsv").write_bytes(text.encode())
    (tmp_path / "p.tsv.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "m.zh").write_bytes(zh_side.encode())
    (tmp_path / "m.en").write_text("".join(f"{en}\n" for _, en in pairs), encoding="utf-8")
    inputs = [
        (InputConf(corpus="t", paths=[str(tmp_path / "p.tsv")]), False),
        (InputConf(corpus="g", paths=[str(tmp_path / "p.tsv.gz")]), False),
        (InputConf(corpus="m", paths=[str(tmp_path / "m.zh"), str(tmp_path / "m.en")]), False),
        (InputConf(corpus="x", paths=[str(tmp_path / "m.zh")], format="text"), True),
    ]
    spark.conf.set("spark.sql.files.maxPartitionBytes", "700")
    try:
        for inp, mono in inputs:
            rows = read_input(spark, inp, "zh" if mono else "zh-en", 100_000, mono)
            got = rows.orderBy("line").collect()
            assert [r.line for r in got] == list(range(1, 51)), inp.corpus
            assert [r.src for r in got] == [zh for zh, _ in pairs], inp.corpus
            if not mono:  # Moses sides stay aligned, TSV keeps no glued lines in `extra`
                assert [r.tgt for r in got] == [en for _, en in pairs], inp.corpus
            assert all(r.extra == [] and r.ingest_error is None for r in got), inp.corpus
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


# -- 2. gzip that is not whole -------------------------------------------------------------
def test_truncated_gzip_is_one_line_and_nothing_is_written(tmp_path: Path, data_dir: Path) -> None:
    """Was a Python and a Java traceback, exit 1."""
    data = gzip.compress(tsv(tatoeba_pairs(data_dir, 1500)).encode())
    bad = tmp_path / "cut.tsv.gz"
    bad.write_bytes(data[: len(data) // 2])
    lake = tmp_path / "lake"
    done = spark_submit("--pair", "zh-en", "--corpus", "c", "--input", str(bad),
                        "--lake", str(lake))
    line = one_error_line(done)
    assert line.startswith(f"sluice: error: {bad}: truncated or corrupt gzip data"), line
    assert nothing_written(lake)


@pytest.mark.parametrize("case", ["trailer_cut", "not_gzip", "gzip_named_tsv"])
def test_bad_gzip_is_an_input_error_naming_the_file(
    spark, tmp_path: Path, data_dir: Path, case: str
) -> None:
    data = gzip.compress(tsv(tatoeba_pairs(data_dir, 200)).encode())
    name, content, expected = {
        # the deflate data is whole, only the CRC/size trailer is cut: found by the full read
        "trailer_cut": ("a.tsv.gz", data[:-4], "truncated or corrupt gzip data"),
        "not_gzip": ("a.tsv.gz", tsv(tatoeba_pairs(data_dir, 5)).encode(), "not gzip data"),
        "gzip_named_tsv": ("a.tsv", data, "gzip data without a .gz name"),
    }[case]
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=f"^{path}: {expected}"):
        read_input(spark, InputConf(corpus="c", paths=[str(path)]), "zh-en", 100_000)


# -- 3. UTF-16 / UTF-32 --------------------------------------------------------------------
def test_a_utf16_file_is_refused_naming_file_encoding_and_iconv(
    spark, tmp_path: Path, data_dir: Path
) -> None:
    """Was 1,607 garbage rows from 1,500 lines."""
    path = tmp_path / "pairs.tsv"
    path.write_text(tsv(tatoeba_pairs(data_dir, 1500)), encoding="utf-16")  # with a BOM
    other = tmp_path / "ok.en"
    other.write_text("Hello.\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_input(spark, InputConf(corpus="c", paths=[str(path)]), "zh-en", 100_000)
    assert str(err.value).startswith(f"{path}: UTF-16LE (byte order mark ff fe) text")
    assert "iconv -f UTF-16 -t UTF-8" in str(err.value) and "\n" not in str(err.value)
    moses = InputConf(corpus="m", paths=[str(other), str(path)], format="moses")
    with pytest.raises(InputError, match=f"^{path}: UTF-16LE"):  # either side of a Moses pair
        read_input(spark, moses, "zh-en", 100_000)


def test_encodings_told_by_their_first_bytes(data_dir: Path) -> None:
    text = tsv(tatoeba_pairs(data_dir, 40))
    for codec, bom in [("utf-16-le", "ff fe"), ("utf-16-be", "fe ff"),
                       ("utf-32-le", "ff fe 00 00"), ("utf-32-be", "00 00 fe ff")]:
        problem = text_problem("f.tsv", bytes.fromhex(bom) + text.encode(codec)) or ""
        encoding = codec.upper().replace("-LE", "LE").replace("-BE", "BE")
        assert problem.startswith(f"{encoding} (byte order mark {bom}) text, sluice reads UTF-8")
        assert f"iconv -f {encoding[:6]} -t UTF-8" in problem
    # no BOM: told by the NULs of the (mostly ASCII) English side
    for enc in ("UTF-16LE", "UTF-16BE"):
        assert f"iconv -f {enc} -t UTF-8" in (text_problem("f.tsv", text.encode(enc)) or "")
    assert text_problem("f.tsv", text.encode("utf-8-sig")) is None  # handled as before
    assert text_problem("f.tsv", text.encode() + b"a\x00b\tc\x00d\n" * 3) is None  # nul_byte rows
    utf16_gz = gzip.compress(text.encode("utf-16"))
    assert "UTF-16LE" in (text_problem("f.tsv.gz", utf16_gz) or "")
    assert text_problem("f.tsv.gz", gzip.compress(text.encode())) is None


# -- 4. languages and names ----------------------------------------------------------------
def test_the_language_list_is_lid176s_labels() -> None:
    from udfs.langid import LABEL_PREFIX, LABELS, load_model

    labels = load_model(str(REPO / "models/lid.176.ftz")).get_labels()
    assert {label.removeprefix(LABEL_PREFIX) for label in labels} == LABELS


@pytest.mark.parametrize("extra", [{"pair": "xx-en"}, {"pair": "zh-xx"}, {"lang": "xx"}])
def test_unknown_language_codes_are_refused(extra: dict) -> None:
    """`--pair xx-en` exited 0, keeping Chinese lines as `xx`: a code without a script in
    ICU's CLDR data is refused, pointing at langid.scripts."""
    with pytest.raises(ConfigError, match=r"unknown language code 'xx': ICU's CLDR data knows "
                                          r"no script .*langid.scripts, e.g. \{xx: \[Latn\]\}\)$"):
        load_config(extra=extra)
    load_config(extra={"pair": "ru-zh"})
    load_config(extra={"lang": "yue"})
    load_config(extra={"pair": "ha-en"})  # CLD3 knows what lid.176 lacks
    load_config(extra={"pair": "xh-zu"})


def test_a_language_no_backend_knows_is_refused_unless_skipped() -> None:
    """Fula has a script (Latin) but neither lid.176 nor CLD3 knows it: one line naming the
    backends and the script-only setting; with it, the side is checked by its script."""
    with pytest.raises(ConfigError, match=r"pair 'ff-en': no language-ID backend knows 'ff' "
                                          r"\(lid176 \(fastText lid.176, 176 languages\), cld3 "
                                          r"\(CLD3, 107 languages\)\); set langid.skip: \[ff\]"):
        load_config(extra={"pair": "ff-en"})
    cfg = load_config(extra={"pair": "ff-en", "langid": {"skip": ["ff"]}})
    assert cfg.langid.backend("ff") == "none" and cfg.langid.backend("en") == "lid176"


@pytest.mark.parametrize("name", ["新闻", "wmt19:news#2", "opus.v2-zh", "cc matrix"])
def test_corpus_names_the_lake_can_escape_are_allowed(name: str) -> None:
    cfg = load_config(extra={"pair": "zh-en", "inputs": [{"corpus": name, "paths": ["x"]}]})
    assert cfg.inputs[0].corpus == name


@pytest.mark.parametrize("name", ["", "a/b", "a\\b", "a=b", ".hidden", "_tmp", "a\nb", "a\tb"])
def test_corpus_names_that_break_paths_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="use any characters but / .* = and control"):
        load_config(extra={"pair": "zh-en", "inputs": [{"corpus": name, "paths": ["x"]}]})


# -- 5. invalid YAML in --set --------------------------------------------------------------
def test_invalid_yaml_in_set_is_one_line_exit_2(tmp_path: Path) -> None:
    """Was a yaml traceback."""
    with pytest.raises(ConfigError, match=r"^--set 'rules.max_tokens=\[1,': the value is not"):
        parse_override("rules.max_tokens=[1,")
    with pytest.raises(ConfigError, match="expected key.path=value"):
        parse_override("rules..max_tokens=1")
    data = tmp_path / "p.tsv"
    data.write_text("你好。\tHello.\n", encoding="utf-8")
    done = spark_submit("--pair", "zh-en", "--corpus", "c", "--input", str(data), "--lake",
                        str(tmp_path / "lake"), "--set", "rules.max_tokens=[1,")
    assert "--set 'rules.max_tokens=[1,'" in one_error_line(done)


# -- 6. a busy embedded metastore ----------------------------------------------------------
HOLDER = """
import sys
from jobs.lake.session import build_session
spark = build_session("holder", sys.argv[1], master="local[1]", conf={"spark.ui.enabled": "false"})
spark.sql("SHOW DATABASES").collect()  # boots the embedded Derby metastore
print("ready", flush=True)
sys.stdin.read()  # hold it until the test closes our stdin
spark.stop()
"""


def test_a_busy_metastore_is_said_in_one_line_at_once(tmp_path: Path) -> None:
    """Was a failure after ~40 s and 23,000 lines of stderr."""
    lake = tmp_path / "lake"
    data = tmp_path / "p.tsv"
    data.write_text("你好。\tHello.\n", encoding="utf-8")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lake)], cwd=REPO, text=True,
        env=dict(spark_env(), PYTHONPATH=str(REPO)), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert holder.stdout
        for said in holder.stdout:
            if said.strip() == "ready":
                break
        else:
            pytest.fail("the process holding the metastore did not start")
        start = time.monotonic()
        # A process of its own: a job checks the metastore as its JVM starts.
        done = spark_submit("--pair", "zh-en", "--corpus", "c", "--input", str(data),
                            "--lake", str(lake), cold=True)
        took = time.monotonic() - start
        line = one_error_line(done)
        assert f"metastore {lake}/metastore_db is in use by another job or a spark-sql" in line
        assert "spark.hadoop.hive.metastore.uris=thrift://" in line
        assert took < 30, took
        assert nothing_written(lake)
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(timeout=120)
    # once the holder is gone its lock goes with it, whatever lock files are left behind
    deadline = time.monotonic() + 30
    while True:
        try:
            check_metastore_free(str(lake))
            break
        except ConfigError:
            assert time.monotonic() < deadline, "the metastore lock outlived its holder"
            time.sleep(0.5)
