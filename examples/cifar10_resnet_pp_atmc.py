"""CIFAR-10 with ResNet++ and ATMC, with the hyperparameters of Heek & Kalchbrenner (2019).

For a GPU/TPU machine with CIFAR-10 prepared for tensorflow-datasets:

    tfds build cifar10 --data_dir /data/tfds      # once, on a machine with internet
    python examples/cifar10_resnet_pp_atmc.py --data-dir /data/tfds --out runs/cifar10_atmc

Paper setup (sec. 5.1): ResNet-56 with 32 filters, batch 128, h0 = 1e-3,
cosine cycles of 50 epochs, 1000 epochs, samples from epoch 150 on (the last
step of each cycle), relativistic momentum with mass m = (0.0003/h0)^-2 and
speed limit c = 0.001/h0 (average and maximum parameter change per step 3e-4
and 1e-3), D = -log(0.9)/h0, group-Laplace prior (b = 5) on the scales.
The paper reports 93.9% accuracy and 0.194 NLL for the posterior predictive.
"""

import argparse
import os

import keras

import keras_bnn as kb
from keras_bnn import console
from keras_bnn.cli import int_at_least

H0 = 1e-3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", default="runs/cifar10_atmc")
    parser.add_argument("--epochs", type=int_at_least(1), default=1000)
    parser.add_argument("--cycle-epochs", type=int_at_least(1), default=50)
    parser.add_argument("--start-epoch", type=int_at_least(0), default=150,
                        help="first epoch (from 0) whose cycle end gives a sample")
    parser.add_argument("--export-dir", default="saved_models/cifar10_atmc")
    args = parser.parse_args(argv)
    last_cycle_end = args.epochs // args.cycle_epochs * args.cycle_epochs - 1
    if last_cycle_end < args.start_epoch:
        parser.error(f"--start-epoch ({args.start_epoch}) must be at most the last cycle's "
                     f"end, epoch {last_cycle_end} of --epochs {args.epochs} in cycles of "
                     f"--cycle-epochs {args.cycle_epochs}: no sample would be collected")

    try:
        train_ds, test_ds, info = kb.data.load_cifar10(
            data_dir=args.data_dir, batch_size=128, augment=False)
    except FileNotFoundError as error:  # CIFAR-10 not prepared: one line, before training
        parser.exit(2, f"{parser.prog}: error: {console.one_line(error)}\n")
    model = kb.models.resnet_pp(info["input_shape"], info["num_classes"], depth=56, width=32)
    sampler = kb.samplers.ATMC(
        step_size=H0, mass=(0.0003 / H0) ** -2, momentum="relativistic",
        speed_limit=0.001 / H0, seed=0)
    model.compile(sampler=sampler, temperature=1.0, train_size=info["num_train"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    store = kb.SampleStore(os.path.join(args.out, "samples"))
    model.fit(train_ds, epochs=args.epochs, callbacks=[
        kb.callbacks.CyclicalSchedule(cycle_epochs=args.cycle_epochs),
        kb.callbacks.CollectSamples(store, start_epoch=args.start_epoch),
        keras.callbacks.BackupAndRestore(os.path.join(args.out, "backup")),
    ])
    ensemble = kb.PosteriorEnsemble.from_store(store)
    labels = kb.data.dataset_labels(test_ds)
    print(kb.metrics.evaluate_probs(ensemble.predict(test_ds), labels))
    print("exported:", ensemble.export(args.export_dir))


if __name__ == "__main__":
    main()
