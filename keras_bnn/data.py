"""Datasets: scikit-learn's bundled sets, the synthetic teacher task and
tensorflow-datasets loaders.

Every loader returns ``(train_ds, test_ds, info)``: batched, prefetched
`tf.data.Dataset`s of ``(inputs, int64 labels)`` (the training set reshuffled
every epoch, the test set in a fixed order) and a dict ``info`` with at least
"name", "num_train" (pass it as ``train_size``), "num_test", "num_classes" and
"input_shape". `load(name, ...)` dispatches on the name.

`load_bundled` serves the small real datasets that scikit-learn ships inside
its package (no download): digits, breast_cancer, wine (classification) and
diabetes (regression), with a fixed split and scaling (see BUNDLED).

The tensorflow-datasets loaders never download unless ``download=True``: a
data directory that does not hold the prepared dataset raises
FileNotFoundError at once, instead of tfds retrying a download for minutes.

Importing this module does not import TensorFlow: the array functions
(`synthetic_teacher`, `bundled_arrays`, `teacher_probs`) are numpy and
scikit-learn, and the functions that build `tf.data` pipelines import
TensorFlow when called (so under ``KERAS_BACKEND=jax`` they still work when
TensorFlow is installed).
"""

import os

import keras
import numpy as np

from keras_bnn.validation import argument_error, check_choice, check_int, check_positive

# Per-channel mean and standard deviation of the CIFAR-10 training images in
# [0, 1] (the widely used published values).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
CIFAR10_PAD = 4  # pixels of zero padding before the random 32x32 crop

#: scikit-learn's bundled datasets: (loader name, task, number of test
#: examples, feature scale). The split is fixed: a stratified
#: (classification) or plain (regression) shuffle split by
#: `sklearn.model_selection.train_test_split` with
#: random_state=BUNDLED_SPLIT_SEED, whatever the `seed` of the run. Feature
#: scale None: standardised with training statistics; a number c: x/c.
BUNDLED = {
    "digits": ("load_digits", "classification", 500, 16.0),          # 1797 = 1297 + 500
    "breast_cancer": ("load_breast_cancer", "binary", 169, None),    # 569 = 400 + 169
    "wine": ("load_wine", "classification", 50, None),               # 178 = 128 + 50
    "diabetes": ("load_diabetes", "regression", 100, None),          # 442 = 342 + 100
}
BUNDLED_SPLIT_SEED = 0

DATASETS = ("synthetic", *BUNDLED, "mnist", "cifar10", "imdb")


# --------------------------------------------------------------------------
# Synthetic teacher task (no download).


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
      seed: integer seed.

    Returns:
      ((x_train, y_train), (x_test, y_test), metadata): x float32
      [n, input_dim], y int64 [n]; metadata is a dict with "name",
      "input_dim", "num_classes", "hidden", "logit_scale", "seed",
      "num_train", "num_test", "teacher" (list of float64 weight matrices for
      `teacher_probs`) and "test_probs" (the teacher's p(y|x_test): its
      accuracy and NLL on the test labels are the Bayes-optimal reference).

    Raises:
      ValueError: if a size is not a positive integer, num_classes < 2 or
        logit_scale <= 0.
    """
    owner = "synthetic_teacher"
    num_train = check_int(num_train, "num_train", 1, owner=owner)
    num_test = check_int(num_test, "num_test", 1, owner=owner)
    input_dim = check_int(input_dim, "input_dim", 1, owner=owner)
    num_classes = check_int(num_classes, "num_classes", 2, owner=owner)
    hidden = tuple(check_int(h, f"hidden[{i}]", 1, owner=owner) for i, h in enumerate(hidden))
    logit_scale = check_positive(logit_scale, "logit_scale", owner)
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


# --------------------------------------------------------------------------
# tf.data pipelines.


def _batched(ds, batch_size, shuffle, seed, example_fn=None, batch_fn=None,
             repeat=False, drop_remainder=False):
    """shuffle -> example_fn -> repeat -> batch -> batch_fn -> prefetch."""
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    batch_size = check_int(batch_size, "batch_size", 1)
    if shuffle:
        # A full-size buffer gives a uniform shuffle; reshuffled every epoch.
        ds = ds.shuffle(int(ds.cardinality()), seed=seed,
                        reshuffle_each_iteration=True)
    if example_fn is not None:
        ds = ds.map(example_fn, num_parallel_calls=tf.data.AUTOTUNE)
    if repeat:
        ds = ds.repeat()
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if batch_fn is not None:
        ds = ds.map(batch_fn, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def make_dataset(x, y, batch_size, shuffle=False, seed=None, repeat=False,
                 drop_remainder=False):
    """A batched, prefetched `tf.data.Dataset` of (x, y) from in-memory arrays.

    Args:
      x: [n, ...] inputs.
      y: [n] labels.
      batch_size: examples per batch, >= 1.
      shuffle: reshuffle the whole set every epoch (full-size buffer).
      seed: shuffle seed (None: a different order every run).
      repeat: repeat forever (then give `fit` a steps_per_epoch).
      drop_remainder: drop the last, smaller batch.

    Returns:
      tf.data.Dataset of (x_batch, y_batch).

    Raises:
      ValueError: if x and y differ in length or are empty, or batch_size is
        not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 0 or y.ndim == 0 or len(x) != len(y) or len(x) == 0:
        raise argument_error("y", "be non-empty, with as many examples as `x`", y,
                             got=f"shapes {x.shape} (x) and {y.shape} (y)")
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return _batched(ds, batch_size, shuffle, seed, repeat=repeat,
                    drop_remainder=drop_remainder)


def dataset_labels(ds):
    """All labels of a finite (inputs, labels) dataset, in order, as a numpy
    array: the `labels` argument of `keras_bnn.metrics` for `model.predict(ds)`
    on an unshuffled dataset (such as the test sets returned here)."""
    return np.concatenate([np.asarray(y) for _, y in ds.as_numpy_iterator()])


# --------------------------------------------------------------------------
# scikit-learn's bundled datasets (no download).


def bundled_arrays(name):
    """The fixed split of one of scikit-learn's bundled datasets, scaled.

    Split: `train_test_split(test_size=BUNDLED[name][2],
    random_state=BUNDLED_SPLIT_SEED)`, stratified by class for the
    classification sets. Scaling: digits' pixel intensities 0..16 are divided
    by 16 (into [0, 1]: standardising would blow rarely-inked border pixels up
    to tens of standard deviations, and posterior samples, which leave the
    weights of such inputs unconstrained, then predict wildly on the test
    images that ink them: measured single-sample test NLL 1.1 against 0.26);
    the other sets' features are standardised with statistics of the training
    split only, x' = (x - mean_train) / std_train (std 1 for a feature that
    is constant there); for "diabetes" the target too,
    y' = (y - target_mean) / target_std (info holds both to undo it).

    Args:
      name: a key of BUNDLED: "digits", "breast_cancer", "wine", "diabetes".

    Returns:
      ((x_train, y_train), (x_test, y_test), info): x float32 [n, d]; y int64
      [n] class labels, or float32 [n] standardised targets for "diabetes";
      info has "name", "task" ("classification", "binary" or "regression"),
      "num_train", "num_test", "num_classes" (None for regression),
      "input_shape", "feature_mean", "feature_std" and, for regression,
      "target_mean", "target_std".

    Raises:
      ValueError: for a name that is not in BUNDLED.
    """
    check_choice(name, "name", tuple(BUNDLED), owner="bundled_arrays")
    import sklearn.datasets
    from sklearn.model_selection import train_test_split

    loader, task, num_test, scale = BUNDLED[name]
    x, y = getattr(sklearn.datasets, loader)(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=num_test, random_state=BUNDLED_SPLIT_SEED,
        stratify=None if task == "regression" else y)
    if scale is None:
        mean, std = x_train.mean(axis=0), x_train.std(axis=0)
        std = np.where(std > 0, std, 1.0)
    else:
        mean, std = np.zeros(x.shape[1]), np.full(x.shape[1], scale)
    x_train, x_test = ((v - mean) / std for v in (x_train, x_test))
    info = {"name": name, "task": task, "num_train": len(x_train),
            "num_test": len(x_test), "input_shape": (x.shape[1],),
            "feature_mean": mean, "feature_std": std}
    if task == "regression":
        target_mean, target_std = float(y_train.mean()), float(y_train.std())
        y_train, y_test = ((v - target_mean) / target_std for v in (y_train, y_test))
        y_train, y_test = y_train.astype(np.float32), y_test.astype(np.float32)
        info.update(num_classes=None, target_mean=target_mean, target_std=target_std)
    else:
        y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)
        info["num_classes"] = int(y.max()) + 1
    return ((x_train.astype(np.float32), y_train),
            (x_test.astype(np.float32), y_test), info)


def load_bundled(name, batch_size=128, seed=0):
    """One of scikit-learn's bundled datasets as tf.data pipelines.

    Args:
      name: a key of BUNDLED.
      batch_size: examples per batch.
      seed: seed of the per-epoch training shuffle (the split is fixed).

    Returns:
      (train_ds, test_ds, info) from `bundled_arrays`.

    Raises:
      ValueError: for an unknown name or a bad batch_size.
    """
    (x_train, y_train), (x_test, y_test), info = bundled_arrays(name)
    return (make_dataset(x_train, y_train, batch_size, shuffle=True, seed=seed),
            make_dataset(x_test, y_test, batch_size), info)


# --------------------------------------------------------------------------
# tensorflow-datasets loaders.


def _tfds_splits(tfds_name, data_dir, download):
    """Returns the (train, test) splits of a tfds dataset as (features, label)
    datasets, the resolved data_dir and the tfds DatasetInfo."""
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built
    import tensorflow_datasets as tfds  # noqa: PLC0415 - slow import, needed only here

    data_dir = os.path.expanduser(data_dir or tfds.core.constants.DATA_DIR)
    builder = tfds.builder(tfds_name, data_dir=data_dir)
    if download:
        builder.download_and_prepare()
    else:
        # Checked on the given data_dir itself (tfds' own `is_prepared` reads
        # the builder's data_dir, which tfds.testing.mock_data redirects).
        info_file = os.path.join(data_dir, builder.info.full_name,
                                 "dataset_info.json")
        if not tf.io.gfile.exists(info_file):
            raise FileNotFoundError(
                f"tensorflow-datasets dataset {tfds_name!r} is not prepared in "
                f"data_dir={data_dir!r} (missing {info_file}). On a machine "
                f"with internet run `tfds build {tfds_name} --data_dir "
                f"{data_dir}` (or tfds.builder({tfds_name!r}, data_dir=...)."
                "download_and_prepare()) and copy that directory here, or pass "
                "download=True.")
    train, test = (builder.as_dataset(split=split, as_supervised=True)
                   for split in ("train", "test"))
    return train, test, data_dir, builder.info


def _info(name, train, test, num_classes, input_shape, data_dir, tfds_info):
    # The pipeline's cardinality (known for tfds datasets) is the number of
    # examples actually served; it is also right under tfds.testing.mock_data.
    return {"name": name, "num_train": int(train.cardinality()),
            "num_test": int(test.cardinality()), "num_classes": num_classes,
            "input_shape": input_shape, "data_dir": data_dir,
            "tfds_info": tfds_info}


def load_mnist(data_dir=None, batch_size=128, download=False, seed=0):
    """MNIST from tensorflow-datasets, pixels scaled to [0, 1].

    Args:
      data_dir: tfds data directory (default: tfds' own, ~/tensorflow_datasets).
      batch_size: examples per batch.
      download: download and prepare the dataset if missing.
      seed: seed of the per-epoch training shuffle.

    Returns:
      (train_ds, test_ds, info): batches of (float32 [b, 28, 28, 1], int64 [b]);
      info as in the module docstring, with "tfds_info".

    Raises:
      FileNotFoundError: if `download` is False and data_dir lacks the dataset.
      ValueError: if batch_size is not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    train, test, data_dir, tfds_info = _tfds_splits("mnist", data_dir, download)
    info = _info("mnist", train, test, 10, (28, 28, 1), data_dir, tfds_info)

    def scale(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    return (_batched(train, batch_size, True, seed, example_fn=scale),
            _batched(test, batch_size, False, None, example_fn=scale), info)


def _cifar_augment(image, seed):
    """Zero-pads by CIFAR10_PAD pixels, takes a random 32x32 crop and flips
    left-right with probability 1/2 (stateless, keyed on a [2] seed)."""
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    padded = tf.pad(image, [[CIFAR10_PAD, CIFAR10_PAD], [CIFAR10_PAD, CIFAR10_PAD],
                            [0, 0]])
    image = tf.image.stateless_random_crop(padded, tf.shape(image), seed=crop_seed)
    return tf.image.stateless_random_flip_left_right(image, seed=flip_seed)


def load_cifar10(data_dir=None, batch_size=128, augment=False, download=False,
                 seed=0):
    """CIFAR-10 from tensorflow-datasets, normalised per channel.

    x = (image/255 - CIFAR10_MEAN) / CIFAR10_STD per channel. With `augment`,
    training images get the cold-posterior paper's augmentation before
    normalisation: 4-pixel zero padding, a random 32x32 crop and a random
    horizontal flip, fresh every epoch and reproducible from `seed`.

    Args:
      data_dir: tfds data directory (default: tfds' own).
      batch_size: examples per batch.
      augment: augment the training set.
      download: download and prepare the dataset if missing.
      seed: seed of the training shuffle and augmentation.

    Returns:
      (train_ds, test_ds, info): batches of (float32 [b, 32, 32, 3], int64 [b]);
      info also has "mean" and "std".

    Raises:
      FileNotFoundError: if `download` is False and data_dir lacks the dataset.
      ValueError: if batch_size is not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    train, test, data_dir, tfds_info = _tfds_splits("cifar10", data_dir, download)
    info = _info("cifar10", train, test, 10, (32, 32, 3), data_dir, tfds_info)
    info.update(mean=CIFAR10_MEAN, std=CIFAR10_STD)

    def normalise(image, label):
        image = tf.cast(image, tf.float32) / 255.0
        return (image - CIFAR10_MEAN) / CIFAR10_STD, label

    def augment_and_normalise(example, aug_seed):
        image, label = example
        return normalise(_cifar_augment(tf.cast(image, tf.float32), aug_seed), label)

    train_fn = normalise
    if augment:
        # Pair every example with a [2] seed from a stream redrawn every epoch.
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        train = tf.data.Dataset.zip((train, seeds.batch(2)))
        train_fn = augment_and_normalise
    return (_batched(train, batch_size, True, seed, example_fn=train_fn),
            _batched(test, batch_size, False, None, example_fn=normalise), info)


def load_imdb(data_dir=None, batch_size=128, vocab_size=20000,
              sequence_length=256, download=False, seed=0):
    """IMDB reviews (tfds "imdb_reviews/plain_text") as integer sequences.

    A `keras.layers.TextVectorization` (lower-case, strip punctuation, split on
    whitespace) is fitted to the training reviews; it maps each review to
    `sequence_length` token ids (truncated or zero-padded; 0 = padding,
    1 = out of vocabulary). Chosen over the deprecated subword configs because
    it needs only the plain-text dataset.

    Args:
      data_dir: tfds data directory (default: tfds' own).
      batch_size: examples per batch.
      vocab_size: vocabulary size including padding and OOV ids.
      sequence_length: tokens per review.
      download: download and prepare the dataset if missing.
      seed: seed of the per-epoch training shuffle.

    Returns:
      (train_ds, test_ds, info): batches of (int64 [b, sequence_length],
      int64 [b]) with labels 0 = negative, 1 = positive; info also has
      "vocab_size" (ids are < vocab_size), "sequence_length" and "vectorizer"
      (the fitted layer, to tokenise new text).

    Raises:
      FileNotFoundError: if `download` is False and data_dir lacks the dataset.
      ValueError: if batch_size, vocab_size or sequence_length is not a
        positive integer.
    """
    vocab_size = check_int(vocab_size, "vocab_size", 1, owner="load_imdb")
    sequence_length = check_int(sequence_length, "sequence_length", 1, owner="load_imdb")
    train, test, data_dir, tfds_info = _tfds_splits("imdb_reviews/plain_text",
                                                    data_dir, download)
    vectorizer = keras.layers.TextVectorization(
        max_tokens=vocab_size, output_sequence_length=sequence_length)
    vectorizer.adapt(train.map(lambda text, label: text).batch(1024))
    info = _info("imdb", train, test, 2, (sequence_length,), data_dir, tfds_info)
    info.update(vocab_size=vocab_size, sequence_length=sequence_length,
                vectorizer=vectorizer)

    def tokenise(text, label):
        return vectorizer(text), label

    return (_batched(train, batch_size, True, seed, batch_fn=tokenise),
            _batched(test, batch_size, False, None, batch_fn=tokenise), info)


def load(name, batch_size=128, **kwargs):
    """Loads a dataset by name.

    Args:
      name: one of DATASETS: "synthetic" (`synthetic_teacher`, keyword
        arguments num_train (default 1000), num_test (default 1000), seed and
        the teacher's shape), the bundled "digits", "breast_cancer", "wine",
        "diabetes" (`load_bundled`, keyword argument seed), "mnist", "cifar10",
        "imdb" (keyword arguments of `load_mnist`, `load_cifar10`, `load_imdb`).
      batch_size: examples per batch.
      **kwargs: passed to the loader.

    Returns:
      (train_ds, test_ds, info) as described in the module docstring; for
      "synthetic", info is the task's metadata plus "input_shape".

    Raises:
      ValueError: for an unknown name, or as raised by the loader.
      FileNotFoundError: as raised by the tfds loaders.
    """
    if name == "synthetic":
        seed = kwargs.get("seed", 0)
        (x_train, y_train), (x_test, y_test), info = synthetic_teacher(
            kwargs.pop("num_train", 1000), kwargs.pop("num_test", 1000), **kwargs)
        info["input_shape"] = (info["input_dim"],)
        return (make_dataset(x_train, y_train, batch_size, shuffle=True, seed=seed),
                make_dataset(x_test, y_test, batch_size), info)
    if name in BUNDLED:
        return load_bundled(name, batch_size=batch_size, **kwargs)
    loaders = {"mnist": load_mnist, "cifar10": load_cifar10, "imdb": load_imdb}
    return loaders[check_choice(name, "name", DATASETS, owner="load")](
        batch_size=batch_size, **kwargs)
