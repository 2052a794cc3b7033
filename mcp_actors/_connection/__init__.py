"""The connection actor: one per configured server, owning its transport and live session.

``status.py`` holds the published state, ``actor.py`` the actor and the slot that restarts it,
``handle.py`` what callers hold; ``live.py`` runs every request on an established session;
``listings.py`` caches what a server lists (for as long as the server says); ``listen.py`` carries the
2026-07-28 event stream; ``tasks.py`` pushed task statuses and the 2026-07-28 tasks extension's
shapes; ``callbacks.py`` answers a server's requests with the host's callbacks.
"""
