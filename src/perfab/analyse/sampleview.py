"""A row's raw samples as a read-only tuple over a numpy array.

A report row keeps every sample of both sides in run order (the plots and
the JSON output show them).  At a million runs a tuple of them costs about
70 bytes a sample (a float object and a pointer, an int object for its
position in time); ``SampleView`` keeps the array (8 bytes a sample) and
answers as the tuple would: length, indexing, iteration (as Python
numbers), ``+`` (concatenation), equality with a tuple, hashing, and
``numpy.asarray`` without a copy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class SampleView(Sequence):
    """The values of ``array`` as an immutable sequence of Python numbers."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = np.asarray(array)  # the samples (not copied: nothing writes to it)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return SampleView(self.array[i])
        return self.array[i].item()

    def __iter__(self):
        return iter(self.array.tolist())

    def __add__(self, other):
        if isinstance(other, SampleView):
            return SampleView(np.concatenate([self.array, other.array]))
        return tuple(self) + tuple(other)

    def __radd__(self, other):
        return tuple(other) + tuple(self)

    def __eq__(self, other) -> bool:
        if isinstance(other, SampleView):
            return len(self) == len(other) and bool(np.array_equal(self.array, other.array))
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)

    def __repr__(self) -> str:
        return repr(tuple(self))
