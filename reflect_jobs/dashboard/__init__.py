"""``reflect-jobs ui``: a local web page over the ledger, the queue and the KB (ARCHITECTURE §9).

The role Flower plays for Celery and rq-dashboard for RQ. Only :mod:`.app` imports the web
stack (Starlette, uvicorn: the ``ui`` extra), and only ``reflect-jobs ui`` imports
:mod:`.app`, so the hook, ``status`` and every other command never load it. :mod:`.chart`
(the SVG), :mod:`.data` (what the page shows) and :mod:`.token` are plain Python.
"""
