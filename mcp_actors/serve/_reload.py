"""Hot reload: a running gateway follows its config file, without dropping a session.

The watcher looks at the file's fingerprint (one ``stat``) every ``interval`` seconds. When
it moved — ``mcp-actors add`` in another shell, another process, an editor's save:

* the runtime applies the server records (:meth:`McpService.list` re-reads a moved file:
  the registry starts added servers, stops removed ones, restarts edited ones, and emits
  ``servers:changed``, which the gateway's relay turns into ``list_changed`` for clients);
* the profiles are read again; a profile added, changed or removed is served from then on
  (``profiles:changed``), and every client is told its lists changed.

A bad edit never costs the running state: a file that is not valid JSON, or a profile that
fails validation, is reported once per version of the file (a warning in the log and a
``config:invalid`` event naming the field) and everything goes on as it was until the file
is fixed. Sessions stay open throughout; a session of a profile that was removed gets an
error naming the profiles there are.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

import trio

from mcp_actors import events
from mcp_actors._config.profiles import Profile, load_profiles
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import ConfigError, InvalidProfile, McpActorsError
from mcp_actors.serve._gateway import Gateway

__all__ = [
    "DEFAULT_RELOAD_INTERVAL",
    "apply_config",
    "read_profiles",
    "start_profiles",
    "warn_unknown_servers",
    "watch_config",
]

logger = logging.getLogger("mcp_actors.serve")

DEFAULT_RELOAD_INTERVAL: Final = 1.0
"""Seconds between two looks at the config file's fingerprint (one ``stat`` each)."""
_ALL_LISTS: Final = frozenset({"tools", "prompts", "resources"})
_Fingerprint = tuple[int, int, int, int] | None


async def read_profiles(store: ConfigStore) -> tuple[dict[str, Profile], _Fingerprint]:
    """The profiles of the file and its fingerprint, read in a worker thread.

    Raises:
        InvalidProfile, ConfigFileCorrupt, OSError: As :func:`~mcp_actors._config.profiles.load_profiles`.
    """
    return await trio.to_thread.run_sync(load_profiles, store)


def _report(gateway: Gateway, store: ConfigStore, exc: Exception) -> None:
    """A version of the file that cannot be applied: said once, in the log and as an event."""
    logger.warning("the config file %s changed but was not applied (%s); serving as before", store.path, exc)
    gateway.service.bus.emit(
        events.CONFIG_INVALID,
        path=str(store.path),
        error=str(exc),
        field=getattr(exc, "field", None),
        profile=exc.profile if isinstance(exc, InvalidProfile) else None,
    )


async def warn_unknown_servers(gateway: Gateway, profiles: Mapping[str, Profile]) -> None:
    """Log each server a profile names that is not configured (renamed or removed): it is left out."""
    configured = {record.name for record in await gateway.service.list()}
    for name, profile in profiles.items():
        for server in profile.servers:
            if server not in configured and not any(mark in server for mark in "*?["):
                logger.warning("profile %r names server %r, which is not configured: it is left out", name, server)


async def apply_config(gateway: Gateway, store: ConfigStore) -> _Fingerprint:
    """Apply the file as it is now: servers through the runtime, profiles to the gateway.

    Returns:
        The fingerprint of the version of the profiles read (or seen, when it was bad).
    """
    try:
        await gateway.service.list()  # the registry re-reads a moved file (or keeps its state, and logs)
    except McpActorsError as exc:
        logger.warning("the runtime could not apply the config file: %s", exc)
    # Taken before the read: a version saved after a failed read must look new at the next
    # look (a fingerprint taken after the report would be the fix's, and the fix never applied).
    before = await trio.to_thread.run_sync(store.fingerprint)
    try:
        profiles, fingerprint = await read_profiles(store)
    except (ConfigError, OSError) as exc:
        _report(gateway, store, exc)
        return before
    served = gateway.profiles
    if served is None:
        return fingerprint
    changed = served.update(profiles)
    await warn_unknown_servers(gateway, {name: profiles[name] for name in changed if name in profiles})
    if changed:
        logger.info("profiles changed: %s", ", ".join(sorted(changed)))
        gateway.service.bus.emit(events.PROFILES_CHANGED, profiles=sorted(changed))
        gateway.changed(_ALL_LISTS)
    return fingerprint


async def watch_config(
    gateway: Gateway,
    store: ConfigStore,
    *,
    interval: float = DEFAULT_RELOAD_INTERVAL,
    seen: _Fingerprint = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Apply every change of the config file to the running gateway, until cancelled.

    Args:
        gateway: The gateway (its profiles are replaced; its clients told of list changes).
        store: The config file.
        interval: Seconds between two looks at the file's fingerprint.
        seen: The fingerprint of the version already applied (the gateway's start read it).
    """
    if not interval > 0:
        raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
    last = seen
    task_status.started()
    while True:
        await trio.sleep(interval)
        try:
            current = await trio.to_thread.run_sync(store.fingerprint)
        except OSError as exc:
            logger.debug("cannot stat the config file %s: %s", store.path, exc)
            continue
        if current != last:
            last = current
            applied = await apply_config(gateway, store)
            if applied is not None:
                last = applied


async def start_profiles(gateway: Gateway, *, profile: str | None = None) -> _Fingerprint:
    """Give ``gateway`` the profiles of its runtime's config file, read now; return the fingerprint read.

    A gateway starts only with a readable profiles section: serving the plain endpoint
    unrestricted because the ``default`` profile is malformed would widen what it offers.

    Args:
        gateway: The gateway; its :attr:`~Gateway.profiles` is set.
        profile: A profile that must exist (``--stdio --profile NAME``).

    Raises:
        InvalidProfile: The profiles section is malformed (named, with its field).
        ProfileNotFound: ``profile`` is not configured.
        ConfigFileCorrupt, OSError: The config file cannot be read.
    """
    from mcp_actors._config.profiles import DEFAULT_PROFILE
    from mcp_actors.errors import ProfileNotFound
    from mcp_actors.serve._profiles import Profiles

    store = gateway.service.config_store
    profiles, fingerprint = await read_profiles(store)
    served = gateway.profiles = Profiles(naming=gateway.tools.naming)
    served.update(profiles)
    await warn_unknown_servers(gateway, profiles)
    if profile is not None and not served.serves(profile):
        known = ", ".join([DEFAULT_PROFILE, *served.names()])
        raise ProfileNotFound(
            f"no profile {profile!r} in {store.path}; the profiles are: {known} (mcp-actors profile add {profile}"
            " creates it)",
            profile=profile,
        )
    return fingerprint
