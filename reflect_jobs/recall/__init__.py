"""Recall: bring learnings back to the agent (ARCHITECTURE §13).

The modules a hook imports (:mod:`.store`, :mod:`.block`, :mod:`.hook`, :mod:`.session_start`,
:mod:`.prompt_hook`, :mod:`.hook_inputs`, :mod:`.items`, and the
repository identity :mod:`reflect_jobs.repo`) are standard library only, like the rest of the hook path; :mod:`.refresh` (the worker keeping
the context store in step with the notes) and :mod:`.mcp_server` are not.
"""
