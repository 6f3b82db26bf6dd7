"""Follow-ups to the step rise of a badly scaled chain (samplers.step_rise).

1. The rise's rate was per epoch end (at most ×RISE_LIMIT each), so it
   depended on the epochs' length: ×2 per 5 steps with epochs of 5, ×2 per
   10 000 steps with epochs of 10 000. Now h rises at most ×RISE_LIMIT per
   ``rise_steps`` optimizer steps (the noise estimate's memory 1/(1-ρ)),
   whatever the epochs. Before: ``test_the_rise_is_per_step`` with epochs of
   5 and of 25 raised h ×2 at the first epoch end of the rise
   (AssertionError: 3.03e-09 == 1.57e-09 ± 1e-12 and 3.03e-09 == 1.80e-09).
2. The equilibrium test of CollectSamples watched the epochs run while h
   rose (each at another h: not one chain), so its windows, and the second
   noise measurement averaged from them, could mix step sizes. Now the test
   watches only the epochs after the rise. Before:
   ``test_the_equilibrium_test_watches_only_after_the_rise`` found the test
   watching 2 to 11 epochs at the rise's epoch ends (AssertionError).
"""

import warnings

import keras
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import collection_start, samplers
from keras_bnn.samplers import step_rise
from test_stiff37 import _standardised


def _fit(steps, per_epoch, callbacks=(), on_epoch_end=None, warmup_steps=300):
    """SGLD on breast_cancer ×1000 (30-32-2 MLP, batches of 64, as test_scale39);
    returns the model and ``(step, h, rising)`` at each epoch's end."""
    x, y = _standardised("breast_cancer", 1000.0)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(x.shape[1:], 2, hidden=(32,))
    model.compile(sampler=samplers.get("sgld", seed=0, warmup_steps=warmup_steps),
                  train_size=len(x),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).repeat().batch(64)
    ends = []

    def record(epoch, logs):
        sampler = model.optimizer
        ends.append((int(sampler.iterations.numpy()), sampler.step_size_value,
                     sampler.warmup.rising))
        if on_epoch_end is not None:
            on_epoch_end(sampler)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stiffness, not at equilibrium
        model.fit(data, steps_per_epoch=per_epoch, epochs=steps // per_epoch, verbose=0,
                  callbacks=[*callbacks, keras.callbacks.LambdaCallback(on_epoch_end=record)])
    return model, ends


def test_rise_steps_is_the_noise_memory():
    """1/(1-ρ): 100 steps at the default ρ = 0.99, 20 at 0.95; and an epoch
    of millions of memory lengths leaves h to the noise law."""
    assert step_rise.rise_steps(samplers.get("sgld")) == pytest.approx(100.0)
    assert step_rise.rise_steps(samplers.get("sgld", noise_estimate_decay=0.95)) == (
        pytest.approx(20.0))
    inf = float("inf")
    assert step_rise.raised_step(1e-6, 1e-6, inf, [1e-9], [1], 0.05, 1, 0.5) == (
        pytest.approx(2 ** 0.5 * 1e-6))
    assert step_rise.raised_step(1e-6, 1e-6, inf, [0.05], [1], 0.05, 1, 1e6) == 1.0


@pytest.mark.parametrize("per_epoch", [5, 25])
def test_the_rise_is_per_step(monkeypatch, per_epoch):
    """Noise scales read 10¹² times below the truth (the noise law allows
    any h): h rises by exactly RISE_LIMIT^(steps/rise_steps) between epoch
    ends, for epochs of 5 and of 25 steps alike (the window of 200 steps
    does not close within the run)."""
    scales = step_rise.noise_scales
    monkeypatch.setattr(step_rise, "noise_scales",
                        lambda *args: [a * 1e-12 for a in scales(*args)])
    _, ends = _fit(400, per_epoch, warmup_steps=200)
    rising = [(step, h) for step, h, state in ends if state >= step_rise.RISING]
    assert len(rising) >= 5
    memory = 100.0
    for (step, h), (after, h_after) in zip(rising, rising[1:]):
        assert h_after == pytest.approx(h * 2.0 ** ((after - step) / memory), rel=1e-9)
    first, last = rising[0], rising[-1]
    assert last[1] / first[1] == pytest.approx(2.0 ** ((last[0] - first[0]) / memory))


def test_the_equilibrium_test_watches_only_after_the_rise(tmp_path):
    """While h may rise at an epoch end, CollectSamples' test holds no epoch
    (its reason says why); after, its first epoch began after the rise's end."""
    collect = kb.callbacks.CollectSamples(kb.SampleStore(tmp_path / "s"), start_epoch="auto")
    watched = []  # read after CollectSamples' epoch end, before LeaveWarmup's
    _, ends = _fit(1000, 50, warmup_steps=200, callbacks=[collect],
                   on_epoch_end=lambda sampler: watched.append(
                       ([row["start"] for row in collect._rows], step_rise.rise_pending(sampler),
                        collect.verdict and collect.verdict.reason)))
    pending = [rows for rows, rise, _ in watched if rise]
    assert len(pending) >= 5 and all(rows == [] for rows in pending)
    assert all(reason == collection_start.RISING_REASON
               for _, rise, reason in watched if rise)
    last = max(i for i, (_, rise, _) in enumerate(watched) if rise)
    assert ends[last][2] >= step_rise.RISING and ends[-1][2] == step_rise.DONE
    # The rise's last epoch end is the last that may change h: the test's first
    # epoch is the one after it.
    after = [rows for rows, _, _ in watched[last + 1:]]
    assert after and all(rows[0] == ends[last][0] for rows in after)
