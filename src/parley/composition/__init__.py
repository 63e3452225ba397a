"""The composition root's wiring: how the services' Context is built, read in one place.

- `options.py`: the operator's Settings -> plain values (`runtime_options`,
  `database_options`, `engine_options`), and this instance's name;
- `context.py`: `open_context(options, clock=…)` opens the database, picks the store
  implementations (in-process or Redis: the only module that does), builds the JWT runtime
  and the outbound client, and yields the services' `Context`; the app's lifespan and
  `parley serve`'s first start use it;
- `database.py`: `open_database_context` (the database and the clock only, for the
  operator commands);
- `schema.py`: `migrate_database`, the schema brought up to date before a context opens.

`parley.app` and `parley.cli` import the module they need: this package imports none of
them itself, so a command that needs only the database loads neither the JWT kernel nor
the stores.
"""
