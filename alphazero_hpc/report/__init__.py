"""Reading a run back for people: ``azhpc status`` (``status``: typed records and JSON; ``render``: their text),
following a run until it ends (``follow``) and the PNG figures of ``azhpc plot`` (``plot``)."""
