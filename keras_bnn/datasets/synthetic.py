"""The synthetic teacher task of the cold-posterior paper (numpy; no download)."""

import numpy as np

from keras_bnn.datasets.pipeline import draw_seed
from keras_bnn.validation import check_int, check_positive


def teacher_probs(x, teacher):
    """Class probabilities of a teacher MLP (bias-free, tanh hidden units).

    h_0 = x, h_l = tanh(h_{l-1} W_l) for the hidden layers, and
    p(y|x) = softmax(h_L W_out).

    Args:
      x: [N, input_dim] inputs.
      teacher: list of weight matrices, hidden layers first, output layer last
        (as in `synthetic_teacher`'s metadata["teacher"]).

    Returns:
      [N, num_classes] float64 probabilities.
    """
    h = np.asarray(x, dtype=np.float64)
    for w in teacher[:-1]:
        h = np.tanh(h @ w)
    logits = h @ teacher[-1]
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


def synthetic_teacher(num_train, num_test, input_dim=5, num_classes=3,
                      hidden=(10, 10), logit_scale=3.0, seed=0):
    """The well-specified task of the cold-posterior paper: an MLP teacher.

    A random bias-free tanh MLP maps inputs x ~ N(0, I_input_dim) to logits;
    its weights are drawn from W ~ N(0, 1/fan_in) for hidden layers and
    W_out ~ N(0, logit_scale²/fan_in) for the output layer. Each label is a
    categorical draw y ~ softmax(logits), made by inverse-CDF sampling with one
    uniform per example. A student of the same architecture with that prior is
    well specified. (The odd activation without biases keeps the classes
    roughly balanced; `logit_scale` sets how noisy the labels are: with the
    defaults the Bayes-optimal accuracy is about 0.6-0.75, depending on the
    seed, against about 0.4 for always predicting the most frequent class.)

    The teacher, training set and test set come from three independent random
    streams spawned from `seed`: the teacher does not depend on the sizes, the
    test set does not depend on `num_train`, and a larger `num_train` (or
    `num_test`) extends the smaller set (its first examples are identical).

    Args:
      num_train, num_test: numbers of examples, >= 1.
      input_dim: dimension of x, >= 1.
      num_classes: number of classes K, >= 2.
      hidden: widths of the teacher's hidden layers (may be empty).
      logit_scale: standard deviation scale s > 0 of the output weights.
      seed: integer seed in [0, 2**63 - 1] (``load("synthetic")`` shuffles
        the training set with it too), or None: a seed drawn at random
        (another task at every call), recorded in metadata["seed"], from
        which the same task is drawn again.

    Returns:
      ((x_train, y_train), (x_test, y_test), metadata): x float32
      [n, input_dim], y int64 [n]; metadata is a dict with "name",
      "input_dim", "num_classes", "hidden", "logit_scale", "seed",
      "num_train", "num_test", "teacher" (list of float64 weight matrices for
      `teacher_probs`) and "test_probs" (the teacher's p(y|x_test): its
      accuracy and NLL on the test labels are the Bayes-optimal reference).

    Raises:
      ValueError: if a size is not a positive integer, num_classes < 2,
        logit_scale <= 0, or seed is neither None nor an integer in
        [0, 2**63 - 1] (bools too: True is not seed 1).
    """
    owner = "synthetic_teacher"
    num_train = check_int(num_train, "num_train", 1, owner=owner)
    num_test = check_int(num_test, "num_test", 1, owner=owner)
    input_dim = check_int(input_dim, "input_dim", 1, owner=owner)
    num_classes = check_int(num_classes, "num_classes", 2, owner=owner)
    hidden = tuple(check_int(h, f"hidden[{i}]", 1, owner=owner) for i, h in enumerate(hidden))
    logit_scale = check_positive(logit_scale, "logit_scale", owner)
    seed = draw_seed(seed, owner)
    teacher_seq, train_seq, test_seq = np.random.SeedSequence(seed).spawn(3)

    rng = np.random.default_rng(teacher_seq)
    widths = (input_dim,) + hidden + (num_classes,)
    gains = (1.0,) * len(hidden) + (float(logit_scale),)
    teacher = [rng.normal(0.0, gain / np.sqrt(fan_in), size=(fan_in, fan_out))
               for fan_in, fan_out, gain in zip(widths[:-1], widths[1:], gains)]

    def draw(seq, n):
        x_rng, y_rng = (np.random.default_rng(s) for s in seq.spawn(2))
        x = x_rng.standard_normal((n, input_dim))
        p = teacher_probs(x, teacher)
        u = y_rng.random(n)
        # Inverse CDF: the label is the number of cumulative probabilities <= u.
        y = np.minimum(np.sum(np.cumsum(p, axis=1) <= u[:, None], axis=1),
                       num_classes - 1)
        return x.astype(np.float32), y.astype(np.int64), p

    x_train, y_train, _ = draw(train_seq, num_train)
    x_test, y_test, test_probs = draw(test_seq, num_test)
    metadata = {"name": "synthetic", "input_dim": input_dim,
                "num_classes": int(num_classes), "hidden": hidden,
                "logit_scale": float(logit_scale), "seed": seed,
                "num_train": num_train, "num_test": num_test,
                "teacher": teacher, "test_probs": test_probs}
    return (x_train, y_train), (x_test, y_test), metadata
