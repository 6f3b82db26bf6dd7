"""scikit-learn's bundled datasets (no download), with a fixed split and scaling."""

import numpy as np

from keras_bnn.datasets.pipeline import make_dataset, validation_rows
from keras_bnn.validation import argument_error, check_choice, check_fraction

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


def bundled_arrays(name, validation_split=None):
    """The fixed split of one of scikit-learn's bundled datasets, scaled.

    Split: `train_test_split(test_size=BUNDLED[name][2],
    random_state=BUNDLED_SPLIT_SEED)`, stratified by class for the
    classification sets. Scaling: digits' pixel intensities 0..16 are divided
    by 16 (into [0, 1]: standardising would blow rarely-inked border pixels up
    to tens of standard deviations, and posterior samples, which leave the
    weights of such inputs unconstrained, then predict wildly on the test
    images that ink them: measured single-sample test NLL 1.1 against 0.26);
    the other sets' features are standardised with statistics of the rows
    trained on only, x' = (x - mean) / std (std 1 for a feature that is
    constant there); for "diabetes" the target too,
    y' = (y - target_mean) / target_std (info holds both to undo it).

    With ``validation_split`` the test split is left out: the training
    split's rows :func:`~keras_bnn.datasets.pipeline.validation_rows` holds
    out take the test pair's place, and the statistics come from the other
    rows alone (those a run on the split trains on), so no held-out row
    shapes the scaling it is scored under.

    Args:
      name: a key of BUNDLED: "digits", "breast_cancer", "wine", "diabetes".
      validation_split: None (the training and test splits), or the share
        of the training split held out, in (0, 1).

    Returns:
      ((x_train, y_train), (x_test, y_test), info): x float32 [n, d]; y int64
      [n] class labels, or float32 [n] standardised targets for "diabetes";
      with ``validation_split``, the rows trained on and the held-out rows.
      info has "name", "task" ("classification", "binary" or "regression"),
      "num_train", "num_test" (the held-out rows with ``validation_split``),
      "num_classes" (None for regression), "input_shape", "feature_mean",
      "feature_std" (the scaling of every returned row: what a model trained
      on the first pair expects) and, for regression, "target_mean",
      "target_std".

    Raises:
      ValueError: for a name that is not in BUNDLED, or a ``validation_split``
        outside (0, 1) or that holds out no row or every one.
    """
    check_choice(name, "name", tuple(BUNDLED), owner="bundled_arrays")
    if validation_split is not None:
        validation_split = check_fraction(validation_split, "validation_split", "bundled_arrays")
    import sklearn.datasets
    from sklearn.model_selection import train_test_split

    loader, task, num_test, scale = BUNDLED[name]
    x, y = getattr(sklearn.datasets, loader)(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=num_test, random_state=BUNDLED_SPLIT_SEED,
        stratify=None if task == "regression" else y)
    if validation_split is not None:
        kept, held = validation_rows(len(y_train), validation_split)
        if not len(kept) or not len(held):
            raise argument_error("validation_split", f"hold out between 1 and "
                                 f"{len(y_train) - 1} of the {len(y_train)} training rows",
                                 validation_split, "bundled_arrays")
        x_train, x_test = x_train[kept], x_train[held]
        y_train, y_test = y_train[kept], y_train[held]
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
      seed: seed of the per-epoch training shuffle (the split is fixed), or
        None for one drawn at random (another order every call).

    Returns:
      (train_ds, test_ds, info) from `bundled_arrays`.

    Raises:
      ValueError: for an unknown name, a bad batch_size or seed.
    """
    (x_train, y_train), (x_test, y_test), info = bundled_arrays(name)
    return (make_dataset(x_train, y_train, batch_size, shuffle=True, seed=seed),
            make_dataset(x_test, y_test, batch_size), info)
