"""A Django database backend on litelane: ``"ENGINE": "litelane.django"``.

It is Django's own SQLite backend (its SQL, operations, introspection, schema
editor and features) with the connection layer replaced by
``litelane.dbapi``: writes from every thread and every worker process take
turns through litelane's queues instead of failing with "database is
locked", reads run on litelane's reader pool. See docs/django.md.
"""
