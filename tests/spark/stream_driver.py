"""A Spark driver of its own, for the driver-kill test: one streaming query from replog into a
Parquet directory, with a checkpoint and `trigger(processingTime=...)`, until it is killed.

    python stream_driver.py BOOTSTRAP TOPIC OUT CHECKPOINT SCRATCH

Runs in a fresh process (the test kills its whole process group: this Python and its JVM), so
everything Spark needs comes from the environment the test gives it (`PYSPARK_PYTHON`, ...);
its JVM's temporary files go to SCRATCH, which a kill leaves in the test's directory.
"""

from __future__ import annotations

import sys

from replog.spark.local_session import local_session

MAX_OFFSETS_PER_TRIGGER = "100"  # several micro-batches, so a kill can land between and in them


def main(bootstrap: str, topic: str, out: str, checkpoint: str, scratch: str) -> int:
    spark = local_session("replog-stream-driver", scratch_dir=scratch)
    query = (
        spark.readStream.format("replog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER)
        .load()
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
