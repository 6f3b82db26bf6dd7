"""Sequence labels padded with the loss's ``ignore_class`` (no Keras mask).

``SparseCategoricalCrossentropy(ignore_class=-1)`` on ``[N, T]`` labels padded
with -1 masks its own unreduced values: its mean is over the labels not -1,
so ``train_size`` counts those, as it counts the unmasked timesteps under
``Embedding(mask_zero=True)`` (tests/test_per_timestep_loss.py).
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import loss_terms
from fit_helpers import K, T, VOCAB, tagged_sequences
from test_per_timestep_loss import train_size_warnings

PAD = -1


def padded(n=16, seed=0):
    """Token sequences without padding tokens; labels -1 past each sequence's length."""
    x, _ = tagged_sequences(n, seed=seed)
    lengths = (x != 0).sum(1)
    x = np.where(x == 0, 1, x)  # every token real: only the labels say where a sequence ends
    labels = (x % K).astype("int32")
    labels[np.arange(T)[None, :] >= lengths[:, None]] = PAD
    return x, labels


def padded_tagger(train_size, ignore_class=PAD):
    """Embedding (no mask) → Dense per timestep, its loss ignoring ``ignore_class``."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((T,), dtype="int32"), keras.layers.Embedding(VOCAB, 3),
                              keras.layers.Dense(K)])
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=train_size,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                ignore_class=ignore_class))
    return bnn


def test_padding_labels_are_accepted_and_train_size_counts_the_labels_scored():
    """``fit`` refused the -1 labels until 2026-11-29 ("`y` must be class indices in
    [0, 2] ...; got class indices in [-1, 2]") although the loss ignores them; the
    terms counted are the 66 labels scored of 96 (16 sequences of 6)."""
    x, labels = padded()
    scored = int((labels != PAD).sum())
    assert scored == 66  # the numbers below
    assert loss_terms.training_terms(padded_tagger(scored), x, labels, len(x)) == (66.0, T)
    assert train_size_warnings(padded_tagger(scored), x, labels, batch_size=8, epochs=1) == []
    messages = train_size_warnings(padded_tagger(len(x)), x, labels, batch_size=8, epochs=1)
    assert len(messages) == 1
    assert "16 sequences (examples) of 66 loss terms" in messages[0]
    assert np.isfinite(padded_tagger(scored).evaluate(x, labels, verbose=0)[0])


def test_a_label_outside_the_classes_and_not_ignored_is_refused():
    """Only the loss's ``ignore_class`` is let through besides [0, K); without one,
    -1 is refused as before, and the message names the ignored class where there is one."""
    x, labels = padded()
    with pytest.raises(ValueError, match=r"`y` must be class indices in \[0, 2\] \(the model "
                                         r"outputs 3 classes\); got class indices in \[-1, 2\]"):
        padded_tagger(66, ignore_class=None).fit(x, labels, epochs=1, verbose=0)
    labels[0, 0] = K
    with pytest.raises(ValueError, match=r"in \[0, 2\] \(the model outputs 3 classes\), or the "
                                         r"loss's ignore_class=-1; got class indices in \[0, 3\]"):
        padded_tagger(66).fit(x, labels, epochs=1, verbose=0)
