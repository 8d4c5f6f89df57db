def lossless(value: object, raw: object, /) -> bool:
    """Whether ``value``, decoded by orjson from the bytes ``raw``, is lossless JSON as read
    (what ``jsonvalue.check_loaded`` accepts); False means: run the precise check."""
