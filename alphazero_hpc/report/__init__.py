"""Reading a run back for people: ``azhpc status`` (``status``: typed records, text and JSON), following a run
until it ends (``follow``) and the PNG figures of ``azhpc plot`` (``plot``)."""
