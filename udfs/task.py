"""What Spark gave the running task: its GPU (resource scheduling) and its cores."""

from __future__ import annotations

import os


def _task_context():  # pyspark.TaskContext, or None
    """The running Spark task's context; None outside a task, or where pyspark is not
    installed (bench/gpu/suite.py runs the scorer's group code on GPU hosts without it)."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return None
    return TaskContext.get()


def task_gpu() -> str | None:
    """`cuda:<address>` of the GPU Spark's resource scheduling gave the running task, if any."""
    ctx = _task_context()
    gpus = ctx.resources().get("gpu") if ctx is not None else None
    if gpus is None or not gpus.addresses:
        return None
    return f"cuda:{gpus.addresses[0]}"


def task_cpus() -> int:
    """Cores this task may use: spark.task.cpus inside a Spark task, else the machine's."""
    ctx = _task_context()
    return max(1, ctx.cpus()) if ctx is not None else os.cpu_count() or 1
