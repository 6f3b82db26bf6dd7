"""The sampler-test harness itself: what it leaves behind in a long pytest run.

A slow-suite process runs ~290 tests; what one test leaves in memory stays for
all the others (measured: one ESS of [12000, 64, 31] draws kept 2.9 GB).
"""

import gc

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import sampler_harness


def _draws():
    rng = np.random.default_rng(5)
    noise = rng.normal(size=(3000, 10, 50))
    return np.cumsum(0.3 * noise, axis=0) * 0.1 + noise  # autocorrelated


def test_total_ess_is_tfps_ess_of_the_whole_array_bit_for_bit():
    samples = _draws()  # 500 coordinates: chunks of 320 and 180
    whole = tfp.mcmc.effective_sample_size(
        tf.convert_to_tensor(samples, tf.float32), filter_beyond_positive_pairs=True)
    np.testing.assert_array_equal(sampler_harness.total_ess(samples),
                                  np.sum(whole.numpy(), axis=0))


def test_total_ess_hands_tensorflow_bounded_chunks(monkeypatch):
    # TensorFlow's oneDNN CPU allocator never returns a buffer it held, so the
    # largest ESS call sets what the process keeps: at most 2**20 values.
    sizes = []
    ess = tfp.mcmc.effective_sample_size

    def recording(states, **kwargs):
        sizes.append(int(np.prod(states.shape)))
        return ess(states, **kwargs)

    monkeypatch.setattr(tfp.mcmc, "effective_sample_size", recording)
    sampler_harness.total_ess(_draws())  # 1.5 M values
    assert sum(sizes) == 3000 * 10 * 50
    assert max(sizes) <= 2**20, sizes


def test_run_chains_leaves_no_traced_loop_behind():
    from keras_bnn import samplers
    from tensorflow.python.eager import context

    def run():
        sampler = samplers.ATMC(step_size=0.01, seed=3)
        sampler.configure(train_size=100, temperature=1.0)
        samples, _ = sampler_harness.run_chains(
            sampler, np.zeros((4, 3), np.float32), lambda theta, step: theta, 20,
            jit_compile=False)
        return samples

    first = run()  # traces the package's own module-level functions once
    functions = set(context.context().list_function_names())
    np.testing.assert_array_equal(run(), first)
    gc.collect()  # the traced graph is a reference cycle
    assert set(context.context().list_function_names()) - functions == set()
