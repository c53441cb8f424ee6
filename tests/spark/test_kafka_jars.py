"""`replog.spark.kafka_jars` without the network: which POM dependencies are followed, what
pyspark already ships, the typed errors, and a complete cache used without any fetch."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.spark import kafka_jars
from replog.spark.kafka_jars import Artifact, KafkaJarsError, MavenUnreachableError

POM = b"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId>
      <version>3.9.2</version><scope>compile</scope></dependency>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql_2.13</artifactId>
      <version>4.2.0</version><scope>provided</scope></dependency>
    <dependency><groupId>org.xerial.snappy</groupId><artifactId>snappy-java</artifactId>
      <version>1.1.10.5</version><scope>runtime</scope></dependency>
    <dependency><groupId>a</groupId><artifactId>opt</artifactId><version>1</version>
      <optional>true</optional></dependency>
    <dependency><groupId>a</groupId><artifactId>t</artifactId><version>1</version>
      <scope>test</scope></dependency>
    <dependency><groupId>org.apache.commons</groupId><artifactId>commons-pool2</artifactId>
      <version>2.13.1</version></dependency>
  </dependencies>
</project>"""
OWNER = Artifact("org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.2.0")


def test_compile_and_runtime_dependencies_are_followed() -> None:
    assert kafka_jars.dependencies(POM, OWNER) == [
        Artifact("org.apache.kafka", "kafka-clients", "3.9.2"),
        Artifact("org.xerial.snappy", "snappy-java", "1.1.10.5"),
        Artifact("org.apache.commons", "commons-pool2", "2.13.1"),
    ]


def test_a_dependency_without_a_literal_version_is_named() -> None:
    pom = POM.replace(b"<version>2.13.1</version>", b"<version>${pool.version}</version>")
    with pytest.raises(KafkaJarsError, match=r"commons-pool2 no literal version"):
        kafka_jars.dependencies(pom, OWNER)


def test_resolve_skips_what_pyspark_ships_and_names_an_unserved_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def get(url: str) -> bytes:
        asked.append(url.rsplit("/", 1)[-1])
        if "4.3.0" in url:
            raise KafkaJarsError(f"Maven Central answered 404 for {url}")
        return POM if "spark-sql-kafka" in url else b"<project/>"

    monkeypatch.setattr(kafka_jars, "_get", get)
    found = kafka_jars.resolve("4.2.0", {"snappy-java"})
    assert [a.name for a in found] == [
        "spark-sql-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
    ]
    assert "snappy-java-1.1.10.5.pom" not in asked
    with pytest.raises(KafkaJarsError, match=r"does not serve .*spark-sql-kafka-0-10_2.13:4.3.0"):
        kafka_jars.resolve("4.3.0", set())


def test_unreachable_maven_is_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_jars, "MAVEN_CENTRAL", "http://127.0.0.1:9/maven2")
    with pytest.raises(MavenUnreachableError, match="cannot reach Maven Central"):
        kafka_jars.resolve("4.2.0", set())


def test_a_complete_cache_is_used_without_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kafka_jars.CACHE_ENV, str(tmp_path))
    directory = tmp_path / "4.2.0"
    directory.mkdir()
    (directory / "a-1.jar").write_bytes(b"jar")
    (directory / "jars.txt").write_text("a-1.jar\n")

    def no_fetch(url: str) -> bytes:
        raise AssertionError(f"fetched {url}")

    monkeypatch.setattr(kafka_jars, "_get", no_fetch)
    assert kafka_jars.kafka_source_jars("4.2.0") == [directory / "a-1.jar"]


def test_pyspark_jar_names_drop_versions() -> None:
    names = kafka_jars.pyspark_jar_names()
    assert {"zstd-jni", "snappy-java", "slf4j-api", "spark-core_2.13"} <= names
