"""The connection actor: one per configured server, owning its transport and live session.

``status.py`` holds the published state, ``actor.py`` the actor and the slot that restarts it,
``handle.py`` what callers hold; ``live.py`` runs every request on an established session;
``listings.py`` caches what a server lists; ``listen.py`` and ``tasks.py`` carry the 2026-07-28
streams; ``callbacks.py`` answers a server's requests with the host's callbacks.
"""
