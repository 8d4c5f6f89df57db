def plain(value: object, /) -> bool:
    """Whether ``value``, which the lossless encoder accepted, holds only exact builtin JSON
    types and only finite floats other than ``-0.0``."""
