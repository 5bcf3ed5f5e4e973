"""The warm model service: search and index work in a child of the consumer that exits when idle.

* :mod:`.protocol`: the JSON-lines framing with its size bound;
* :mod:`.child`: the child process that owns the embedder and the graph index;
* :mod:`.supervisor`: the consumer's side (start on demand, retry once, :func:`activate`);
* :mod:`.server`: the search socket ``$REFLECT_HOME/run/model.sock`` in the consumer;
* :mod:`.client`: :func:`~.client.search_via_worker`, the CLI's warm path.

Why a child process and not a cached model: ARCHITECTURE §8.1. Nothing is imported here.
"""
