"""``reflect-jobs install``: wire the hook into a harness and the consumer into a service manager.

Both jobs edit files that belong to someone else, so they share one discipline — parse or
refuse, change only what is ours, write only when something changed, back up first, write
atomically — and are split by what they edit:

* :mod:`.jsonfile` — reading, restyling, diffing, backing up and writing a JSON settings file.
* :mod:`.hooks` — the harnesses, and the pure merge of our hook entry into their settings.
* :mod:`.service` — rendering, validating and writing the consumer's systemd unit / plist.

Nothing here is imported by the hook (``reflect_jobs.hook``) — it is CLI- and doctor-only.
The names below are the package's interface (doctor, backfill, the CLI and the tests import
them from here).
"""

from __future__ import annotations

from .hook_paths import (
    HOOK_MARKER,
    default_settings_path,
    event_command,
    harness_home,
    harness_hook_files,
    harness_present,
    hook_command,
    hook_script,
)
from .hooks import (
    FileChange,
    HookPlan,
    apply_hooks,
    installed_events,
    is_ours,
    merge_hooks,
    new_entry,
    read_installed,
    read_timeout_problems,
    remove_hooks,
    timeout_problems,
)
from .jsonfile import (
    SettingsFileError,
    SettingsText,
    backup_path,
    dump_like,
    guess_indent,
    parse_json,
    read_settings,
    replace_settings,
    settings_diff,
)
from .service import (
    LAUNCHD_LABEL,
    PLACEHOLDER,
    SERVICE_FILES,
    InstallError,
    UnitWrite,
    default_manager,
    default_service_path,
    enable_commands,
    external_check,
    parse_unit,
    render_service,
    service_values,
    template_text,
    templates_dir,
    uncarried_env,
    validate,
    validate_plist,
    validate_unit,
    venv_dir,
    write_unit,
)

__all__ = [
    "HOOK_MARKER",
    "LAUNCHD_LABEL",
    "PLACEHOLDER",
    "SERVICE_FILES",
    "FileChange",
    "HookPlan",
    "InstallError",
    "SettingsFileError",
    "SettingsText",
    "UnitWrite",
    "apply_hooks",
    "backup_path",
    "default_manager",
    "default_service_path",
    "default_settings_path",
    "dump_like",
    "enable_commands",
    "external_check",
    "guess_indent",
    "harness_home",
    "harness_hook_files",
    "harness_present",
    "event_command",
    "hook_command",
    "hook_script",
    "installed_events",
    "is_ours",
    "merge_hooks",
    "new_entry",
    "parse_json",
    "parse_unit",
    "read_installed",
    "read_timeout_problems",
    "timeout_problems",
    "read_settings",
    "remove_hooks",
    "render_service",
    "replace_settings",
    "service_values",
    "settings_diff",
    "template_text",
    "templates_dir",
    "uncarried_env",
    "validate",
    "validate_plist",
    "validate_unit",
    "venv_dir",
    "write_unit",
]
