"""Serializers for what the portal keeps in Redis: JSON, never pickle.

Redis on a shared host is reachable by others (a local user, a misconfigured firewall): whatever
the portal reads back from it must be data, never code. Django's Redis cache and RQ both default
to pickle, and unpickling a planted value runs it. These store JSON (and the cache's integers as
Redis integers, so `incr` stays atomic); a value that is not JSON is refused, not executed.
"""
from __future__ import annotations

import json


class CacheJSONSerializer:
    """`settings.CACHES[...]["OPTIONS"]["serializer"]` of Django's RedisCache: JSON values only."""

    def __init__(self, protocol=None):  # Django passes pickle's protocol; JSON has none
        pass

    def dumps(self, obj):
        if type(obj) is int:  # stored as a Redis integer: incr()/decr() work on it
            return obj
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(self, data):
        try:
            return int(data)
        except ValueError:
            return json.loads(data)  # ValueError on anything else: never unpickled
