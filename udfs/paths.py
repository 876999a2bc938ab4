"""Where a model or lake path lives: on this machine, or shipped to the worker by Spark."""

from __future__ import annotations

import os
from urllib.parse import urlparse


def is_local_path(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file")


def local_path(uri: str) -> str:
    return os.path.abspath(urlparse(uri).path if uri.startswith("file:") else uri)


def shipped(path: str) -> str | None:
    """The worker's copy of a file or directory shipped with --files/addFile (matched by base
    name), or None when nothing was shipped (or no SparkContext is there)."""
    try:
        from pyspark import SparkFiles

        copy = SparkFiles.get(os.path.basename(path.rstrip("/")))
    except Exception:  # no SparkContext on this process: nothing was shipped
        return None
    return copy if os.path.exists(copy) else None


def on_this_worker(path: str) -> str:
    """`path` as this process sees it: the path itself when it exists here (an absolute path
    in the image, or one relative to the working directory, where YARN and Kubernetes unpack
    --archives), else the copy Spark shipped with --files/addFile."""
    if os.path.exists(path):
        return os.path.abspath(path)
    copy = shipped(path)
    if copy is None:
        raise FileNotFoundError(
            f"{path} is not on this worker: put it in the image or ship it (--archives, --files)"
        )
    return copy
