"""What Spark gave the running task: its GPU (resource scheduling) and its cores."""

from __future__ import annotations

import os


def task_gpu() -> str | None:
    """`cuda:<address>` of the GPU Spark's resource scheduling gave the running task, if any."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    gpus = ctx.resources().get("gpu") if ctx is not None else None
    if gpus is None or not gpus.addresses:
        return None
    return f"cuda:{gpus.addresses[0]}"


def task_cpus() -> int:
    """Cores this task may use: spark.task.cpus inside a Spark task, else the machine's."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return max(1, ctx.cpus()) if ctx is not None else os.cpu_count() or 1
