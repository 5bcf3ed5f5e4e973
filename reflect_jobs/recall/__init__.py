"""Recall: bring learnings back to the agent (ARCHITECTURE §13).

The modules a hook imports (:mod:`.repokey`, :mod:`.store`, :mod:`.block`, :mod:`.hook`) are
standard library only, like the rest of the hook path; :mod:`.refresh` (the worker keeping
the context store in step with the notes) and :mod:`.mcp_server` are not.
"""
