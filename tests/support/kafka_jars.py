"""The Apache Kafka jars the tests run, and a Java 17+ to run them with.

The jars (``org.apache.kafka:kafka_2.13`` and ``kafka-tools`` at the version in ``tests/apache/pom.xml``, with
their runtime dependencies) are copied by Maven into a cache outside the work tree:
``~/.cache/groupstream/apache-kafka-<version>-<pom hash>/`` (``$GROUPSTREAM_CACHE`` moves it; Maven's own cache
is ``~/.m2``). ``make kafka-jars`` runs ``python tests/support/apache_kafka.py fetch`` (this module's ``main``); a
fetch that is already complete returns at once. ``$GROUPSTREAM_KAFKA_LIBS`` points at a directory of jars of
one's own instead.

Standard library only: the fetch runs before the test environment is set up.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

POM = Path(__file__).resolve().parent.parent / "apache" / "pom.xml"
JAVA_CANDIDATES = (
    "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
    "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java",
)
MIN_JAVA = 17  # Kafka 4.x brokers and tools need Java 17


class KafkaSetupError(RuntimeError):
    """Apache Kafka cannot be run here (no jars, no Java 17+, a node that would not start)."""


def kafka_version(pom: Path = POM) -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    if m is None:
        raise KafkaSetupError(f"no <kafka.version> in {pom}")
    return m.group(1)


def cache_root() -> Path:
    return Path(os.environ.get("GROUPSTREAM_CACHE") or Path.home() / ".cache" / "groupstream")


def jars_dir(pom: Path = POM) -> Path:
    """Where the jars of this pom live: named by version and by the pom's hash, so an edited pom fetches
    into a new directory instead of mixing two dependency sets."""
    own = os.environ.get("GROUPSTREAM_KAFKA_LIBS")
    if own:
        return Path(own)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_root() / f"apache-kafka-{kafka_version(pom)}-{digest}"


def _complete_marker(libs: Path) -> Path:
    return libs / ".complete"


def jars_ready(pom: Path = POM) -> bool:
    libs = jars_dir(pom)
    if os.environ.get("GROUPSTREAM_KAFKA_LIBS"):
        return any(libs.glob("kafka_2.13-*.jar"))
    return _complete_marker(libs).is_file()


def fetch_jars(pom: Path = POM, *, quiet: bool = True) -> Path:
    """Copy the pom's runtime dependencies from Maven into ``jars_dir()``; at once when already there.

    Maven resolves through ``~/.m2`` (so a second copy directory costs no download); the copy goes into a
    temporary directory renamed into place, so an interrupted fetch never leaves a half-filled cache that
    looks complete.
    """
    libs = jars_dir(pom)
    if jars_ready(pom):
        return libs
    if os.environ.get("GROUPSTREAM_KAFKA_LIBS"):
        raise KafkaSetupError(f"GROUPSTREAM_KAFKA_LIBS={libs} holds no kafka_2.13 jar")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError("Maven (mvn) is not installed: `apt-get install maven`, then `make kafka-jars`")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = libs.with_name(libs.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn,
        "-B",
        *(["-q"] if quiet else []),
        "-f",
        str(pom),
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaSetupError(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
        )
    names = sorted(p.name for p in staging.glob("*.jar"))
    _complete_marker(staging).write_text("\n".join(names) + "\n")
    shutil.rmtree(libs, ignore_errors=True)
    try:
        staging.rename(libs)
    except OSError:
        if not jars_ready(pom):  # not another process's fetch finishing first: a real failure
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def classpath(pom: Path = POM) -> str:
    libs = jars_dir(pom)
    if not jars_ready(pom):
        raise KafkaSetupError(
            f"the Apache Kafka jars are not in {libs}: run `make kafka-jars` (or "
            f"`python tests/support/apache_kafka.py fetch`), or set GROUPSTREAM_KAFKA_LIBS to a directory of jars"
        )
    return str(libs / "*")


@cache
def java_binary() -> str:
    """A Java 17+ ``java``: ``$GROUPSTREAM_JAVA``, ``$JAVA_HOME``, the machine's JDK 17, then PATH."""
    candidates: list[str] = []
    if os.environ.get("GROUPSTREAM_JAVA"):
        candidates.append(os.environ["GROUPSTREAM_JAVA"])
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    candidates += JAVA_CANDIDATES
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    seen: list[str] = []
    for java in candidates:
        if not Path(java).is_file():
            continue
        version = _java_feature_version(java)
        seen.append(f"{java}: {version}")
        if version is not None and version >= MIN_JAVA:
            return java
    raise KafkaSetupError(f"no Java {MIN_JAVA}+ found for Apache Kafka (tried {seen or candidates})")


def _java_feature_version(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="copy the Apache Kafka jars into the cache (at once when already there)")
    sub.add_parser("where", help="print the jar directory")
    args = parser.parse_args(argv)
    if args.cmd == "where":
        print(jars_dir())
        return 0
    t0 = time.monotonic()
    cached = jars_ready()
    try:
        libs = fetch_jars()
        java_binary()
    except KafkaSetupError as e:
        print(e, file=sys.stderr)
        return 1
    how = "already cached" if cached else "fetched"
    print(f"Apache Kafka {kafka_version()}: {len(list(libs.glob('*.jar')))} jars in {libs} ({how}, "
          f"{time.monotonic() - t0:.1f} s)")  # fmt: skip
    return 0
