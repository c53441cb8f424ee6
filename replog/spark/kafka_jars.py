"""Spark's own Kafka source (`format("kafka")`) for the installed pyspark: its jars, fetched
from Maven Central once and cached, to pass as `spark.jars` (docs/spark.md, "Spark's Kafka
source").

Rules:
- The connector's version is the installed pyspark's: Spark's internal APIs change between
  minor versions, so a connector of another version is refused, never substituted.
- Only what pyspark's own `jars/` lacks is fetched: the connector's compile and runtime
  dependencies are followed through their POMs and an artifact pyspark already ships (any
  version) is not fetched again, so the JVM never sees two copies of a class.
- Jars live in `~/.cache/replog-spark-kafka/<version>/` (`REPLOG_SPARK_KAFKA_CACHE` overrides
  the root); a complete cache (its `jars.txt` list) is used without any network access.
- Errors are typed: `MavenUnreachableError` when Maven Central cannot be reached at all (the
  one case a caller may treat as "not here"), `KafkaJarsError` for anything else (a version
  Maven does not serve, a POM without a version).

`python -m replog.spark.kafka_jars` prints the comma list for `--jars` / `spark.jars`.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from replog.errors import ReplogError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
CONNECTOR = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
CACHE_ENV = "REPLOG_SPARK_KAFKA_CACHE"
TIMEOUT_S = 30.0
_POM_NS = "{http://maven.apache.org/POM/4.0.0}"
_FOLLOWED_SCOPES = ("compile", "runtime")


class KafkaJarsError(ReplogError):
    """Spark's Kafka source jars cannot be resolved (module docstring)."""


class MavenUnreachableError(KafkaJarsError):
    """Maven Central could not be reached at all (no network, DNS, refused connection)."""


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str

    def path(self, ext: str) -> str:
        return (
            f"{self.group.replace('.', '/')}/{self.name}/{self.version}/"
            f"{self.name}-{self.version}.{ext}"
        )


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def pyspark_jar_names() -> set[str]:
    """Artifact names of the jars pyspark ships (`zstd-jni-1.5.7-7.jar` -> `zstd-jni`)."""
    import pyspark

    names: set[str] = set()
    for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar"):
        parts = jar.stem.split("-")
        # The name ends before the first part that starts with a digit (the version).
        cut = next((i for i, p in enumerate(parts) if p[:1].isdigit()), len(parts))
        names.add("-".join(parts[:cut]))
    return names


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "replog-spark-kafka"


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return bytes(answer.read())
    except urllib.error.HTTPError as e:
        raise KafkaJarsError(f"Maven Central answered {e.code} for {url}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise MavenUnreachableError(f"cannot reach Maven Central ({url}): {reason}") from e


def dependencies(pom: bytes, owner: Artifact) -> list[Artifact]:
    """The compile and runtime dependencies a POM declares (not optional, not test/provided)."""
    root = ET.fromstring(pom)
    found: list[Artifact] = []
    deps = root.find(f"{_POM_NS}dependencies")
    for dep in deps if deps is not None else ():

        def text(tag: str, default: str = "", dep: ET.Element = dep) -> str:
            node = dep.find(f"{_POM_NS}{tag}")
            return (node.text or default).strip() if node is not None else default

        if text("scope", "compile") not in _FOLLOWED_SCOPES or text("optional") == "true":
            continue
        version = text("version")
        if not version or "$" in version:
            raise KafkaJarsError(
                f"{owner.group}:{owner.name}:{owner.version}'s POM gives "
                f"{text('groupId')}:{text('artifactId')} no literal version ({version!r})"
            )
        found.append(Artifact(text("groupId"), text("artifactId"), version))
    return found


def resolve(version: str, shipped: set[str]) -> list[Artifact]:
    """The connector of `version` and every dependency it needs that `shipped` lacks."""
    todo = [Artifact(*CONNECTOR, version)]
    needed: list[Artifact] = []
    while todo:
        artifact = todo.pop(0)
        if artifact in needed or artifact.name in shipped:
            continue
        try:
            pom = _get(f"{MAVEN_CENTRAL}/{artifact.path('pom')}")
        except MavenUnreachableError:
            raise
        except KafkaJarsError as e:
            if artifact.name == CONNECTOR[1]:
                raise KafkaJarsError(
                    f"Maven Central does not serve {CONNECTOR[0]}:{CONNECTOR[1]}:{version} "
                    f"(the installed pyspark's version): install a pyspark version it serves "
                    f"(docs/spark.md)"
                ) from e
            raise
        needed.append(artifact)
        todo.extend(dependencies(pom, artifact))
    return needed


def kafka_source_jars(version: str | None = None) -> list[Path]:
    """Paths of the jars to add to `spark.jars` for Spark's Kafka source (module docstring)."""
    version = version or pyspark_version()
    directory = cache_root() / version
    listing = directory / "jars.txt"
    if listing.exists():
        jars = [directory / name for name in listing.read_text().split()]
        if all(jar.exists() for jar in jars):
            return jars
    directory.mkdir(parents=True, exist_ok=True)
    jars = []
    for artifact in resolve(version, pyspark_jar_names()):
        jar = directory / f"{artifact.name}-{artifact.version}.jar"
        if not jar.exists():
            data = _get(f"{MAVEN_CENTRAL}/{artifact.path('jar')}")
            partial = jar.with_suffix(".part")
            partial.write_bytes(data)
            partial.replace(jar)
        jars.append(jar)
    listing.write_text("\n".join(jar.name for jar in jars) + "\n")
    return jars


def main() -> int:
    try:
        print(",".join(str(jar) for jar in kafka_source_jars()))
    except KafkaJarsError as e:
        print(f"replog.spark.kafka_jars: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
