"""Per-position predictions for the metrics: a tagger's tokens, a segmenter's pixels.

A model with one prediction per position outputs ``[N, ..., E]`` (a tagger's
``[N, T, K]``, a per-pixel ``[N, H, W, K]``; E the class or target axis,
last), its S members ``[S, N, ..., E]``, its labels are ``[N, ...]``. The
metrics score *positions*: with the positions' axes ``P = (N, ...)``
flattened to M = Π P rows, or only the M rows where a boolean ``mask`` of
shape P is True (``x != 0`` for a padded tagger, ``y != ignore_class``),

    metric(probs, labels, mask=mask) == metric(probs[mask], labels[mask]),

every metric a mean over the selected positions (the token-level numbers
Keras' ``evaluate`` gives a masked member). ``[N, K]`` is the case P = (N,):
one position per example, flattened to itself.

:func:`select` checks the mask against the positions' shape once; its
:class:`Positions` then takes the same rows of every array of a call
(probabilities, members, labels, targets). Numpy only.
"""

from typing import NamedTuple

import numpy as np

from keras_bnn.validation import argument_error


class Positions(NamedTuple):
    """The positions ``shape`` P of a call's arrays and which of them are scored.

    ``index`` holds the flat indices (into P flattened in C order) of the
    mask's True entries, or None when every position is scored; ``source``
    names the predictions P was read from, for errors.
    """

    shape: tuple
    index: np.ndarray = None
    source: str = "probs"

    def take(self, values, name, lead=0, event=True):
        """``values [*L, *P, E]`` as ``[*L, M, E]`` (``[*L, *P]`` as ``[*L, M]`` when
        ``event`` is False): the scored positions, in C order.

        Args:
            values: a numpy array with ``lead`` leading axes L (members,
                chains), then the positions P, then one event axis E (or none).
            name: the argument's name, for errors.
            lead: the number of leading axes L.
            event: whether ``values`` has the last axis E after P.

        Returns:
            numpy array ``[*L, M, E]`` (``[*L, M]``), M the number of scored
            positions: a reshape (a view) when every position is scored.

        Raises:
            ValueError: naming ``name`` when its axes after L are not P (then E).
        """
        values = np.asarray(values)
        end = values.ndim - int(event)
        if values.shape[lead:end] != self.shape or end != lead + len(self.shape):
            wanted = "[" + ", ".join(map(str, self.shape)) + (", E]" if event else "]")
            after = f" after {lead} leading axes" if lead else ""
            raise argument_error(name, f"have the positions' axes {wanted}{after}, those of "
                                 f"`{self.source}` (and of `mask`)", None,
                                 got=f"shape {values.shape}")
        tail = values.shape[end:]
        flat = values.reshape(values.shape[:lead] + (int(np.prod(self.shape)),) + tail)
        if self.index is None:
            return flat
        return flat[(slice(None),) * lead + (self.index,)]

    def restore(self, per_position):
        """A per-position result back in the positions' shape.

        Args:
            per_position: numpy array ``[M]``, one value per scored position.

        Returns:
            ``per_position`` reshaped to P when every position is scored,
            else as it is (the mask's True entries, in C order).
        """
        return per_position.reshape(self.shape) if self.index is None else per_position


def select(shape, mask=None, name="probs", mask_name="mask"):
    """The :class:`Positions` of predictions whose positions' axes are ``shape``.

    Args:
        shape: the positions' axes P = (N, ...) of the predictions named
            ``name`` (their shape without leading and event axes), len >= 1.
        mask: None (every position), or a boolean array of shape P (numbers
            0/1 are read as booleans): True = scored.
        name: the predictions' argument name, for errors.
        mask_name: the mask's argument name, for errors.

    Returns:
        :class:`Positions`.

    Raises:
        ValueError: naming ``name`` for predictions without a position axis,
            naming ``mask_name`` for one of another shape, with values other than
            0/1 or that selects no position.
    """
    shape = tuple(int(n) for n in shape)
    if not shape or 0 in shape:
        raise argument_error(name, "be an array of shape [N, ..., E] (at least one position "
                             "axis N, no empty axis)", None, got=f"positions' shape {shape}")
    if mask is None:
        return Positions(shape, source=name)
    values = np.asarray(mask)
    if values.shape != shape:
        raise argument_error(mask_name, f"have the positions' shape {shape} of `{name}` "
                             "(its axes [N, ...] before the class axis)", None,
                             got=f"shape {values.shape}")
    if values.dtype != bool:
        if not (np.issubdtype(values.dtype, np.number) and np.all((values == 0) | (values == 1))):
            raise argument_error(mask_name, "be booleans (True = scored), or numbers 0/1", None,
                                 got=f"dtype {values.dtype}")
        values = values.astype(bool)
    if not values.any():
        raise argument_error(mask_name, "select at least one position", None,
                             got="no True entry")
    return Positions(shape, np.flatnonzero(values), name)
