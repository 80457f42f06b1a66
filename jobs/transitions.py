"""The conditional state change every stateful row of the portal makes: a job (`jobs.job.lifecycle`),
a booking (`jobs.bookings.lifecycle`), a webhook delivery sent again (`jobs.webhooks.deliver`).

    TRANSITIONS = {"confirm": Transition((REQUESTED,), (CONFIRMED,)), ...}   # a kind's table of moves
    sources, to = transitions.check(TRANSITIONS, "confirm")                  # ValueError if not in it
    if transitions.update_if(booking, "state", sources, to, reason=""):      # True: this call won
        ...publish, audit, notify: only the caller that made the move does

`update_if` is one `UPDATE ... WHERE pk = row AND <state> IN (sources)` whose row count says whether
this call made the move: of two processes (the RQ worker, the watcher, a user's click) trying the
same move on the same row, exactly one wins, and only it goes on. Nothing here imports a model, so
the models and every domain module may use it. `write` is the same UPDATE without a condition.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from django.db import connections, router


@dataclasses.dataclass(frozen=True)
class Transition:
    """One named move of a table: from any of `sources`, to one of `targets`."""

    sources: tuple[str, ...]
    targets: tuple[str, ...]


def check(table: Mapping[str, Transition], name: str, to: str | None = None,
          only_from: Iterable[str] | None = None) -> tuple[tuple[str, ...], str]:
    """(sources, end) of the move `name` in `table`. `to` says which end when the move has several
    (required then); `only_from` narrows the table's sources for this call. Raises KeyError for a
    move not in the table, ValueError for an end or a start the move does not have."""
    transition = table[name]
    if to is None:
        if len(transition.targets) != 1:
            raise ValueError(f"the move {name!r} has several ends: say which")
        to = transition.targets[0]
    if to not in transition.targets:
        raise ValueError(f"the move {name!r} cannot end in {to!r}")
    sources = transition.sources
    if only_from is not None:
        only_from = tuple(only_from)
        if not set(only_from) <= set(sources):
            raise ValueError(f"the move {name!r} cannot start from {only_from!r}")
        sources = only_from
    return sources, to


def update_if(row, field: str, sources: Iterable[str], to: str, **fields) -> bool:
    """Set `row`'s `field` to `to` (and `fields`, in the same UPDATE) if it is still one of
    `sources` in the database. True when this call changed it; then `row` in memory has the new
    values too. False, with nothing written, when another caller moved it first."""
    if isinstance(sources, str):
        sources = (sources,)
    changed = type(row)._default_manager.filter(pk=row.pk, **{f"{field}__in": list(sources)}).update(
        **{field: to}, **fields)
    if not changed:
        return False
    remember(row, {field: to, **fields})
    return True


def write(row, **fields) -> None:
    """Write `fields` to `row`'s database row (one UPDATE: no `save()`, so no auto_now and no
    signals, and no other field is written back) and to `row` in memory; no condition."""
    type(row)._default_manager.filter(pk=row.pk).update(**fields)
    remember(row, fields)


def write_many(rows, fields) -> None:
    """`write` for many rows of one model at once, each with its own values of `fields` (taken
    from the rows in memory): one parameterised UPDATE by primary key, sent for every row in ONE
    round trip (psycopg's executemany pipelines them). A watcher cycle under load writes a few
    hundred rows: one UPDATE each was most of its time, and Django's `bulk_update` builds a
    CASE expression per row and field, which cost as much again in Python (docs/scale.md). Like
    `write`: no condition, no `save()`, only these columns."""
    rows = list({row.pk: row for row in rows}.values())  # a row twice: its values in memory are the last
    if not rows:
        return
    model = type(rows[0])
    connection = connections[router.db_for_write(model)]
    quote, meta = connection.ops.quote_name, model._meta
    columns = [meta.get_field(name) for name in fields]
    sql = (f"UPDATE {quote(meta.db_table)} SET " + ", ".join(f"{quote(c.column)} = %s" for c in columns)
           + f" WHERE {quote(meta.pk.column)} = %s")
    params = [[c.get_db_prep_save(getattr(row, c.attname), connection) for c in columns]
              + [meta.pk.get_db_prep_value(row.pk, connection)] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def remember(row, fields: dict) -> None:
    """Set `fields` on `row` in memory only (what a write made true in the database)."""
    for name, value in fields.items():
        setattr(row, name, value)
