"""The reference study (docs/reference-study-reproduction.md) reproduced with simkit:
published figures carried as data (`published`), predictions beside them (`reproduce`)."""

from simkit.reference.published import HELD_OUT, PUBLISHED, SOURCE, PublishedRow

__all__ = ["HELD_OUT", "PUBLISHED", "SOURCE", "PublishedRow"]
