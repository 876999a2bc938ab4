"""Where a model or lake path lives: on this machine, or shipped to the worker by Spark."""

from __future__ import annotations

import os
from urllib.parse import urlparse


def is_local_path(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file")


def local_path(uri: str) -> str:
    return os.path.abspath(urlparse(uri).path if uri.startswith("file:") else uri)


def shipped(path: str) -> str | None:
    """The worker's copy of a file or directory shipped with --files/--archives/addFile (matched
    by its relative path, then its base name), or None when nothing was shipped (or no
    SparkContext is there)."""
    names = [os.path.basename(path.rstrip("/"))]
    if is_local_path(path) and not os.path.isabs(path):
        names.insert(0, path)  # a path inside a shipped archive: tiny-ct2/spm.model
    try:
        from pyspark import SparkFiles

        root = SparkFiles.getRootDirectory()
    except Exception:  # no SparkContext on this process: nothing was shipped
        return None
    copies = (os.path.join(root, name) for name in names)
    return next((copy for copy in copies if os.path.exists(copy)), None)


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
