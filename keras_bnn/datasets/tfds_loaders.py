"""MNIST, CIFAR-10 and IMDB from tensorflow-datasets, as ``tf.data`` pipelines.

The loaders never download unless ``download=True``: a data directory that
does not hold the prepared dataset raises FileNotFoundError at once, instead
of tfds retrying a download for minutes. TensorFlow and tensorflow-datasets
are imported when a loader is called.
"""

import os

import keras

from keras_bnn.datasets.pipeline import batched
from keras_bnn.validation import check_int

# Per-channel mean and standard deviation of the CIFAR-10 training images in
# [0, 1] (the widely used published values).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
CIFAR10_PAD = 4  # pixels of zero padding before the random 32x32 crop


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
                "download=True to keras_bnn.data.load (the keras-bnn command never "
                "downloads).")
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
      seed: seed of the per-epoch training shuffle, or None for one drawn
        at random (another order every call).

    Returns:
      (train_ds, test_ds, info): batches of (float32 [b, 28, 28, 1], int64 [b]);
      info as in :mod:`keras_bnn.data`, with "tfds_info".

    Raises:
      FileNotFoundError: if `download` is False and data_dir lacks the dataset.
      ValueError: if batch_size is not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    train, test, data_dir, tfds_info = _tfds_splits("mnist", data_dir, download)
    info = _info("mnist", train, test, 10, (28, 28, 1), data_dir, tfds_info)

    def scale(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    return (batched(train, batch_size, True, seed, example_fn=scale),
            batched(test, batch_size, False, None, example_fn=scale), info)


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
      seed: seed of the training shuffle and augmentation, or None for one
        drawn at random (another order every call).

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

    # With augment, every example gets a [2] seed of (seed, epoch, position):
    # fresh every epoch, and the same in a resumed run.
    train_fn = augment_and_normalise if augment else normalise
    return (batched(train, batch_size, True, seed, example_fn=train_fn, example_seeds=augment),
            batched(test, batch_size, False, None, example_fn=normalise), info)


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
      seed: seed of the per-epoch training shuffle, or None for one drawn
        at random (another order every call).

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

    return (batched(train, batch_size, True, seed, batch_fn=tokenise),
            batched(test, batch_size, False, None, batch_fn=tokenise), info)
